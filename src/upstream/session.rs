//! The seam between the gateway and its upstream: one legacy session, whatever carries it.
//!
//! The pool, the bridge and the front drive a [`Session`] (initialize with the client's
//! capabilities, start a call and read its events, answer a server request, notify, cancel,
//! close, health) and never learn which transport is underneath. Each transport implements the
//! same operations in its own module: Streamable HTTP in [`super::http`], the deprecated
//! HTTP+SSE transport in [`super::sse_legacy`], a child process over stdio in [`super::stdio`]. Attribution is the same everywhere: a session serves one
//! MRTR-capable call at a time (the pool's lease), and server requests that no stream ties to a
//! call go to that call (see [`super::router`]).
//!
//! The transports form a closed set, so the seam is an enum rather than a trait object: every
//! call is a static `match`, and no per-call future or event is boxed on the hot path (an
//! `async fn` in a `dyn` trait would need a boxed future per operation).

use std::sync::Arc;

use prometheus::IntGauge;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::call::Call;
use super::event::{EventTx, UpstreamEvent};
use super::handshake::InitializeResult;
use super::http::{HttpSession, Transport};
use super::sse_legacy::SseSession;
use super::state::SessionState;
use super::stdio::{SpareProcess, Spawner, StdioSession};
use super::{UpstreamError, UpstreamSettings};
use crate::outbound::Bound;
use crate::protocol::jsonrpc::{ErrorObject, Outcome, Outgoing};
use crate::protocol::log_level::{self, LogLevel};
use crate::protocol::params::JsonText;
use crate::protocol::{methods, RequestId};
use crate::telemetry::{ExchangeTrace, Peer, Written};

/// A handle on one legacy session; clones share it.
#[derive(Clone)]
pub struct Session {
    link: Link,
}

/// The transport of one session.
#[derive(Clone)]
enum Link {
    Http(HttpSession),
    SseLegacy(SseSession),
    Stdio(StdioSession),
}

/// How new sessions are opened: one per pool, shared by all its sessions (the HTTP client, or
/// the command to spawn).
#[derive(Clone)]
pub(crate) enum Connector {
    Http(Transport),
    /// The deprecated HTTP+SSE transport rides the same HTTP client.
    SseLegacy(Transport),
    Stdio(Spawner),
}

/// A session started ahead of demand and not yet initialised, which any pool key may take:
/// only a stdio upstream has one (a process waiting for `initialize`), since starting it is
/// what costs; a network session costs one round trip either way.
pub(crate) struct Spare {
    process: SpareProcess,
}

// === impl Connector ===

impl Connector {
    /// A stdio connector when a command is configured, HTTP+SSE when `url` is such a stream,
    /// else Streamable HTTP to `url`; `connections` follows the HTTP connections open.
    pub(crate) fn new(settings: Arc<UpstreamSettings>, connections: IntGauge) -> Result<Self, UpstreamError> {
        match (&settings.stdio, settings.legacy_sse) {
            (Some(_), _) => Spawner::new(settings).map(Self::Stdio),
            (None, true) => Transport::new(settings, connections).map(Self::SseLegacy),
            (None, false) => Transport::new(settings, connections).map(Self::Http),
        }
    }

    /// An HTTP+SSE or Streamable HTTP connector whose connections count against `bound`, shared
    /// with the other clients of the same upstream (a legacy client's own session).
    pub(crate) fn with_bound(settings: Arc<UpstreamSettings>, bound: Bound) -> Result<Self, UpstreamError> {
        if settings.legacy_sse {
            Transport::with_bound(settings, bound).map(Self::SseLegacy)
        } else {
            Transport::with_bound(settings, bound).map(Self::Http)
        }
    }

    /// The bound the network connections count against (a stdio upstream has none).
    pub(crate) fn bound(&self) -> Option<&Bound> {
        match self {
            Self::Http(t) | Self::SseLegacy(t) => Some(t.bound()),
            Self::Stdio(_) => None,
        }
    }

