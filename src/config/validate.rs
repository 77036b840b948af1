//! Turns a [`RawConfig`] into a [`Config`]: parses addresses, URLs, header names, durations and
//! keys once, fills defaults, and checks every bound. Errors name the field and the reason.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use http::Uri;

use super::raw::{
    RawAdmin, RawConfig, RawElicitation, RawFront, RawLegacy, RawLog, RawMrtr, RawState, RawUpstream,
    RawUpstreamTls,
};
use super::*;
use crate::config::tls::{ClientIdentity, TlsSettings};
use crate::defaults as d;
use crate::mrtr::LegacyVersion;
use crate::protocol::LEGACY_VERSIONS;

/// Validates a raw configuration.
pub fn validate(raw: RawConfig) -> Result<Config, ConfigError> {
    let subscriptions = subscriptions::subscriptions(raw.subscriptions)?;
    let auth = super::auth::validate(raw.auth)?;
    // With authentication, bounds every client shares get a per-principal share by default.
    let authenticated = matches!(auth, AuthConfig::Jwt(_));
    let mrtr = mrtr(raw.mrtr, authenticated)?;
    let legacy = legacy(raw.legacy, authenticated)?;
    let legacy_sessions = if legacy.enabled { legacy.max_sessions } else { 0 };
    let upstream =
        upstream(raw.upstream, (subscriptions.upstream_sessions(), legacy_sessions), authenticated)?;
    let tasks = tasks::tasks(raw.tasks)?;
    if tasks.long_after.is_some_and(|after| after >= upstream.request_timeout) {
        // Until it becomes a task, the call is bounded by the request timeout.
        return Err(ConfigError::invalid(
            "tasks.long_after_ms",
            "must be shorter than upstream.request_timeout_ms",
        ));
    }
    Ok(Config {
        front: front(raw.front)?,
        admin_listen: admin(raw.admin)?,
        upstream,
        limits: limits::limits(raw.limits, mrtr.max_rounds)?,
        mrtr,
        state: state(raw.state)?,
        auth,
        log: log(raw.log)?,
        legacy,
        subscriptions,
        tasks,
        cluster: park::cluster(raw.cluster)?,
        tracing: tracing::tracing(raw.tracing)?,
        elicitation: elicitation(raw.elicitation)?,
    })
}

fn elicitation(raw: RawElicitation) -> Result<ElicitationConfig, ConfigError> {
    let text = raw.sensitive.as_deref().unwrap_or(d::ELICITATION_SENSITIVE);
    let sensitive = crate::schema::SensitivePolicy::parse(text).ok_or_else(|| {
        ConfigError::invalid("elicitation.sensitive", format!("{text:?} is not one of \"warn\", \"refuse\""))
    })?;
    Ok(ElicitationConfig { sensitive })
}

fn front(raw: RawFront) -> Result<FrontConfig, ConfigError> {
    let path = raw.path.unwrap_or_else(|| d::PATH.into());
    if !path.starts_with('/') {
        return Err(ConfigError::invalid("front.path", "must start with '/'"));
    }
    let tls = tls_files("front.tls_cert_file", raw.tls_cert_file, raw.tls_key_file)?;
    Ok(FrontConfig {
        listen: addr("front.listen", raw.listen.as_deref().unwrap_or(d::LISTEN))?,
        path,
        max_body_bytes: positive("front.max_body_bytes", raw.max_body_bytes.unwrap_or(d::MAX_BODY_BYTES))?,
        max_connections: positive(
            "front.max_connections",
            raw.max_connections.unwrap_or(d::MAX_CONNECTIONS),
        )?,
        max_in_flight: positive("front.max_in_flight", raw.max_in_flight.unwrap_or(d::MAX_IN_FLIGHT))?,
        origins: origins(raw.allowed_origins.unwrap_or_default())?,
        drain: raw.drain_secs.map_or(d::DRAIN, Duration::from_secs),
        read_timeout: millis("front.read_timeout_ms", raw.read_timeout_ms, d::READ_TIMEOUT)?,
        handshake_timeout: millis(
            "front.handshake_timeout_ms",
            raw.handshake_timeout_ms,
            d::HANDSHAKE_TIMEOUT,
        )?,
        idle_timeout: millis("front.idle_timeout_ms", raw.idle_timeout_ms, d::IDLE_TIMEOUT)?,
        cache_ttl_ms: raw.cache_ttl_ms.unwrap_or(d::CACHE_TTL_MS),
        cache_scope: cache_scope(raw.cache_scope.as_deref().unwrap_or(d::CACHE_SCOPE))?,
        tls,
    })
}

