//! One legacy Streamable HTTP session: the `initialize` handshake, the session headers, the
//! responses the gateway sends upstream, and the shared state its calls and GET stream use.
//!
//! A session declares, at `initialize`, the capabilities its caller computed (legacy servers
//! decide which tools exist from them), negotiates one of `LEGACY_VERSIONS`, and then carries
//! `Mcp-Session-Id` and `MCP-Protocol-Version` on every request. It allocates its own request
//! ids: front ids from many clients would collide.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use tokio::task::AbortHandle;
use tokio::time::Instant;

use super::dispatch::{Action, Origin, Router};
use super::messages::MessageStream;
use super::transport::{SessionHeaders, Transport};
use super::{get_stream, UpstreamError, UpstreamSettings};
use crate::protocol::jsonrpc::{
    error_bytes, notification_bytes, request_bytes, result_bytes, ErrorObject, Outcome,
};
use crate::protocol::{headers, methods, Envelope, RequestId, LEGACY_VERSIONS};

/// The id of `initialize`; calls count up from 1.
const INITIALIZE_ID: i64 = 0;

/// What the legacy server answered to `initialize` (the source of `server/discover`).
#[derive(Debug)]
pub struct InitializeResult {
    /// The negotiated revision, one of `LEGACY_VERSIONS`.
    pub protocol_version: String,
    /// The server's capabilities, as sent.
    pub capabilities: Value,
    /// `serverInfo`, as sent (`Null` if absent).
    pub server_info: Value,
    pub instructions: Option<String>,
    /// The whole result object, verbatim.
    pub raw: Box<RawValue>,
}

/// A handle on one legacy session; clones share it.
#[derive(Clone)]
pub struct Session {
    pub(crate) inner: Arc<Inner>,
}

/// The state shared by a session's handles, calls and GET-stream task.
pub(crate) struct Inner {
    pub(crate) transport: Transport,
    pub(crate) headers: SessionHeaders,
    pub(crate) router: Mutex<Router>,
    init: Arc<InitializeResult>,
    next_id: AtomicI64,
    healthy: AtomicBool,
    get_task: Mutex<Option<AbortHandle>>,
}

// === impl InitializeResult ===

impl InitializeResult {
    fn parse(raw: Box<RawValue>) -> Result<Self, UpstreamError> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Wire {
            protocol_version: String,
            #[serde(default)]
            capabilities: Value,
            #[serde(default)]
            server_info: Value,
            instructions: Option<String>,
        }
        let wire: Wire = serde_json::from_str(raw.get())
            .map_err(|e| UpstreamError::Initialize(format!("malformed result: {e}")))?;
        if !LEGACY_VERSIONS.contains(&wire.protocol_version.as_str()) {
            return Err(UpstreamError::Initialize(format!(
                "server chose protocol version {:?}; supported: {}",
                wire.protocol_version,
                LEGACY_VERSIONS.join(", ")
            )));
        }
        Ok(Self {
            protocol_version: wire.protocol_version,
            capabilities: wire.capabilities,
            server_info: wire.server_info,
            instructions: wire.instructions,
            raw,
        })
    }
}

// === impl Session ===

impl Session {
    /// Opens a session with its own HTTP client (the pool shares one client instead).
    pub async fn initialize(
        settings: Arc<UpstreamSettings>,
        capabilities: &Value,
    ) -> Result<Self, UpstreamError> {
        let metrics = super::PoolMetrics::detached().map_err(|e| UpstreamError::Settings(e.to_string()))?;
        Self::initialize_with(Transport::new(settings, metrics.connections)?, capabilities).await
    }

    /// `initialize`, `notifications/initialized`, then the standalone GET stream.
    pub(crate) async fn initialize_with(
        transport: Transport,
        capabilities: &Value,
    ) -> Result<Self, UpstreamError> {
        let timeout = transport.settings().request_timeout;
        let deadline = Instant::now() + timeout;
        let (session_id, raw) = tokio::time::timeout_at(deadline, handshake(&transport, capabilities))
            .await
            .map_err(|_| UpstreamError::Timeout(timeout))??;
        let init = match InitializeResult::parse(raw) {
            Ok(init) => init,
            Err(e) => {
                let headers = SessionHeaders::new(session_id, "");
                let _ = transport.delete(&headers).await;
                return Err(e);
            }
        };
        let session = Self::from_parts(transport, session_id, init);
        if let Err(e) = session.notify(methods::INITIALIZED, None).await {
            let _ = session.close().await;
            return Err(e);
        }
        get_stream::spawn(&session.inner);
        Ok(session)
    }

    fn from_parts(
        transport: Transport,
        session_id: Option<http::HeaderValue>,
        init: InitializeResult,
    ) -> Self {
        let headers = SessionHeaders::new(session_id, &init.protocol_version);
        let inner = Inner {
            transport,
            headers,
            router: Mutex::new(Router::default()),
            init: Arc::new(init),
            next_id: AtomicI64::new(INITIALIZE_ID + 1),
            healthy: AtomicBool::new(true),
            get_task: Mutex::new(None),
        };
        Self { inner: Arc::new(inner) }
    }

    /// The server's `initialize` answer.
    pub fn initialize_result(&self) -> &Arc<InitializeResult> {
        &self.inner.init
    }

    /// The negotiated protocol revision.
    pub fn protocol_version(&self) -> &str {
        &self.inner.init.protocol_version
    }

    /// False once a transport failure, timeout or expiry showed the session can't be reused.
    pub fn is_healthy(&self) -> bool {
        self.inner.healthy.load(Ordering::Relaxed)
    }

