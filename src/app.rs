//! Wiring: builds every long-lived piece once from a validated [`Config`] (metrics, key ring,
//! codec, upstream pool, bridge, front state), binds the listeners and runs them until shutdown.
//! The key ring is the one piece that changes while the gateway runs: `keys.rs` derives it,
//! `reload.rs` swaps it when the key file changes or on SIGHUP.
//! Tests start a [`Gateway`] on `127.0.0.1:0` in-process; the binary calls [`run`], or
//! [`run_stdio`] for the stdio front (`app/stdio.rs`), which builds the same pieces.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::admin::{Admin, Readiness};
use crate::auth::{Auth, ANONYMOUS};
use crate::bridge::{Bridge, Clock, ParkRegistry};
use crate::capabilities::ClientCaps;
use crate::cluster::{Cluster, Forwarder};
use crate::config::{Config, StateConfig, UpstreamTarget};
use crate::defaults;
use crate::demo::{DemoHandle, DemoOptions};
use crate::front::{self, FrontState};
use crate::legacy::{LegacyError, LegacyFront};
use crate::limits::Limits;
use crate::metrics::{Metrics, MetricsError};
use crate::mrtr::{CodecSettings, LegacyVersion, LiveRing};
use crate::server::{serve, tls_acceptor, ServeOptions, ServerError};
use crate::state_store::{StateStore, StoreError, TaskResults};
use crate::stdio_front::StdioFrontError;
use crate::subscriptions::Subscriptions;
use crate::tasks::Tasks;
use crate::upstream::{Pool, StdioSettings, UpstreamError, UpstreamSettings};

mod bind;
mod bound;
mod keys;
mod reload;
#[cfg(test)]
mod shutdown_tests;
mod stdio;

pub use bind::{BindError, Listener};
pub use keys::KeyFileError;
pub use reload::{ReloadHandle, ReloadOutcome};
pub use stdio::run_stdio;

use bind::{bind, local};
use keys::KeySource;
use reload::Watcher;