/// A listener's certificate and key files: both or neither (`field` names the certificate's).
pub(super) fn tls_files(
    field: &str,
    cert: Option<String>,
    key: Option<String>,
) -> Result<Option<TlsFiles>, ConfigError> {
    match (cert, key) {
        (Some(cert), Some(key)) => Ok(Some(TlsFiles { cert: cert.into(), key: key.into() })),
        (None, None) => Ok(None),
        _ => Err(ConfigError::invalid(field, "tls_cert_file and tls_key_file go together")),
    }
}

fn origins(list: Vec<String>) -> Result<OriginPolicy, ConfigError> {
    if list.iter().any(|o| o == "*") {
        return Ok(OriginPolicy::Any);
    }
    for o in &list {
        let ok = o.parse::<Uri>().ok().is_some_and(|u| u.scheme().is_some() && u.host().is_some());
        if !ok {
            return Err(ConfigError::invalid(
                "front.allowed_origins",
                format!("{o:?} is not an origin like https://app.example"),
            ));
        }
    }
    Ok(OriginPolicy::LoopbackAnd(list.into_iter().map(|o| o.trim_end_matches('/').to_owned()).collect()))
}

fn cache_scope(s: &str) -> Result<CacheScope, ConfigError> {
    match s {
        "private" => Ok(CacheScope::Private),
        "public" => Ok(CacheScope::Public),
        other => Err(ConfigError::invalid(
            "front.cache_scope",
            format!("{other:?} is neither \"private\" nor \"public\""),
        )),
    }
}

fn admin(raw: RawAdmin) -> Result<Option<SocketAddr>, ConfigError> {
    if raw.enabled == Some(false) {
        return Ok(None);
    }
    addr("admin.listen", raw.listen.as_deref().unwrap_or(d::ADMIN_LISTEN)).map(Some)
}

/// `listen_sessions`: the sessions `subscriptions/listen` may hold beside the pool's;
/// `legacy_sessions`: those legacy clients may hold (their relay shares the connection bound).
fn upstream(
    mut raw: RawUpstream,
    (listen_sessions, legacy_sessions): (usize, usize),
    authenticated: bool,
) -> Result<UpstreamConfig, ConfigError> {
    let target = target(&mut raw)?;
    let protocol_version = match raw.protocol_version.as_deref() {
        None => d::UPSTREAM_VERSION,
        Some(v) => LegacyVersion::parse(v).ok_or_else(|| {
            ConfigError::invalid(
                "upstream.protocol_version",
                format!("{v:?} is not one of {LEGACY_VERSIONS:?}"),
            )
        })?,
    };
    let pool_max_sessions =
        positive("upstream.pool_max_sessions", raw.pool_max_sessions.unwrap_or(d::POOL_MAX_SESSIONS))?;
    let pool_min_warm = pool_min_warm(raw.pool_min_warm, pool_max_sessions, &target)?;
    Ok(UpstreamConfig {
        target,
        protocol_version,
        headers: super::credentials::upstream_headers(
            raw.headers.take().unwrap_or_default(),
            raw.bearer_token.take(),
            raw.bearer_token_file.take(),
        )?,
        connect_timeout: millis("upstream.connect_timeout_ms", raw.connect_timeout_ms, d::CONNECT_TIMEOUT)?,
        request_timeout: millis("upstream.request_timeout_ms", raw.request_timeout_ms, d::REQUEST_TIMEOUT)?,
        pool_max_sessions,
        pool_idle: raw.pool_idle_secs.map_or(d::POOL_IDLE, |s| Duration::from_secs(s.max(1))),
        pool_max_queued: raw.pool_max_queued.unwrap_or(d::POOL_MAX_QUEUED),
        pool_acquire_timeout: millis(
            "upstream.pool_acquire_timeout_ms",
            raw.pool_acquire_timeout_ms,
            d::POOL_ACQUIRE_TIMEOUT,
        )?,
        pool_max_per_key: pool_max_per_key(raw.pool_max_per_key, pool_max_sessions)?,
        pool_max_per_principal: share(
            "upstream.pool_max_per_principal",
            raw.pool_max_per_principal,
            ("upstream.pool_max_sessions", pool_max_sessions),
            authenticated,
        )?,
        pool_min_warm,
        max_connections: max_connections(
            raw.max_connections,
            (pool_max_sessions, listen_sessions),
            legacy_sessions,
        )?,
        max_connecting: positive("upstream.max_connecting", raw.max_connecting.unwrap_or(d::MAX_CONNECTING))?,
        roots: raw.roots.map(roots).transpose()?,
        tls: upstream_tls(raw.tls.unwrap_or_default())?,
    })
}