    /// Answers a server request that a call surfaced (a POST of the response, expecting 202).
    pub async fn respond(
        &self,
        id: &RequestId,
        outcome: Result<Value, ErrorObject>,
    ) -> Result<(), UpstreamError> {
        self.inner.respond(id, outcome).await
    }

    /// Sends a notification to the server.
    pub async fn notify(&self, method: &str, params: Option<Value>) -> Result<(), UpstreamError> {
        let body = notification_bytes(method, params.as_ref());
        let resp = self.inner.transport.post(&self.inner.headers, body).await;
        self.inner.note(resp).map(drop)
    }

    /// A request whose server requests are refused upstream (list methods and the like): it
    /// may not return `input_required`, so nothing can be surfaced to the front.
    pub async fn request(&self, method: &str, params: Option<Value>) -> Result<Outcome, UpstreamError> {
        let mut call = self.start(method, params.as_ref(), false);
        loop {
            match call.next_event().await? {
                Some(super::UpstreamEvent::Response(outcome)) => return Ok(outcome),
                Some(_) => continue,
                None => return Err(UpstreamError::Closed("request ended without a response".to_owned())),
            }
        }
    }

    /// Cancels a call upstream (`notifications/cancelled`); its further events are dropped.
    pub async fn cancel(&self, call: super::Call, reason: &str) -> Result<(), UpstreamError> {
        let id = call.id().clone();
        drop(call);
        let params = json!({ "requestId": id, "reason": reason });
        self.notify(methods::CANCELLED, Some(params)).await
    }

    /// Ends the session: stops the GET stream and sends DELETE (405 tolerated).
    pub async fn close(&self) -> Result<(), UpstreamError> {
        self.inner.healthy.store(false, Ordering::Relaxed);
        self.inner.stop_get_stream();
        self.inner.transport.delete(&self.inner.headers).await
    }

    pub(crate) fn next_id(&self) -> i64 {
        self.inner.next_id.fetch_add(1, Ordering::Relaxed)
    }
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("protocol_version", &self.protocol_version())
            .field("healthy", &self.is_healthy())
            .finish_non_exhaustive()
    }
}

// === impl Inner ===

impl Inner {
    /// Routes one message text and acts on it; true when it ended the origin call.
    pub(crate) async fn dispatch(&self, text: &str, origin: Origin) -> Result<bool, UpstreamError> {
        let env = Envelope::parse(text.as_bytes()).map_err(|e| UpstreamError::Protocol(format!("{e}")))?;
        let (action, ends_origin) = self.router.lock().route(env, origin);
        match action {
            Action::Deliver(tx, event) => {
                // A closed queue means the call was dropped: its events are discarded.
                let _ = tx.send(Ok(event)).await;
            }
            Action::Answer(id, outcome) => {
                if let Err(e) = self.respond(&id, outcome).await {
                    tracing::warn!(error = %e, "could not answer an upstream request");
                }
            }
            Action::Ignore(why) => tracing::debug!(why, "upstream message dropped"),
        }
        Ok(ends_origin)
    }

    async fn respond(
        &self,
        id: &RequestId,
        outcome: Result<Value, ErrorObject>,
    ) -> Result<(), UpstreamError> {
        let body = match outcome {
            Ok(value) => {
                let raw = serde_json::value::to_raw_value(&value)
                    .map_err(|e| UpstreamError::Protocol(format!("unserialisable result: {e}")))?;
                result_bytes(id, &raw)
            }
            Err(error) => error_bytes(Some(id), &error),
        };
        let resp = self.transport.post(&self.headers, body).await;
        self.note(resp).map(drop)
    }

    /// Marks the session unusable when a result shows it is.
    pub(crate) fn note<T>(&self, result: Result<T, UpstreamError>) -> Result<T, UpstreamError> {
        if let Err(e) = &result {
            if e.poisons_session() {
                self.mark_unhealthy();
            }
        }
        result
    }

    pub(crate) fn mark_unhealthy(&self) {
        self.healthy.store(false, Ordering::Relaxed);
    }

    pub(crate) fn set_get_task(&self, handle: AbortHandle) {
        *self.get_task.lock() = Some(handle);
    }

    fn stop_get_stream(&self) {
        if let Some(handle) = self.get_task.lock().take() {
            handle.abort();
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.stop_get_stream();
    }
}

/// POSTs `initialize` and reads its response; returns the session id and the raw result.
async fn handshake(
    transport: &Transport,
    capabilities: &Value,
) -> Result<(Option<http::HeaderValue>, Box<RawValue>), UpstreamError> {
    let settings = transport.settings();
    let params = json!({
        "protocolVersion": settings.preferred_version,
        "capabilities": capabilities,
        "clientInfo": { "name": settings.client_name, "version": settings.client_version },
    });
    let body = request_bytes(&RequestId::Number(INITIALIZE_ID), methods::INITIALIZE, Some(&params));
    let resp = transport.post(&SessionHeaders::default(), body).await?;
    let session_id = resp.headers().get(headers::SESSION_ID).cloned();
    let mut stream = MessageStream::new(resp, settings.max_event_bytes)?;
    while let Some(text) = stream.next().await? {
        let env = Envelope::parse(text.as_bytes())
            .map_err(|e| UpstreamError::Initialize(format!("bad message: {e}")))?;
        if let Envelope::Response(resp) = env {
            return match resp.outcome {
                Outcome::Result(raw) => Ok((session_id, raw)),
                Outcome::Error(e) => {
                    Err(UpstreamError::Initialize(format!("server refused ({}): {}", e.code, e.message)))
                }
            };
        }
    }
    Err(UpstreamError::Initialize("stream ended before the initialize response".to_owned()))
}