/// Errors that stop the gateway from starting (or, for the stdio front, from serving).
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("{0}")]
    Keys(#[from] KeyFileError),
    #[error("metrics: {0}")]
    Metrics(#[from] MetricsError),
    #[error("upstream: {0}")]
    Upstream(#[from] UpstreamError),
    #[error("{0}")]
    Bind(#[from] BindError),
    #[error("embedded demo server: {0}")]
    Demo(std::io::Error),
    #[error("front TLS: {0}")]
    Tls(#[from] ServerError),
    #[error("{0}")]
    Stdio(#[from] StdioFrontError),
    #[error("legacy clients: {0}")]
    Legacy(#[from] LegacyError),
    #[error("auth: {0}")]
    Auth(#[from] crate::auth::AuthSetupError),
    #[error("single-use state store: {0}")]
    StateStore(#[from] StoreError),
    #[error("tracing: {0}")]
    Tracing(#[from] crate::telemetry::TelemetryError),
    #[error("cluster: {0}")]
    Cluster(String),
}

pub use bound::Bound;

/// Added to the longest bound below the front before its own timeout cuts a request.
const FRONT_TIMEOUT_SLACK: Duration = Duration::from_secs(5);

/// A running gateway.
pub struct Gateway {
    pub front_addr: SocketAddr,
    /// The internal listener other replicas forward retries to (`cluster.listen`).
    pub cluster_addr: Option<SocketAddr>,
    pub admin_addr: Option<SocketAddr>,
    /// The embedded demo server, when no upstream was configured.
    pub demo: Option<DemoHandle>,
    pub metrics: Arc<Metrics>,
    pub ready: Readiness,
    /// Reloads the state key file now (what SIGHUP does).
    pub keys: ReloadHandle,
    pool: Arc<Pool>,
    legacy: Option<Arc<LegacyFront>>,
    subscriptions: Option<Arc<Subscriptions>>,
    /// The calls parked here, cancelled upstream at shutdown.
    parks: Option<Arc<ParkRegistry>>,
    /// The tasks running here, stopped and cancelled upstream at shutdown.
    task_bridge: Option<Arc<Tasks>>,
    stop: watch::Sender<bool>,
    tasks: JoinSet<()>,
    /// The admin listener stops last, so `/readyz` answers 503 while the front drains.
    stop_admin: watch::Sender<bool>,
    admin_tasks: JoinSet<()>,
    /// The span exporter, flushed once the front has drained.
    tracing: Option<Arc<crate::telemetry::Tracing>>,
}

// === impl Gateway ===

impl Gateway {
    /// Builds everything and starts serving.
    pub async fn start(cfg: Config) -> Result<Self, AppError> {
        Self::start_with_clock(cfg, Clock::System).await
    }

    /// [`Gateway::start`], with the bridge's rounds timed by `clock` (tests move a manual one).
    pub async fn start_with_clock(cfg: Config, clock: Clock) -> Result<Self, AppError> {
        let metrics = Arc::new(Metrics::new()?);
        let (live, watcher) = live_keys(&cfg, &metrics)?;
        let demo = embedded_demo(&cfg)?;
        let settings = upstream_settings(&cfg, demo.as_ref());
        let pool = Arc::new(Pool::with_metrics(settings.clone(), metrics.pool.clone())?);
        let legacy = legacy_front(&cfg, &settings, &metrics, &live, pool.connection_bound())?;
        let auth = Auth::start(&cfg.auth, &cfg.front.path, metrics.auth.clone(), &metrics.outbound).await?;
        let keys_check = auth.readiness_check();
        let tracing = crate::telemetry::Tracing::start(cfg.tracing.as_ref(), &metrics.outbound)?;
        let mut front_state =
            front_state_with(&cfg, &metrics, &pool, clock, auth, live)?.with_tracing(tracing.clone());
        if let Some(legacy) = &legacy {
            front_state = front_state.with_legacy(legacy.clone());
        }
        let subscriptions = subscriptions(&cfg, &pool, &metrics);
        front_state = front_state.with_subscriptions(subscriptions.clone());
        let version = front_state.upstream_version;
        let (stop, stopped) = watch::channel(false);
        let ready = Readiness::default();
        if let Some(check) = keys_check {
            ready.require(check);
        }
        let mut tasks = JoinSet::new();
        let keys = match watcher {
            Some(watcher) => watcher.spawn(&mut tasks, signal(stopped.clone())),
            None => ReloadHandle::none(),
        };
        let front_listener = bind(Listener::Front, cfg.front.listen).await?;
        let front_addr = local(Listener::Front, &front_listener, cfg.front.listen)?;
        let tls = match &cfg.front.tls {
            Some(files) => Some(tls_acceptor(&files.cert, &files.key)?),
            None => None,
        };
        let opts = ServeOptions {
            max_connections: cfg.front.max_connections,
            drain: cfg.front.drain,
            header_read_timeout: cfg.front.read_timeout,
            handshake_timeout: cfg.front.handshake_timeout,
            idle_timeout: cfg.front.idle_timeout,
            tls,
        };
        let single_use = front_state.bridge.single_use().cloned();
        let parks = front_state.bridge.parks().cloned();
        let task_bridge = front_state.tasks.clone();
        let front_state = Arc::new(front_state);
        let timeout = front_timeout(&cfg);
        let cluster_addr = match cfg.cluster.listen {
            Some(addr) => {
                let tls = cfg.cluster.tls.as_ref();
                Some(spawn_cluster(&mut tasks, addr, tls, &front_state, &metrics, (&stopped, timeout)).await?)
            }
            None => None,
        };
        let service = front::stack(front_state, timeout);
        tasks.spawn(serve(front_listener, service, opts, signal(stopped.clone())));
        let (stop_admin, admin_stopped) = watch::channel(false);
        let mut admin_tasks = JoinSet::new();
        let admin_addr = match cfg.admin_listen {
            Some(addr) => {
                let front = &cfg.front;
                Some(
                    spawn_admin(&mut admin_tasks, addr, &metrics, &ready, &pool, front, admin_stopped)
                        .await?,
                )
            }
            None => None,
        };
        if let Some(store) = single_use {
            ready.set_state_store(false);
            let watch =
                crate::state_store::watch(store, ready.clone(), metrics.clone(), signal(stopped.clone()));
            tasks.spawn(watch);
        }
        let upstream = settings.target_name();
        tasks.spawn(probe_readiness(pool.clone(), (version, upstream), ready.clone(), signal(stopped)));
        Ok(Self {
            front_addr,
            cluster_addr,
            admin_addr,
            demo,
            metrics,
            ready,
            keys,
            pool,
            legacy,
            subscriptions,
            parks,
            task_bridge,
            stop,
            tasks,
            stop_admin,
            admin_tasks,
            tracing,
        })
    }

    /// The front URL clients use.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.front_addr)
    }

    /// Withdraws readiness (`/readyz` answers 503 from here on), stops accepting, drains, waits
    /// for the front to end, cancels the parked calls and stops the running tasks upstream,
    /// then closes the pooled upstream sessions, so that a rollout does not leave the legacy
    /// server holding orphaned ones; the admin listener stops last.
    pub async fn shutdown(mut self) {
        self.ready.set_unready();
        // Listen streams never end by themselves: they end now, gracefully, so the drain
        // does not wait for them.
        if let Some(subscriptions) = &self.subscriptions {
            subscriptions.stop();
        }
        let _ = self.stop.send(true);
        while self.tasks.join_next().await.is_some() {}
        if let Some(subscriptions) = &self.subscriptions {
            subscriptions.close_sessions().await;
        }
        if let Some(parks) = &self.parks {
            if tokio::time::timeout(defaults::SHUTDOWN_CLOSE, parks.cancel_all()).await.is_err() {
                tracing::warn!("gave up cancelling parked calls");
            }
        }
        if let Some(tasks) = &self.task_bridge {
            let stopped = tasks.stop_all(defaults::SHUTDOWN_CLOSE).await;
            tracing::info!(stopped, "running tasks stopped and cancelled upstream");
        }
        close_sessions(&self.pool).await;
        if let Some(legacy) = &self.legacy {
            let closing = legacy.close_all();
            if tokio::time::timeout(defaults::SHUTDOWN_CLOSE, closing).await.is_err() {
                tracing::warn!("gave up closing legacy sessions");
            }
        }
        // Every request has ended, so every span has: the last ones are exported now.
        if let Some(tracing) = self.tracing.take() {
            tracing.shutdown().await;
        }
        let _ = self.stop_admin.send(true);
        while self.admin_tasks.join_next().await.is_some() {}
        if let Some(demo) = self.demo.take() {
            let _ = demo.shutdown().await;
        }
    }
}

/// Runs the gateway until `shutdown` completes. When a listener asks for port 0, the addresses
/// bound are printed on stderr as one line ([`Bound::line`]):
/// `mrtr-gateway: bound front=ADDR admin=ADDR` (`admin=none` without an admin listener).
pub async fn run(cfg: Config, shutdown: impl Future<Output = ()>) -> Result<(), AppError> {
    let path = cfg.front.path.clone();
    let picked = picks_a_port(&cfg);
    // Before anything can report ready: from here on SIGHUP reloads keys instead of ending us.
    let hangups = reload::Hangups::install();
    let gateway = Gateway::start(cfg).await?;
    announce(&gateway, &path);
    if picked {
        print_bound(&gateway);
    }
    tokio::select! {
        biased;
        () = shutdown => {}
        never = hangups.reload_each(&gateway.keys) => match never {},
    }
    tracing::info!("shutting down: draining in-flight requests");
    gateway.shutdown().await;
    Ok(())
}

/// DELETEs every idle upstream session, giving up after [`defaults::SHUTDOWN_CLOSE`].
async fn close_sessions(pool: &Pool) {
    match tokio::time::timeout(defaults::SHUTDOWN_CLOSE, pool.close_idle()).await {
        Ok(sessions) => tracing::info!(sessions, "closed the pooled upstream sessions"),
        Err(_) => tracing::warn!(budget = ?defaults::SHUTDOWN_CLOSE, "gave up closing upstream sessions"),
    }
}

/// True when a listener asks for port 0: the system picks a free port, and only the gateway can
/// say which.
fn picks_a_port(cfg: &Config) -> bool {
    cfg.front.listen.port() == 0 || cfg.admin_listen.is_some_and(|a| a.port() == 0)
}

/// One fixed line on stderr naming the addresses bound, for whoever started the process with
/// port 0 (a test harness, a supervisor): reading it, rather than picking a port, releasing it
/// and passing it on, leaves no moment in which another process can take the port.
fn print_bound(gw: &Gateway) {
    eprintln!("{}", Bound { front: gw.front_addr, admin: gw.admin_addr }.line());
}

fn announce(gw: &Gateway, path: &str) {
    let url = gw.url(path);
    tracing::info!(front = %url, admin = ?gw.admin_addr, "mrtr-gateway listening");
    if let Some(demo) = &gw.demo {
        tracing::info!(demo_upstream = %demo.url(), "no upstream configured: fronting the embedded demo legacy server");
        println!(
            "mrtr-gateway is serving MCP 2026-07-28 at {url} in front of the embedded demo legacy server."
        );
        println!("Try it (a tool that asks for your name):\n{}", example_curl(&url));
    }
}

fn example_curl(url: &str) -> String {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "greet", "arguments": {},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}}});
    format!(
        "curl -s {url} -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \\\n  \
         -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' -H 'Mcp-Name: greet' \\\n  -d '{body}'"
    )
}

/// The front's state over `pool`: the bridge, its state codec, the client authentication and,
/// unless `legacy.enabled = false`, the legacy relay, as [`Gateway::start`] builds them; its key
/// ring is never reloaded (the front's own tests, which configure an upstream URL).
#[cfg(test)]
pub(crate) fn front_state(
    cfg: &Config,
    metrics: &Arc<Metrics>,
    pool: &Arc<Pool>,
) -> Result<FrontState, AppError> {
    let (keys, _no_reloads) = live_keys(cfg, metrics)?;
    let settings = upstream_settings(cfg, None);
    let legacy = legacy_front(cfg, &settings, metrics, &keys, pool.connection_bound())?;
    let auth = Auth::new(&cfg.auth, metrics.auth.clone());
    let state = front_state_with(cfg, metrics, pool, Clock::System, auth, keys)?;
    Ok(match legacy {
        Some(legacy) => state.with_legacy(legacy),
        None => state,
    })
}

pub(crate) fn front_state_with(
    cfg: &Config,
    metrics: &Arc<Metrics>,
    pool: &Arc<Pool>,
    clock: Clock,
    auth: Auth,
    keys: Arc<LiveRing>,
) -> Result<FrontState, AppError> {
    let version = cfg.upstream.protocol_version;
    let (codec, mrtr) = (codec_settings(&cfg.state), cfg.mrtr.clone());
    let mut bridge = Bridge::new(pool.clone(), keys.clone(), codec, metrics.clone(), mrtr, version)
        .with_clock(clock)
        .with_sensitive(cfg.elicitation.sensitive);
    let mut tasks = cfg
        .tasks
        .enabled
        .then(|| Tasks::new(cfg.tasks.clone(), pool.clone(), keys.clone(), version, metrics.tasks.clone()))
        .map(|t| t.with_sensitive(cfg.elicitation.sensitive));
    if let Some(url) = &cfg.cluster.advertise_url {
        let owner_run = cfg.mrtr.total_timeout + cfg.cluster.connect_timeout + FRONT_TIMEOUT_SLACK;
        // A forwarded retry comes from one front request: the front's bound bounds them.
        let bound = metrics.outbound.bound("forward", cfg.front.max_connections, cfg.cluster.connect_timeout);
        let bounds = (cfg.cluster.connect_timeout, cfg.cluster.accept_timeout);
        let forwarder = Forwarder::new(bounds, keys, owner_run, &cfg.cluster.forward_tls, &bound)
            .map_err(|e| AppError::Cluster(format!("forwarding TLS: {e}")))?;
        let forwarder = Arc::new(forwarder);
        bridge = bridge.with_advertise_url(&url.to_string()).with_forwarder(forwarder.clone());
        tasks = tasks.map(|t| t.with_owner(&url.to_string()).with_link(forwarder));
    }
    if let Some(url) = &cfg.state.redis_url {
        let store = Arc::new(StateStore::new(url, cfg.state.clock_skew)?);
        if cfg.state.single_use.is_some() {
            bridge = bridge.with_single_use(store.clone());
        }
        tasks = tasks.map(|t| t.with_store(Arc::new(TaskResults::new(store, metrics.clone()))));
    }
    let tasks = tasks.map(Arc::new);
    let front = FrontState::new(cfg.front.clone(), auth, metrics.clone(), pool.clone(), bridge, version);
    Ok(front.with_limits(Limits::new(&cfg.limits)).with_tasks(tasks))
}

/// The key ring every request reads, derived once, and the watcher of its key file if any.
pub(crate) fn live_keys(
    cfg: &Config,
    metrics: &Arc<Metrics>,
) -> Result<(Arc<LiveRing>, Option<Watcher>), AppError> {
    let source = KeySource::new(&cfg.state);
    let (ring, digest) = source.initial()?;
    metrics.state_keys.set(ring.len() as i64);
    let live = Arc::new(LiveRing::new(ring));
    let watcher = Watcher::new(source, live.clone(), metrics.clone(), cfg.state.key_file_poll, digest);
    Ok((live, watcher))
}

/// The front's backstop timeout: past every bound of its own the bridge and the pool apply (a
/// whole run, one upstream request, a connect), so those answer first with their precise errors.
fn front_timeout(cfg: &Config) -> Duration {
    let bounded = cfg.mrtr.total_timeout.max(cfg.upstream.request_timeout);
    bounded + cfg.upstream.connect_timeout + FRONT_TIMEOUT_SLACK
}

pub(crate) fn upstream_settings(cfg: &Config, demo: Option<&DemoHandle>) -> UpstreamSettings {
    let mut s = match (&cfg.upstream.target, demo) {
        (UpstreamTarget::Url(u), _) => UpstreamSettings::new(u.clone()),
        (UpstreamTarget::Sse(u), _) => UpstreamSettings::legacy_sse(u.clone()),
        (UpstreamTarget::Command(c), _) => UpstreamSettings::stdio(stdio_settings(c)),
        (UpstreamTarget::Embedded, Some(d)) => UpstreamSettings::new(d.url().parse().unwrap_or_default()),
        (UpstreamTarget::Embedded, None) => UpstreamSettings::new(http::Uri::default()),
    };
    s.roots =
        cfg.upstream.roots.as_ref().map(|uris| {
            Arc::new(uris.iter().map(|uri| json!({ "uri": uri })).collect::<serde_json::Value>())
        });
    s.extra_headers = cfg.upstream.headers.iter().cloned().collect();
    s.tls = cfg.upstream.tls.clone();
    s.preferred_version = cfg.upstream.protocol_version;
    s.connect_timeout = cfg.upstream.connect_timeout;
    s.request_timeout = cfg.upstream.request_timeout;
    s.pool_max_sessions = cfg.upstream.pool_max_sessions;
    s.pool_idle_timeout = cfg.upstream.pool_idle;
    s.pool_max_queued = cfg.upstream.pool_max_queued;
    s.pool_acquire_timeout = cfg.upstream.pool_acquire_timeout;
    s.pool_max_per_key = cfg.upstream.pool_max_per_key;
    s.pool_max_per_principal = cfg.upstream.pool_max_per_principal;
    s.pool_min_warm = cfg.upstream.pool_min_warm;
    s.listen_sessions = cfg.subscriptions.upstream_sessions();
    s.max_connections = cfg.upstream.max_connections;
    s.max_connecting = cfg.upstream.max_connecting;
    s
}

/// The embedded demo, started when no upstream is configured.
fn embedded_demo(cfg: &Config) -> Result<Option<DemoHandle>, AppError> {
    match &cfg.upstream.target {
        UpstreamTarget::Embedded => {
            Some(crate::demo::spawn_loopback(demo_options(cfg)).map_err(AppError::Demo)).transpose()
        }
        UpstreamTarget::Url(_) | UpstreamTarget::Sse(_) | UpstreamTarget::Command(_) => Ok(None),
    }
}

/// The embedded demo accepts every connection and session the pool may hold, and then some
/// (sessions being retired are still open there): a server that stops accepting leaves the
/// gateway's connections queued in its listen backlog, where no timeout but the request's ends them.
fn demo_options(cfg: &Config) -> DemoOptions {
    let upstream = &cfg.upstream;
    let defaults = DemoOptions::default();
    DemoOptions {
        max_connections: defaults.max_connections.max(upstream.max_connections + upstream.max_connecting),
        max_sessions: defaults
            .max_sessions
            .max(2 * upstream.pool_max_sessions + cfg.subscriptions.upstream_sessions()),
        ..defaults
    }
}

fn stdio_settings(c: &crate::config::CommandConfig) -> StdioSettings {
    let mut s = StdioSettings::new(c.program.clone(), c.args.clone());
    s.env = c.env.iter().map(|(k, v)| (k.clone(), v.expose().to_owned())).collect();
    s.env_passthrough = c.env_passthrough.clone();
    s.cwd = c.cwd.clone();
    s.max_line_bytes = c.max_line_bytes;
    s
}

/// The `subscriptions/listen` bridge, unless it is off (`subscriptions.enabled = false`).
fn subscriptions(cfg: &Config, pool: &Arc<Pool>, metrics: &Metrics) -> Option<Arc<Subscriptions>> {
    let on = cfg.subscriptions.enabled;
    on.then(|| Arc::new(Subscriptions::new(pool.clone(), cfg.subscriptions, metrics.subscriptions.clone())))
}

/// The relay of legacy clients, unless they are refused (`legacy.enabled = false`). It seals
/// session ids with the state key ring in use (derived under the session-id label).
fn legacy_front(
    cfg: &Config,
    settings: &UpstreamSettings,
    metrics: &Metrics,
    keys: &Arc<LiveRing>,
    bound: Option<crate::outbound::Bound>,
) -> Result<Option<Arc<LegacyFront>>, AppError> {
    if !cfg.legacy.enabled {
        tracing::info!("legacy clients are refused (legacy.enabled = false)");
        return Ok(None);
    }
    let settings = Arc::new(settings.clone());
    Ok(Some(LegacyFront::new(&cfg.legacy, settings, keys.clone(), metrics.legacy.clone(), bound)?))
}

fn codec_settings(state: &StateConfig) -> CodecSettings {
    CodecSettings { ttl: state.ttl, skew: state.clock_skew, max_token_bytes: state.max_token_bytes }
}

/// Starts the admin listener, with its own connection cap and the front's connection
/// deadlines: an orchestrator's probes must still get in while clients hold the front's slots.
async fn spawn_admin(
    tasks: &mut JoinSet<()>,
    addr: SocketAddr,
    metrics: &Arc<Metrics>,
    ready: &Readiness,
    pool: &Arc<Pool>,
    front: &crate::config::FrontConfig,
    stopped: watch::Receiver<bool>,
) -> Result<SocketAddr, AppError> {
    let listener = bind(Listener::Admin, addr).await?;
    let bound = local(Listener::Admin, &listener, addr)?;
    let pool = pool.clone();
    let admin = Admin::new(metrics.clone(), ready.clone(), Arc::new(move || pool.size()));
    let opts = ServeOptions {
        max_connections: defaults::ADMIN_MAX_CONNECTIONS,
        drain: defaults::ADMIN_DRAIN,
        header_read_timeout: defaults::READ_TIMEOUT,
        handshake_timeout: front.handshake_timeout,
        idle_timeout: front.idle_timeout,
        tls: None,
    };
    tasks.spawn(serve(listener, admin, opts, signal(stopped)));
    Ok(bound)
}

/// Starts the internal listener that serves retries forwarded by other replicas, over TLS when
/// `cluster.tls_cert_file` is set.
async fn spawn_cluster(
    tasks: &mut JoinSet<()>,
    addr: SocketAddr,
    tls: Option<&crate::config::TlsFiles>,
    front: &Arc<FrontState>,
    metrics: &Arc<Metrics>,
    (stopped, front_timeout): (&watch::Receiver<bool>, Duration),
) -> Result<SocketAddr, AppError> {
    let tls = match tls {
        Some(files) => Some(
            tls_acceptor(&files.cert, &files.key)
                .map_err(|e| AppError::Cluster(format!("internal listener TLS: {e}")))?,
        ),
        None => None,
    };
    let listener = bind(Listener::Cluster, addr).await?;
    let bound = local(Listener::Cluster, &listener, addr)?;
    let keys = front.bridge.keys().clone();
    let cluster = Cluster::with_tasks(front.bridge.clone(), keys, metrics.clone(), front.tasks.clone());
    let opts = ServeOptions {
        max_connections: front.cfg.max_connections,
        drain: front.cfg.drain,
        header_read_timeout: front.cfg.read_timeout,
        handshake_timeout: front.cfg.handshake_timeout,
        idle_timeout: front.cfg.idle_timeout,
        tls,
    };
    let limits = crate::front::StackLimits::of(&front.cfg, front_timeout);
    tasks.spawn(serve(listener, cluster.service(limits), opts, signal(stopped.clone())));
    Ok(bound)
}

/// Marks the gateway ready once the upstream answers an `initialize`, retrying with backoff;
/// each failed try is logged naming the upstream (`upstream`) and why.
async fn probe_readiness(
    pool: Arc<Pool>,
    (version, upstream): (LegacyVersion, String),
    ready: Readiness,
    stop: impl Future<Output = ()>,
) {
    let probe = async {
        let caps =
            ClientCaps::from_modern(&json!({})).map(|c| (c.fingerprint(), c.legacy_initialize(version)));
        let Ok((fingerprint, init)) = caps else { return };
        let mut delay = Duration::from_millis(100);
        loop {
            match pool.lease((Arc::from(ANONYMOUS), fingerprint), &init).await {
                Ok(lease) => {
                    // Back in the pool before anyone can see the gateway ready: a call that
                    // came in between would not find it idle and would open a second session.
                    drop(lease);
                    ready.set_ready();
                    tracing::info!("upstream answered initialize: ready");
                    return;
                }
                Err(e) => {
                    let error = crate::logging::chain(&e);
                    tracing::warn!(%upstream, %error, retry_in = ?delay, "upstream not reachable yet");
                }
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_secs(5));
        }
    };
    tokio::select! { _ = probe => {}, _ = stop => {} }
}

async fn signal(mut stopped: watch::Receiver<bool>) {
    let _ = stopped.wait_for(|s| *s).await;
}
