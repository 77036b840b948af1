//! The plain settings of the upstream client, built by the configuration layer.
//!
//! Kept free of parsing so that the config module owns names, defaults from files and
//! validation messages, while this module only states what the client needs and its defaults.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderMap, Uri};
use serde_json::Value;

use super::stdio::StderrTail;
use crate::config::tls::TlsSettings;
use crate::defaults;
use crate::mrtr::LegacyVersion;

/// How the gateway reaches and talks to the legacy server.
#[derive(Clone)]
pub struct UpstreamSettings {
    /// The MCP endpoint, e.g. `http://127.0.0.1:3001/mcp` or `https://…`. Unused when
    /// [`Self::stdio`] is set.
    pub url: Uri,
    /// Spawn this command and speak stdio to it instead of HTTP to [`Self::url`].
    pub stdio: Option<StdioSettings>,
    /// [`Self::url`] is the event stream of a deprecated HTTP+SSE server (2024-11-05), not a
    /// Streamable HTTP endpoint.
    pub legacy_sse: bool,
    /// The result of `roots/list` requests no client can be asked (a JSON array of roots), on
    /// every transport. `None`: such requests get an error.
    pub roots: Option<Arc<Value>>,
    /// Headers sent on every upstream request (an API key, for instance). Never logged.
    pub extra_headers: HeaderMap,
    /// Trust and client identity when [`Self::url`] is `https://`.
    pub tls: TlsSettings,
    /// `clientInfo.name` in `initialize`.
    pub client_name: String,
    /// `clientInfo.version` in `initialize`.
    pub client_version: String,
    /// The revision asked for in `initialize`; the server may answer any of `LEGACY_VERSIONS`.
    pub preferred_version: LegacyVersion,
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
    /// Most sessions of one pool key (principal, capability fingerprint) at once; callers past
    /// it wait in the same queue, within the same bounds, as callers past the total.
    pub pool_max_per_key: usize,
    /// Most calls of one principal holding or waiting for a session, whatever its
    /// capabilities; a call past it is refused at once (`PrincipalShare`).
    pub pool_max_per_principal: usize,
    /// Processes a stdio pool keeps spawned and waiting for `initialize`, so that a lease
    /// that finds no idle session of its key skips the process start. Ignored by the network
    /// transports, whose sessions cost no process.
    pub pool_min_warm: usize,
    /// Most sessions held outside the pool for `subscriptions/listen` (0 when it is off); they
    /// need connections as pooled sessions do.
    pub listen_sessions: usize,
    /// Most TCP connections open to the upstream. It must exceed twice `pool_max_sessions` +
    /// `listen_sessions`: each session holds its GET stream and, while a call or request runs
    /// on it, that response stream.
    pub max_connections: usize,
    /// Most TCP connections being opened at once.
    pub max_connecting: usize,
    /// Largest SSE event or JSON body accepted from the upstream, in bytes.
    pub max_event_bytes: usize,
    /// Counts the `notifications/tools/list_changed` any session made with these settings (or
    /// a clone of them) received.
    pub tools_changed: ToolsChanged,
}

/// A count of the upstream's `notifications/tools/list_changed`, shared by every session: who
/// keeps what a tool list said compares the count with the one it last saw.
#[derive(Clone, Debug, Default)]
pub struct ToolsChanged(Arc<AtomicU64>);

impl ToolsChanged {
    /// How many times the upstream said its tools changed.
    pub fn count(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }

    pub(crate) fn note(&self) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }
}

/// A legacy server started as a child process, one process per session.
#[derive(Clone)]
pub struct StdioSettings {
    pub program: String,
    pub args: Vec<String>,
    /// Variables set in the child's otherwise empty environment. Values may be secrets.
    pub env: Vec<(String, String)>,
    /// Variables copied from the gateway's environment when it has them.
    pub env_passthrough: Vec<String>,
    /// Working directory of the child; `None` keeps the gateway's.
    pub cwd: Option<PathBuf>,
    /// Longest stdout line accepted; a longer one stops the process.
    pub max_line_bytes: usize,
    /// Where the last stderr lines of the processes started with these settings are kept,
    /// besides the log (`None`: the log only).
    pub stderr_tail: Option<Arc<StderrTail>>,
}

impl StdioSettings {
    /// `program args…` with the default environment rules and line bound.
    pub fn new(program: impl Into<String>, args: Vec<String>) -> Self {
        Self {
            program: program.into(),
            args,
            env: Vec::new(),
            env_passthrough: defaults::ENV_PASSTHROUGH.iter().map(|&n| n.to_owned()).collect(),
            cwd: None,
            max_line_bytes: defaults::MAX_LINE_BYTES,
            stderr_tail: None,
        }
    }
}

impl std::fmt::Debug for StdioSettings {
    // Arguments and variables may hold credentials: show the program and names only.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StdioSettings")
            .field("program", &self.program)
            .field("args", &self.args.len())
            .field("env", &self.env.iter().map(|(k, _)| k).collect::<Vec<_>>())
            .field("env_passthrough", &self.env_passthrough)
            .field("cwd", &self.cwd)
            .field("max_line_bytes", &self.max_line_bytes)
            .finish()
    }
}