    pub(crate) fn settings(&self) -> &UpstreamSettings {
        match self {
            Self::Http(t) | Self::SseLegacy(t) => t.settings(),
            Self::Stdio(s) => s.settings(),
        }
    }

    /// Starts a session ahead of demand, when this transport has such a thing (stdio).
    pub(crate) fn prestart(&self) -> Option<Result<Spare, UpstreamError>> {
        match self {
            Self::Stdio(s) => Some(s.prestart().map(|process| Spare { process })),
            Self::Http(_) | Self::SseLegacy(_) => None,
        }
    }

    /// Initialises a spare session declaring `capabilities`.
    pub(crate) async fn connect_spare(
        &self,
        spare: Spare,
        capabilities: &Value,
    ) -> Result<Session, UpstreamError> {
        match self {
            Self::Stdio(s) => {
                Ok(Session { link: Link::Stdio(s.initialize(spare.process, capabilities).await?) })
            }
            Self::Http(_) | Self::SseLegacy(_) => self.connect(capabilities).await,
        }
    }

    /// Opens and initialises a session declaring `capabilities`.
    pub(crate) async fn connect(&self, capabilities: &Value) -> Result<Session, UpstreamError> {
        let link = match self {
            Self::Http(t) => Link::Http(HttpSession::initialize(t.clone(), capabilities).await?),
            Self::SseLegacy(t) => Link::SseLegacy(SseSession::connect(t.clone(), capabilities).await?),
            Self::Stdio(s) => Link::Stdio(s.spawn(capabilities).await?),
        };
        Ok(Session { link })
    }
}

// === impl Session ===

impl Session {
    /// Opens a session with a connector of its own (the pool shares one instead).
    pub async fn initialize(
        settings: Arc<UpstreamSettings>,
        capabilities: &Value,
    ) -> Result<Self, UpstreamError> {
        let metrics = super::PoolMetrics::detached().map_err(|e| UpstreamError::Settings(e.to_string()))?;
        Connector::new(settings, metrics.connections)?.connect(capabilities).await
    }

    /// The server's `initialize` answer.
    pub fn initialize_result(&self) -> &Arc<InitializeResult> {
        match &self.link {
            Link::Http(s) => s.initialize_result(),
            Link::SseLegacy(s) => s.initialize_result(),
            Link::Stdio(s) => s.initialize_result(),
        }
    }

    /// The negotiated protocol revision.
    pub fn protocol_version(&self) -> &str {
        &self.initialize_result().protocol_version
    }

    /// False once a transport failure, timeout, expiry or exit showed the session can't be reused.
    pub fn is_healthy(&self) -> bool {
        self.state().is_healthy()
    }

    /// What a Streamable HTTP upstream learnt of its cancelled streams (shared by its sessions).
    #[cfg(test)]
    pub(crate) fn cancel_drain(&self) -> Option<&crate::upstream::http::CancelDrain> {
        match &self.link {
            Link::Http(s) => Some(s.cancel_drain()),
            Link::SseLegacy(_) | Link::Stdio(_) => None,
        }
    }

    fn state(&self) -> &Arc<SessionState> {
        match &self.link {
            Link::Http(s) => s.state(),
            Link::SseLegacy(s) => s.state(),
            Link::Stdio(s) => s.state(),
        }
    }

    /// Starts `method(params)` upstream. Server requests during it, on its own stream or on one
    /// that ties nothing to a call, are surfaced as [`UpstreamEvent::Request`].
    pub fn call(&self, method: &str, params: Option<Value>) -> Call {
        self.start(method, params.as_ref(), true)
    }

    /// [`Session::call`] with borrowed params: they are only serialised, so a caller that keeps
    /// them (to replay the call in a later round) need not clone them.
    pub fn call_with(&self, method: &str, params: Option<&Value>) -> Call {
        self.start(method, params, true)
    }