/// A client certificate needs its key and a key its certificate; the files are read (and
/// their errors named) when the pool is built.
fn upstream_tls(raw: RawUpstreamTls) -> Result<TlsSettings, ConfigError> {
    let client_identity = match (raw.client_cert_file, raw.client_key_file) {
        (None, None) => None,
        (Some(cert), Some(key)) => Some(ClientIdentity { cert_file: cert.into(), key_file: key.into() }),
        (Some(_), None) => {
            return Err(ConfigError::invalid(
                "upstream.tls.client_key_file",
                "required with client_cert_file",
            ))
        }
        (None, Some(_)) => {
            return Err(ConfigError::invalid(
                "upstream.tls.client_cert_file",
                "required with client_key_file",
            ))
        }
    };
    Ok(TlsSettings {
        platform_roots: raw.platform_roots.unwrap_or(true),
        ca_file: raw.ca_file.map(Into::into),
        client_identity,
    })
}

/// Exactly one of `url`, `sse_url` and `command`, or none (the embedded demo).
fn target(raw: &mut RawUpstream) -> Result<UpstreamTarget, ConfigError> {
    let sse = raw.sse_url.take();
    match (super::command::command(raw)?, raw.url.take(), sse) {
        (Some(_), _, Some(_)) | (None, Some(_), Some(_)) => Err(ConfigError::invalid(
            "upstream.sse_url",
            "set one of upstream.url, upstream.sse_url and upstream.command",
        )),
        (Some(cmd), _, None) => Ok(UpstreamTarget::Command(cmd)),
        (None, None, None) => Ok(UpstreamTarget::Embedded),
        (None, Some(url), None) => upstream_url("upstream.url", &url).map(UpstreamTarget::Url),
        (None, None, Some(url)) => upstream_url("upstream.sse_url", &url).map(UpstreamTarget::Sse),
    }
}

/// Every session, pooled or listening, may hold two connections at once (its GET stream and its
/// call's response stream); a bound at or below that could leave a call's answers waiting for
/// ever.
fn max_connections(
    raw: Option<usize>,
    (pool_max_sessions, listen_sessions): (usize, usize),
    legacy_sessions: usize,
) -> Result<usize, ConfigError> {
    let n = raw.unwrap_or(d::max_connections(pool_max_sessions, listen_sessions, legacy_sessions));
    let sessions = pool_max_sessions + listen_sessions;
    if n <= 2 * sessions {
        return Err(ConfigError::invalid(
            "upstream.max_connections",
            format!(
                "must be more than twice upstream.pool_max_sessions + subscriptions.max_sessions \
                 ({pool_max_sessions} + {listen_sessions}): each session holds its GET stream and its \
                 call's response stream"
            ),
        ));
    }
    Ok(n)
}

/// A bound per key above the total would never apply: refuse it rather than let it mislead.
fn pool_max_per_key(raw: Option<usize>, pool_max_sessions: usize) -> Result<usize, ConfigError> {
    let n = positive("upstream.pool_max_per_key", raw.unwrap_or(d::pool_max_per_key(pool_max_sessions)))?;
    if n > pool_max_sessions {
        return Err(ConfigError::invalid(
            "upstream.pool_max_per_key",
            format!("must not exceed upstream.pool_max_sessions ({pool_max_sessions})"),
        ));
    }
    Ok(n)
}

/// Warm processes exist only for a stdio upstream, and count against the total.
fn pool_min_warm(
    raw: Option<usize>,
    pool_max_sessions: usize,
    target: &UpstreamTarget,
) -> Result<usize, ConfigError> {
    let n = raw.unwrap_or(d::POOL_MIN_WARM);
    if n > 0 && !matches!(target, UpstreamTarget::Command(_)) {
        return Err(ConfigError::invalid(
            "upstream.pool_min_warm",
            "only applies to a stdio upstream (upstream.command)",
        ));
    }
    if n > pool_max_sessions {
        return Err(ConfigError::invalid(
            "upstream.pool_min_warm",
            format!("must not exceed upstream.pool_max_sessions ({pool_max_sessions})"),
        ));
    }
    Ok(n)
}

/// Roots are `file://` URIs (the legacy `Root` allows nothing else).
fn roots(list: Vec<String>) -> Result<Vec<String>, ConfigError> {
    for uri in &list {
        if !uri.starts_with("file://") {
            return Err(ConfigError::invalid("upstream.roots", format!("{uri:?} is not a file:// URI")));
        }
    }
    Ok(list)
}

fn upstream_url(field: &'static str, url: &str) -> Result<Uri, ConfigError> {
    let uri = parse_url(field, url)?;
    match uri.scheme_str() {
        Some("http" | "https") if uri.host().is_some() => Ok(uri),
        _ => Err(ConfigError::invalid(field, format!("{url:?} is not an http:// or https:// URL"))),
    }
}