impl std::fmt::Debug for UpstreamSettings {
    // Extra headers may hold credentials: show only their names.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamSettings")
            .field("url", &self.url)
            .field("stdio", &self.stdio)
            .field("legacy_sse", &self.legacy_sse)
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
    /// Settings with the defaults for everything but the URL.
    pub fn new(url: Uri) -> Self {
        Self {
            url,
            stdio: None,
            legacy_sse: false,
            roots: None,
            extra_headers: HeaderMap::new(),
            tls: TlsSettings::platform(),
            client_name: "mrtr-gateway".to_owned(),
            client_version: env!("CARGO_PKG_VERSION").to_owned(),
            preferred_version: defaults::UPSTREAM_VERSION,
            connect_timeout: defaults::CONNECT_TIMEOUT,
            request_timeout: defaults::REQUEST_TIMEOUT,
            pool_max_sessions: defaults::POOL_MAX_SESSIONS,
            pool_idle_timeout: defaults::POOL_IDLE,
            pool_acquire_timeout: defaults::POOL_ACQUIRE_TIMEOUT,
            pool_max_queued: defaults::POOL_MAX_QUEUED,
            pool_max_per_key: defaults::pool_max_per_key(defaults::POOL_MAX_SESSIONS),
            pool_max_per_principal: defaults::principal_share(defaults::POOL_MAX_SESSIONS, false),
            pool_min_warm: defaults::POOL_MIN_WARM,
            listen_sessions: defaults::SUBSCRIPTIONS_MAX_SESSIONS,
            max_connections: defaults::max_connections(
                defaults::POOL_MAX_SESSIONS,
                defaults::SUBSCRIPTIONS_MAX_SESSIONS,
                defaults::LEGACY_MAX_SESSIONS,
            ),
            max_connecting: defaults::MAX_CONNECTING,
            max_event_bytes: defaults::MAX_EVENT_BYTES,
            tools_changed: ToolsChanged::default(),
        }
    }

    /// Settings with the defaults for everything but the event stream of an HTTP+SSE server.
    pub fn legacy_sse(url: Uri) -> Self {
        Self { legacy_sse: true, ..Self::new(url) }
    }

    /// Settings with the defaults for everything but the command to spawn.
    pub fn stdio(command: StdioSettings) -> Self {
        Self { stdio: Some(command), ..Self::new(Uri::default()) }
    }

    /// The upstream as a log line names it: the URL without user info or query, which may
    /// hold credentials (`http://127.0.0.1:3901/mcp`), or the stdio command's program without
    /// its arguments, for the same reason (`command python3`).
    pub fn target_name(&self) -> String {
        if let Some(stdio) = &self.stdio {
            return format!("command {}", stdio.program);
        }
        let url = &self.url;
        let scheme = url.scheme_str().unwrap_or("http");
        let host = url.host().unwrap_or_default();
        let port = url.port_u16().map(|p| format!(":{p}")).unwrap_or_default();
        format!("{scheme}://{host}{port}{}", url.path())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_shows_no_credential() {
        let url = Uri::from_static("https://user:secret@example.test:8443/mcp?key=secret");
        assert_eq!(UpstreamSettings::new(url).target_name(), "https://example.test:8443/mcp");
        let sse = UpstreamSettings::legacy_sse(Uri::from_static("http://127.0.0.1:3001/sse"));
        assert_eq!(sse.target_name(), "http://127.0.0.1:3001/sse");
        let stdio = StdioSettings::new("python3", vec!["server.py".into(), "--token=secret".into()]);
        assert_eq!(UpstreamSettings::stdio(stdio).target_name(), "command python3");
    }

    #[test]
    fn stdio_settings_show_the_program_and_names_never_a_value() {
        let mut stdio = StdioSettings::new("python3", vec!["server.py".into(), "--token=hunter2".into()]);
        stdio.env.push(("API_KEY".into(), "sk-hunter2".into()));
        let shown = format!("{stdio:?}");
        assert!(shown.starts_with("StdioSettings {"), "{shown}");
        for named in ["\"python3\"", "args: 2", "API_KEY", "max_line_bytes"] {
            assert!(shown.contains(named), "{named} in {shown}");
        }
        assert!(!shown.contains("hunter2"), "{shown}");
    }

    #[test]
    fn upstream_settings_show_header_names_never_their_values() {
        let mut settings = UpstreamSettings::new(Uri::from_static("http://127.0.0.1:3000/mcp"));
        settings.extra_headers.insert("x-api-key", http::HeaderValue::from_static("sk-hunter2"));
        let shown = format!("{settings:?}");
        assert!(shown.starts_with("UpstreamSettings {"), "{shown}");
        for named in ["127.0.0.1:3000", "\"x-api-key\"", "request_timeout", "max_connections"] {
            assert!(shown.contains(named), "{named} in {shown}");
        }
        assert!(!shown.contains("hunter2"), "{shown}");
    }
}