    /// [`Session::call_with`] with params already written as JSON text: sent as they are (the
    /// front's params, copied from the client's text), unless the call is traced, whose context
    /// goes into their `_meta`.
    pub fn call_text(&self, method: &str, params: &JsonText) -> Call {
        // Traced, the context goes into the params' `_meta`, which needs their tree; params
        // that no tree can hold go as they are, untraced.
        let traced = crate::telemetry::on().then(|| serde_json::from_str::<Value>(params.as_str()).ok());
        if let Some(Some(tree)) = traced {
            return self.start(method, Some(&tree), true);
        }
        let params = Outgoing::Text(params);
        match &self.link {
            Link::Http(s) => s.start(method, params, true, Vec::new()),
            Link::SseLegacy(s) => s.start(method, params, true),
            Link::Stdio(s) => s.start(method, params, true),
        }
    }

    pub(crate) fn start(&self, method: &str, params: Option<&Value>, surface: bool) -> Call {
        if let Some(trace) = ExchangeTrace::start(method, params, || self.peer()) {
            return self.start_traced(method, params, surface, trace);
        }
        let out = Outgoing::Tree(params);
        match &self.link {
            Link::Http(s) => s.start(method, out, surface, Vec::new()),
            Link::SseLegacy(s) => s.start(method, out, surface),
            Link::Stdio(s) => s.start(method, out, surface),
        }
    }

    /// Starts a call of a traced request, its span's context propagated upstream: as headers
    /// over Streamable HTTP (and in `_meta` when the client's own context is there, so that no
    /// stale one is relayed), in `_meta` over stdio and HTTP+SSE, whose messages have no headers.
    fn start_traced(
        &self,
        method: &str,
        params: Option<&Value>,
        surface: bool,
        trace: Box<ExchangeTrace>,
    ) -> Call {
        let written = trace.written();
        let call = match &self.link {
            Link::Http(s) if Written::present_in(params) => {
                s.start(method, Outgoing::Tree(written.in_meta(params).as_ref()), surface, written.headers())
            }
            Link::Http(s) => s.start(method, Outgoing::Tree(params), surface, written.headers()),
            Link::SseLegacy(s) => s.start(method, Outgoing::Tree(written.in_meta(params).as_ref()), surface),
            Link::Stdio(s) => s.start(method, Outgoing::Tree(written.in_meta(params).as_ref()), surface),
        };
        call.with_trace(trace)
    }

    /// Where this session's exchanges go, for their spans.
    fn peer(&self) -> Peer {
        let protocol_version = self.protocol_version().to_owned();
        let (uri, session_id) = match &self.link {
            Link::Http(s) => {
                let (uri, id) = s.peer();
                (Some(uri.clone()), id)
            }
            Link::SseLegacy(s) => (Some(s.url().clone()), None),
            Link::Stdio(_) => (None, None),
        };
        let transport = if uri.is_some() { "tcp" } else { "pipe" };
        Peer { transport, uri, session_id, protocol_version }
    }

    /// Answers a server request that a call surfaced.
    pub async fn respond(
        &self,
        id: &RequestId,
        outcome: Result<Value, ErrorObject>,
    ) -> Result<(), UpstreamError> {
        match &self.link {
            Link::Http(s) => s.respond(id, outcome).await,
            Link::SseLegacy(s) => s.respond(id, outcome).await,
            Link::Stdio(s) => s.respond(id, outcome).await,
        }
    }

    /// Sends a notification to the server.
    pub async fn notify(&self, method: &str, params: Option<Value>) -> Result<(), UpstreamError> {
        match &self.link {
            Link::Http(s) => s.notify(method, params).await,
            Link::SseLegacy(s) => s.notify(method, params).await,
            Link::Stdio(s) => s.notify(method, params).await,
        }
    }

    /// A request whose server requests are refused upstream (list methods and the like): it
    /// may not return `input_required`, so nothing can be surfaced to the front.
    pub async fn request(&self, method: &str, params: Option<Value>) -> Result<Outcome, UpstreamError> {
        let mut call = self.start(method, params.as_ref(), false);
        loop {
            match call.next_event().await? {
                Some(UpstreamEvent::Response(outcome)) => return Ok(outcome),
                Some(_) => continue,
                None => return Err(UpstreamError::Closed("request ended without a response".to_owned())),
            }
        }
    }

