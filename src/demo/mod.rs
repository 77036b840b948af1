//! An embedded legacy MCP server (Streamable HTTP, protocol 2025-11-25, also 2025-06-18 and
//! 2025-03-26) that asks its client for input in the middle of calls.
//!
//! It exists for two reasons: the gateway binary starts it on loopback when no upstream is
//! configured, so the product can be tried with one command; and the integration tests drive
//! the gateway against it as a scripted legacy upstream. It therefore behaves like the
//! TypeScript-SDK servers the gateway meets in the field: sessions with `Mcp-Session-Id`,
//! priming events, server → client requests on the POST's SSE stream, `roots/list` on the
//! standalone GET stream, tools gated by the client's declared capabilities. Unlike those
//! servers it bounds everything it keeps: sessions, waiting requests, calls, time.
//!
//! # Layout
//! - `server`: accept loop and drain; `http`: routing and transport checks;
//!   `initialize`: the handshake.
//! - `session` and `store`: per-session state and the bounded session table.
//! - `calls`, `context`, `tools`: running calls, asking the client, the tool handlers.
//! - `catalog`: the tools, prompt, resources and completions on offer; `resources`: the
//!   counter resource and its subscriptions (`resources/subscribe`, update notifications).
//! - `sse`: the event-stream writer; `stats`: counters for tests.

mod calls;
mod catalog;
mod context;
mod http;
mod initialize;
mod resources;
mod server;
mod session;
mod sse;
mod stats;
mod store;
#[cfg(test)]
mod tests;
mod tools;

use std::future::Future;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use stats::DemoStats;

use store::SessionStore;

/// The path of the MCP endpoint.
pub const MCP_PATH: &str = "/mcp";

/// Default wait for the client's answer to a server → client request (the SDKs' 60 s).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Tunables of the demo server. Every collection it keeps is bounded by one of these.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// How long a server → client request waits for its answer (and for a GET stream, when
    /// it must go out on one).
    pub request_timeout: Duration,
    /// Sessions with no request and no running call for this long are dropped.
    pub session_idle_timeout: Duration,
    /// Most sessions kept; the least recently used is dropped to make room.
    pub max_sessions: usize,
    /// Most server → client requests waiting for an answer, per session.
    pub max_outstanding_requests: usize,
    /// Most calls running at once, per session.
    pub max_calls_per_session: usize,
    /// Longest a call may run (`hang` included) before it is answered with an error.
    pub max_call_duration: Duration,
    /// Largest request body accepted.
    pub max_body_bytes: usize,
    /// Most connections served at once.
    pub max_connections: usize,
    /// If set, sessions that declared `roots` get a `roots/list` on their GET stream this long
    /// after `notifications/initialized`, outside any call, as the reference TypeScript server
    /// does (about 350 ms there). Off by default.
    pub roots_after_initialized: Option<Duration>,
    /// If set, every call stream of a 2025-11-25 session ends right after its priming event,
    /// which carries this as its `retry` hint; the client must resume with `GET` and
    /// `Last-Event-ID` to read the rest (SEP-1699 polling). Off by default.
    pub close_after_priming: Option<Duration>,
    /// If set, the answer to a standalone GET (its response head) is held this long, as a slow
    /// server's may be. A call that arrives on a session before its GET was answered is counted
    /// ([`DemoStats::calls_before_get_stream`]): a server such as the Python SDK's drops a
    /// request meant for that stream while none is connected. Off by default.
    pub get_stream_delay: Option<Duration>,
    /// If set, each `notifications/cancelled` is acted on and answered (202) only once it takes
    /// a permit from this semaphore, as a busy server's would be; a closed semaphore answers at
    /// once. Tests hold it empty to see what waits for a cancel. Off by default.
    pub cancel_gate: Option<Arc<tokio::sync::Semaphore>>,
    /// Whether the server offers `resources.subscribe`. Off, it declares it `false` and refuses
    /// every `resources/subscribe` as an unknown method, as a server without subscriptions does
    /// ([`DemoStats::refused_subscribes`] counts them). On by default.
    pub resource_subscriptions: bool,
}

impl Default for DemoOptions {
    fn default() -> Self {
        Self {
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            session_idle_timeout: Duration::from_secs(600),
            max_sessions: 256,
            max_outstanding_requests: 32,
            max_calls_per_session: 32,
            max_call_duration: Duration::from_secs(600),
            max_body_bytes: 4 * 1024 * 1024,
            max_connections: 256,
            roots_after_initialized: None,
            close_after_priming: None,
            get_stream_delay: None,
            cancel_gate: None,
            resource_subscriptions: true,
        }
    }
}

/// State shared by every connection of one server.
pub(crate) struct Shared {
    options: DemoOptions,
    stats: Arc<DemoStats>,
    store: SessionStore,
    resources: Arc<resources::Resources>,
}

/// A demo server, built before it serves so that its [`DemoStats`] can be taken first.
pub struct DemoServer {
    shared: Arc<Shared>,
}

// === impl DemoServer ===

impl DemoServer {
    pub fn new(options: DemoOptions) -> Self {
        let stats = Arc::new(DemoStats::default());
        let store = SessionStore::new(options.max_sessions, options.session_idle_timeout, Arc::clone(&stats));
        let shared = Shared { options, stats, store, resources: Arc::default() };
        Self { shared: Arc::new(shared) }
    }

    /// The server's counters.
    pub fn stats(&self) -> Arc<DemoStats> {
        Arc::clone(&self.shared.stats)
    }

    /// Serves `listener` until `shutdown` completes, then ends every session and drains the
    /// connections for a bounded time.
    pub async fn serve(self, listener: TcpListener, shutdown: impl Future) -> io::Result<()> {
        server::run(self.shared, listener, shutdown).await
    }
}

/// Serves a demo server on `listener` until `shutdown` completes.
pub async fn serve(listener: TcpListener, options: DemoOptions, shutdown: impl Future) -> io::Result<()> {
    DemoServer::new(options).serve(listener, shutdown).await
}

/// A demo server running in the background on loopback. Dropping the handle stops it.
pub struct DemoHandle {
    /// The address it listens on.
    pub addr: SocketAddr,
    /// Its counters.
    pub stats: Arc<DemoStats>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<io::Result<()>>,
}

/// Binds `127.0.0.1:0` and serves a demo server there in a background task. Must be called
/// from within a Tokio runtime.
pub fn spawn_loopback(options: DemoOptions) -> io::Result<DemoHandle> {
    let runtime = tokio::runtime::Handle::try_current().map_err(io::Error::other)?;
    let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    let listener = {
        let _entered = runtime.enter();
        TcpListener::from_std(listener)?
    };
    let server = DemoServer::new(options);
    let stats = server.stats();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = runtime.spawn(server.serve(listener, stopped));
    Ok(DemoHandle { addr, stats, stop: Some(stop), task })
}

// === impl DemoHandle ===

impl DemoHandle {
    /// The MCP endpoint, `http://127.0.0.1:PORT/mcp`.
    pub fn url(&self) -> String {
        format!("http://{}{MCP_PATH}", self.addr)
    }

    /// Stops accepting, ends every session and waits for the bounded drain.
    pub async fn shutdown(mut self) -> io::Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        (&mut self.task).await.map_err(io::Error::other)?
    }

    /// Stops the server at once, without a drain.
    pub fn abort(&self) {
        self.task.abort();
    }
}

impl Drop for DemoHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}
