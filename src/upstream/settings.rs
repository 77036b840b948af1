//! The plain settings of the upstream client, built by the configuration layer.
//!
//! Kept free of parsing so that the config module owns names, defaults from files and
//! validation messages, while this module only states what the client needs and its defaults.

use std::time::Duration;

use http::{HeaderMap, Uri};

use crate::config::raw::defaults;

/// The default protocol revision asked for in `initialize`.
pub const DEFAULT_PREFERRED_VERSION: &str = "2025-11-25";

/// How the gateway reaches and talks to the legacy server.
#[derive(Clone)]
pub struct UpstreamSettings {
    /// The MCP endpoint, e.g. `http://127.0.0.1:3001/mcp` (plain `http` only).
    pub url: Uri,
    /// Headers sent on every upstream request (an API key, for instance). Never logged.
    pub extra_headers: HeaderMap,
    /// `clientInfo.name` in `initialize`.
    pub client_name: String,
    /// `clientInfo.version` in `initialize`.
    pub client_version: String,
    /// The revision asked for in `initialize`; the server may answer any of `LEGACY_VERSIONS`.
    pub preferred_version: String,
    /// Bound on establishing a TCP connection.
    pub connect_timeout: Duration,
    /// Bound on one upstream request, from sending it to its response (a call's whole life).
    pub request_timeout: Duration,
    /// Most sessions open at once (idle + leased + being initialised).
    pub pool_max_sessions: usize,
    /// An idle session older than this is closed.
    pub pool_idle_timeout: Duration,
    /// How long `Pool::lease` waits for a session when the pool is full of leased ones.
    pub pool_acquire_timeout: Duration,
    /// Most calls waiting for a session; past it a call fails at once (`QueueFull`).
    pub pool_max_queued: usize,
    /// Most TCP connections open to the upstream. It must exceed twice `pool_max_sessions`:
    /// each session holds its GET stream and, while leased, its call's response stream.
    pub max_connections: usize,
    /// Most TCP connections being opened at once.
    pub max_connecting: usize,
    /// Largest SSE event or JSON body accepted from the upstream, in bytes.
    pub max_event_bytes: usize,
}

impl std::fmt::Debug for UpstreamSettings {
    // Extra headers may hold credentials: show only their names.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamSettings")
            .field("url", &self.url)
            .field("extra_headers", &self.extra_headers.keys().collect::<Vec<_>>())
            .field("client_name", &self.client_name)
            .field("preferred_version", &self.preferred_version)
            .field("request_timeout", &self.request_timeout)
            .field("pool_max_sessions", &self.pool_max_sessions)
            .field("max_connections", &self.max_connections)
            .finish_non_exhaustive()
    }
}

impl UpstreamSettings {
    /// Settings with the defaults for everything but the URL (a pool of 64 sessions; the
    /// connection and queue bounds are the configuration's defaults).
    pub fn new(url: Uri) -> Self {
        let pool_max_sessions = 64;
        Self {
            url,
            extra_headers: HeaderMap::new(),
            client_name: "mrtr-gateway".to_owned(),
            client_version: env!("CARGO_PKG_VERSION").to_owned(),
            preferred_version: DEFAULT_PREFERRED_VERSION.to_owned(),
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(60),
            pool_max_sessions,
            pool_idle_timeout: Duration::from_secs(300),
            pool_acquire_timeout: Duration::from_millis(defaults::POOL_ACQUIRE_TIMEOUT_MS),
            pool_max_queued: defaults::POOL_MAX_QUEUED,
            max_connections: defaults::upstream_max_connections(pool_max_sessions),
            max_connecting: defaults::UPSTREAM_MAX_CONNECTING,
            max_event_bytes: 4 * 1024 * 1024,
        }
    }
}