    /// True when the server declared the `logging` capability at `initialize`: only then may
    /// it be sent `logging/setLevel`.
    pub fn declares_logging(&self) -> bool {
        self.initialize_result().capabilities.get("logging").is_some_and(Value::is_object)
    }

    /// The `logging/setLevel` threshold the server accepted last on this session; `None` until
    /// one was set.
    pub fn log_level(&self) -> Option<LogLevel> {
        self.state().log_level()
    }

    /// Sends `logging/setLevel` and remembers `level` once the server accepts it. The inner
    /// `Err` is the server's JSON-RPC refusal (the remembered level is then unchanged).
    pub async fn set_log_level(&self, level: LogLevel) -> Result<Result<(), ErrorObject>, UpstreamError> {
        let params = json!({ "level": level.as_str() });
        match self.request(log_level::SET_LEVEL, Some(params)).await? {
            Outcome::Result(_) => {
                self.state().set_log_level(level);
                Ok(Ok(()))
            }
            Outcome::Error(e) => Ok(Err(e)),
        }
    }

    /// Sends the session's listenable notifications (list changes, resource updates) to the
    /// returned queue from now on, whatever stream carries them (a `subscriptions/listen`
    /// bridge). An `Err` on it, or its end, is the session's death.
    pub fn listen(&self, capacity: usize) -> mpsc::Receiver<Result<UpstreamEvent, UpstreamError>> {
        let (tx, rx) = mpsc::channel(capacity);
        self.state().router.lock().set_listener(tx);
        rx
    }

    /// A stream for what no call can take on this session (notifications, server requests):
    /// the legacy relay's GET stream. Its sender identifies it to [`Session::close_standalone`].
    pub(crate) fn open_standalone(
        &self,
        capacity: usize,
    ) -> (EventTx, mpsc::Receiver<Result<UpstreamEvent, UpstreamError>>) {
        let (tx, rx) = mpsc::channel(capacity);
        self.state().router.lock().set_standalone(tx.clone());
        (tx, rx)
    }

    /// Ends the stream [`Session::open_standalone`] gave `tx` for, unless another replaced it.
    pub(crate) fn close_standalone(&self, tx: &EventTx) {
        self.state().router.lock().clear_standalone(tx);
    }

    /// The queue [`Session::listen`] set up, for other sessions of the key to tap.
    pub(crate) fn listener(&self) -> Option<EventTx> {
        self.state().router.lock().listener()
    }

    /// Sends this session's list changes to `tap` (another session's listener), or no longer.
    pub(crate) fn set_tap(&self, tap: Option<EventTx>) {
        self.state().router.lock().set_tap(tap);
    }

    /// Cancels a call upstream (`notifications/cancelled`); its further events are dropped.
    pub async fn cancel(&self, call: Call, reason: &str) -> Result<(), UpstreamError> {
        let id = call.id().clone();
        drop(call);
        let params = json!({ "requestId": id, "reason": reason });
        self.notify(methods::CANCELLED, Some(params)).await
    }

    /// Ends the session (HTTP: DELETE; HTTP+SSE: close the stream; stdio: stop the process,
    /// bounded).
    pub async fn close(&self) -> Result<(), UpstreamError> {
        match &self.link {
            Link::Http(s) => s.close().await,
            Link::SseLegacy(s) => s.close().await,
            Link::Stdio(s) => s.close().await,
        }
    }
}

// === impl Spare ===

impl Spare {
    /// False once it died while waiting.
    pub(crate) fn is_alive(&self) -> bool {
        self.process.is_alive()
    }

    /// The process id, for the log.
    pub(crate) fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// Stops it, bounded.
    pub(crate) async fn close(self) {
        self.process.stop().await;
    }
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let transport = match self.link {
            Link::Http(_) => "http",
            Link::SseLegacy(_) => "sse",
            Link::Stdio(_) => "stdio",
        };
        f.debug_struct("Session")
            .field("transport", &transport)
            .field("protocol_version", &self.protocol_version())
            .field("healthy", &self.is_healthy())
            .finish_non_exhaustive()
    }
}
