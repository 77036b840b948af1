//! Wiring of the stdio front: the same pieces as the HTTP gateway (metrics, key ring, codec,
//! pool, bridge, the front stack), but no listener. The stack is served on this process's
//! stdin and stdout by [`crate::stdio_front`]; the admin listener is not started.

use std::future::Future;
use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinSet;

use super::reload::Hangups;
use super::{
    close_sessions, embedded_demo, front_state_with, front_timeout, live_keys, signal, subscriptions,
    upstream_settings, AppError, ReloadHandle,
};
use crate::auth::Auth;
use crate::clock::Clock;
use crate::config::{AuthConfig, Config};
use crate::front;
use crate::metrics::Metrics;
use crate::stdio_front::{self, StdioOptions};
use crate::telemetry::Tracing;
use crate::upstream::Pool;

/// Serves the front on stdin/stdout until stdin ends or `shutdown` completes, then drains,
/// stops the running tasks and closes the upstream sessions.
pub async fn run_stdio(cfg: Config, shutdown: impl Future<Output = ()>) -> Result<(), AppError> {
    let cfg = for_stdio(cfg);
    let metrics = Arc::new(Metrics::new()?);
    let hangups = Hangups::install();
    let (keys, watcher) = live_keys(&cfg, &metrics)?;
    let (stop, stopped) = watch::channel(false);
    let mut tasks = JoinSet::new();
    let reloads = match watcher {
        Some(watcher) => watcher.spawn(&mut tasks, signal(stopped)),
        None => ReloadHandle::none(),
    };
    let demo = embedded_demo(&cfg)?;
    if let Some(demo) = &demo {
        tracing::info!(demo_upstream = %demo.url(), "no upstream configured: fronting the embedded demo legacy server");
    }
    let settings = upstream_settings(&cfg, demo.as_ref());
    let pool = Arc::new(Pool::with_metrics(settings, metrics.pool.clone())?);
    let auth = Auth::new(&cfg.auth, metrics.auth.clone());
    let tracing = Tracing::start(cfg.tracing.as_ref(), &metrics.outbound)?;
    let state = front_state_with(&cfg, &metrics, &pool, Clock::System, auth, keys)?;
    let subscriptions = subscriptions(&cfg, &pool, &metrics);
    let state = state.without_param_headers().with_tracing(tracing.clone());
    let state = Arc::new(state.with_subscriptions(subscriptions.clone()));
    let task_bridge = state.tasks.clone();
    let service = front::stack(state, front_timeout(&cfg));
    let opts = StdioOptions {
        path: cfg.front.path.clone(),
        max_line_bytes: cfg.front.max_body_bytes,
        max_in_flight: cfg.front.max_in_flight,
        drain: cfg.front.drain,
    };
    tracing::info!("mrtr-gateway serving MCP 2026-07-28 on stdin/stdout");
    // Listen streams never end by themselves: at the end of input they end gracefully.
    let stop_listening = || subscriptions.iter().for_each(|s| s.stop());
    let (stdin, stdout) = (tokio::io::stdin(), tokio::io::stdout());
    let serving = stdio_front::serve_then_stop(service, stdin, stdout, opts, shutdown, stop_listening);
    let served = tokio::select! {
        biased;
        served = serving => served,
        never = hangups.reload_each(&reloads) => match never {},
    };
    let _ = stop.send(true);
    while tasks.join_next().await.is_some() {}
    if let Some(subscriptions) = &subscriptions {
        subscriptions.close_sessions().await;
    }
    // With the client gone no one polls its tasks: they are cancelled upstream.
    if let Some(tasks) = &task_bridge {
        tasks.stop_all(crate::defaults::SHUTDOWN_CLOSE).await;
    }
    close_sessions(&pool).await;
    if let Some(tracing) = tracing {
        tracing.shutdown().await;
    }
    if let Some(demo) = demo {
        let _ = demo.shutdown().await;
    }
    Ok(served?)
}

/// What does not apply on stdio: the client launched this process, so there is no bearer token
/// to check (the principal is `anonymous`; rules configured without authentication still
/// filter), and no listener is opened. With one client there is
/// no one to share with: its shares of the upstream sessions and parked calls are the whole of
/// them (the defaults with auth configured would be a quarter).
fn for_stdio(mut cfg: Config) -> Config {
    if matches!(cfg.auth, AuthConfig::Jwt(_)) {
        tracing::warn!("auth is configured but does not apply on stdio: every request is anonymous");
        cfg.auth = AuthConfig::OPEN;
    }
    cfg.upstream.pool_max_per_principal = cfg.upstream.pool_max_sessions;
    cfg.mrtr.park.max_parked_per_principal = cfg.mrtr.park.max_parked;
    if cfg.admin_listen.take().is_some() {
        tracing::info!("the admin listener is not started in stdio mode");
    }
    cfg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_one_stdio_client_gets_every_session_and_parked_call_even_with_auth_configured() {
        let toml = "[auth]\nmode = \"jwt\"\njwt_hs256_secret = \"a-secret-of-the-tests\"\n";
        let cfg = Config::from_toml(toml).expect("config");
        assert!(cfg.upstream.pool_max_per_principal < cfg.upstream.pool_max_sessions, "a quarter with auth");
        let cfg = for_stdio(cfg);
        assert!(matches!(&cfg.auth, AuthConfig::None { rules } if rules.is_empty()));
        assert_eq!(cfg.upstream.pool_max_per_principal, cfg.upstream.pool_max_sessions);
        assert_eq!(cfg.mrtr.park.max_parked_per_principal, cfg.mrtr.park.max_parked);
    }

    #[test]
    fn rules_without_authentication_still_filter_on_stdio() {
        let cfg =
            Config::from_toml("[[auth.rules]]\ntools = [\"*\"]\ndeny_tools = [\"rm\"]").expect("config");
        assert_eq!(for_stdio(cfg).auth.rules().len(), 1);
    }
}