/// Parses a URL; one given without a scheme (`localhost:3901/mcp`, which the URI parser
/// calls only an "invalid format") is refused saying the scheme is missing.
fn parse_url(field: &str, url: &str) -> Result<Uri, ConfigError> {
    if !url.contains("://") {
        return Err(ConfigError::invalid(
            field,
            format!("{url:?} has no scheme: write the URL with http:// or https://, e.g. \"http://{url}\""),
        ));
    }
    url.parse().map_err(|e| ConfigError::invalid(field, format!("{url:?} is not a URL: {e}")))
}

fn mrtr(mut raw: RawMrtr, authenticated: bool) -> Result<MrtrConfig, ConfigError> {
    let park = park::park(&mut raw, authenticated)?;
    let max_rounds = raw.max_rounds.unwrap_or(d::MAX_ROUNDS);
    if !(1..=64).contains(&max_rounds) {
        return Err(ConfigError::invalid("mrtr.max_rounds", "must be between 1 and 64"));
    }
    let mut cfg = MrtrConfig {
        gather_window: raw.gather_window_ms.map_or(d::GATHER_WINDOW, Duration::from_millis),
        round_timeout: millis("mrtr.round_timeout_ms", raw.round_timeout_ms, d::ROUND_TIMEOUT)?,
        total_timeout: millis("mrtr.total_timeout_ms", raw.total_timeout_ms, d::TOTAL_TIMEOUT)?,
        max_rounds,
        max_questions_per_round: positive(
            "mrtr.max_questions_per_round",
            raw.max_questions_per_round.unwrap_or(d::MAX_QUESTIONS_PER_ROUND),
        )?,
        max_answer_bytes: positive(
            "mrtr.max_answer_bytes",
            raw.max_answer_bytes.unwrap_or(d::MAX_ANSWER_BYTES),
        )?,
        gather_idle: millis("mrtr.gather_idle_ms", raw.gather_idle_ms, d::GATHER_IDLE)?,
        gather_memory_tools: raw.gather_memory_tools.unwrap_or(d::GATHER_MEMORY_TOOLS),
        gather_recheck_every: positive(
            "mrtr.gather_recheck_every",
            raw.gather_recheck_every.unwrap_or(d::GATHER_RECHECK_EVERY),
        )?,
        gather_expect: Vec::new(),
        park,
    };
    cfg.gather_expect = gather_expect(raw.gather_expect.unwrap_or_default(), cfg.max_questions_per_round)?;
    if cfg.gather_window >= cfg.round_timeout {
        return Err(ConfigError::invalid(
            "mrtr.gather_window_ms",
            "must be shorter than mrtr.round_timeout_ms",
        ));
    }
    if raw.gather_idle_ms.is_none() {
        // The default gap never outlasts a shorter window set on its own.
        cfg.gather_idle = cfg.gather_idle.min(cfg.gather_window);
    } else if cfg.gather_idle > cfg.gather_window {
        return Err(ConfigError::invalid("mrtr.gather_idle_ms", "must not exceed mrtr.gather_window_ms"));
    }
    Ok(cfg)
}

/// Each count must fit in one round.
fn gather_expect(table: BTreeMap<String, usize>, max: usize) -> Result<Vec<(String, usize)>, ConfigError> {
    table
        .into_iter()
        .map(|(tool, n)| {
            if !(1..=max).contains(&n) {
                let field = format!("mrtr.gather_expect.{tool}");
                return Err(ConfigError::invalid(
                    &field,
                    "must be between 1 and mrtr.max_questions_per_round",
                ));
            }
            Ok((tool, n))
        })
        .collect()
}

fn state(raw: RawState) -> Result<StateConfig, ConfigError> {
    let mut keys: Vec<KeyLine> = raw
        .keys
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(i, text)| KeyLine { source: format!("state.keys[{i}]"), text, from_file: false })
        .collect();
    if let Some(path) = &raw.key_file {
        keys.extend(key_file(path)?);
    }
    check_keys(&keys)?;
    let ttl = raw.ttl_secs.map_or(d::STATE_TTL, Duration::from_secs);
    if ttl.is_zero() {
        return Err(ConfigError::invalid("state.ttl_secs", "must be positive"));
    }
    let redis_url = limits::redis_url(raw.redis_url)?;
    let single_use = limits::single_use(raw.single_use, redis_url.clone())?;
    Ok(StateConfig {
        keys,
        ttl,
        clock_skew: raw.clock_skew_secs.map_or(d::CLOCK_SKEW, Duration::from_secs),
        max_token_bytes: positive(
            "state.max_token_bytes",
            raw.max_token_bytes.unwrap_or(d::MAX_TOKEN_BYTES),
        )?,
        single_use,
        redis_url,
        key_file: raw.key_file.map(Into::into),
        key_file_poll: millis("state.key_file_poll_ms", raw.key_file_poll_ms, d::KEY_FILE_POLL)?,
    })
}

/// Parses every key and builds a ring once, so a bad key fails at load time naming where it
/// came from (never the key itself). The gateway derives its real ring the same way at start.
fn check_keys(keys: &[KeyLine]) -> Result<(), ConfigError> {
    if keys.is_empty() {
        return Ok(());
    }
    let mut secrets = Vec::with_capacity(keys.len());
    for line in keys {
        let parsed = crate::mrtr::parse_key_lines(line.text.expose())
            .map_err(|e| ConfigError::invalid(&line.source, e.to_string()))?;
        secrets.extend(parsed);
    }
    crate::mrtr::KeyRing::new(secrets)
        .map(drop)
        .map_err(|e| ConfigError::invalid("state.keys", e.to_string()))
}

/// Reads a key file: one key per line; blank lines and `#` comments skipped.
fn key_file(path: &str) -> Result<Vec<KeyLine>, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError::invalid("state.key_file", format!("{path}: {e}")))?;
    let text = Secret::new(text);
    let lines = text
        .expose()
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map(|(n, l)| KeyLine {
            source: format!("state.key_file {path} line {}", n + 1),
            text: Secret::new(l.trim().to_owned()),
            from_file: true,
        })
        .collect::<Vec<_>>();
    if lines.is_empty() {
        return Err(ConfigError::invalid("state.key_file", format!("{path} holds no key")));
    }
    Ok(lines)
}

fn log(raw: RawLog) -> Result<LogConfig, ConfigError> {
    let json = match raw.format.as_deref().unwrap_or(d::LOG_FORMAT) {
        "text" => false,
        "json" => true,
        other => {
            return Err(ConfigError::invalid(
                "log.format",
                format!("{other:?} is neither \"text\" nor \"json\""),
            ))
        }
    };
    Ok(LogConfig { json, filter: raw.level.unwrap_or_else(|| d::LOG_LEVEL.into()) })
}

fn addr(field: &str, s: &str) -> Result<SocketAddr, ConfigError> {
    s.parse().map_err(|_| ConfigError::invalid(field, format!("{s:?} is not an address like 127.0.0.1:8080")))
}

/// A positive duration given in milliseconds, or `default`.
fn millis(field: &str, ms: Option<u64>, default: Duration) -> Result<Duration, ConfigError> {
    match ms {
        None => Ok(default),
        Some(0) => Err(ConfigError::invalid(field, "must be positive")),
        Some(ms) => Ok(Duration::from_millis(ms)),
    }
}

/// One principal's share of a bound every client shares, `total` = (its field, its value):
/// positive, at most the total, and by default [`d::principal_share`].
fn share(
    field: &str,
    raw: Option<usize>,
    (total_field, total): (&str, usize),
    authenticated: bool,
) -> Result<usize, ConfigError> {
    let n = positive(field, raw.unwrap_or(d::principal_share(total, authenticated)))?;
    if n > total {
        return Err(ConfigError::invalid(field, format!("must not exceed {total_field} ({total})")));
    }
    Ok(n)
}

fn positive(field: &str, n: usize) -> Result<usize, ConfigError> {
    if n == 0 {
        return Err(ConfigError::invalid(field, "must be positive"));
    }
    Ok(n)
}

mod limits;
mod park;
mod subscriptions;
mod tasks;
#[cfg(test)]
mod tests;
mod tracing;

fn legacy(raw: RawLegacy, authenticated: bool) -> Result<LegacyConfig, ConfigError> {
    let idle = raw.idle_secs.map_or(d::LEGACY_IDLE, Duration::from_secs);
    if idle.is_zero() {
        return Err(ConfigError::invalid("legacy.idle_secs", "must be positive"));
    }
    let max_sessions = positive("legacy.max_sessions", raw.max_sessions.unwrap_or(d::LEGACY_MAX_SESSIONS))?;
    Ok(LegacyConfig {
        enabled: raw.enabled.unwrap_or(d::LEGACY_ENABLED),
        max_sessions,
        max_sessions_per_principal: share(
            "legacy.max_sessions_per_principal",
            raw.max_sessions_per_principal,
            ("legacy.max_sessions", max_sessions),
            authenticated,
        )?,
        idle,
    })
}
