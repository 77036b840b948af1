//! One legacy Streamable HTTP session: the `initialize` exchange, the session headers, the
//! messages the gateway POSTs upstream, and the state its calls and GET stream share.
//!
//! After `initialize` every request carries `Mcp-Session-Id` and `MCP-Protocol-Version`; the
//! standalone GET stream is opened at once, because some servers send their requests only
//! there.

use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::value::RawValue;
use serde_json::Value;
use tokio::task::AbortHandle;

use super::exchange;
use super::get_stream;
use super::messages::MessageStream;
use super::transport::{SessionHeaders, Transport};
use crate::protocol::jsonrpc::{notification_bytes, request_bytes, ErrorObject};
use crate::protocol::{headers, methods, Envelope, RequestId};
use crate::upstream::call::Call;
use crate::upstream::event::Origin;
use crate::upstream::handshake::{self, InitializeResult};
use crate::upstream::router::Action;
use crate::upstream::state::{self, SessionState};
use crate::upstream::UpstreamError;

/// A handle on one HTTP session; clones share it.
#[derive(Clone)]
pub(crate) struct HttpSession {
    inner: Arc<Inner>,
}

/// The state shared by a session's handles, calls and GET-stream task.
pub(crate) struct Inner {
    pub(crate) state: Arc<SessionState>,
    pub(crate) transport: Transport,
    pub(crate) headers: SessionHeaders,
    init: Arc<InitializeResult>,
    get_task: Mutex<Option<AbortHandle>>,
}

// === impl HttpSession ===

impl HttpSession {
    /// `initialize`, `notifications/initialized`, then the standalone GET stream.
    pub(crate) async fn initialize(
        transport: Transport,
        capabilities: &Value,
    ) -> Result<Self, UpstreamError> {
        let timeout = transport.settings().request_timeout;
        let (session_id, raw) = tokio::time::timeout(timeout, handshake(&transport, capabilities))
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
        let roots = transport.settings().roots.clone();
        let inner = Inner {
            state: Arc::new(SessionState::new(roots)),
            transport,
            headers,
            init: Arc::new(init),
            get_task: Mutex::new(None),
        };
        Self { inner: Arc::new(inner) }
    }

    pub(crate) fn initialize_result(&self) -> &Arc<InitializeResult> {
        &self.inner.init
    }

    pub(crate) fn state(&self) -> &Arc<SessionState> {
        &self.inner.state
    }

    /// Starts `method(params)`: a task POSTs it and reads its response stream.
    pub(crate) fn start(&self, method: &str, params: Option<&Value>, surface: bool) -> Call {
        let raw_id = self.inner.state.next_id();
        let timeout = self.inner.transport.settings().request_timeout;
        let (call, tx) = Call::open(&self.inner.state, raw_id, surface, timeout);
        let body = request_bytes(call.id(), method, params);
        let task = tokio::spawn(exchange::drive(self.inner.clone(), raw_id, body, tx));
        call.with_task(task.abort_handle())
    }

    /// Answers a server request (a POST of the response, expecting 202).
    pub(crate) async fn respond(
        &self,
        id: &RequestId,
        outcome: Result<Value, ErrorObject>,
    ) -> Result<(), UpstreamError> {
        self.inner.respond(id, outcome).await
    }

    /// Sends a notification to the server.
    pub(crate) async fn notify(&self, method: &str, params: Option<Value>) -> Result<(), UpstreamError> {
        let body = notification_bytes(method, params.as_ref());
        self.inner.post(body).await
    }

    /// Ends the session: stops the GET stream and sends DELETE (405 tolerated).
    pub(crate) async fn close(&self) -> Result<(), UpstreamError> {
        self.inner.state.mark_unhealthy();
        self.inner.stop_get_stream();
        self.inner.transport.delete(&self.inner.headers).await
    }
}

// === impl Inner ===

impl Inner {
    /// Routes one message text and acts on it; true when it ended the origin call.
    pub(crate) async fn dispatch(&self, text: &str, origin: Origin) -> Result<bool, UpstreamError> {
        let (action, ends_origin) = self.state.route(text, origin)?;
        if let Some(Action::Answer(id, outcome)) = state::deliver(action).await {
            if let Err(e) = self.respond(&id, outcome).await {
                tracing::warn!(error = %e, "could not answer an upstream request");
            }
        }
        Ok(ends_origin)
    }

    async fn respond(
        &self,
        id: &RequestId,
        outcome: Result<Value, ErrorObject>,
    ) -> Result<(), UpstreamError> {
        self.post(state::response_bytes(id, outcome)?).await
    }

    /// POSTs a message that expects no response body (202).
    async fn post(&self, body: Vec<u8>) -> Result<(), UpstreamError> {
        let resp = self.transport.post(&self.headers, body).await;
        self.state.note(resp).map(drop)
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
    let body = handshake::request(settings, capabilities);
    let resp = transport.post(&SessionHeaders::default(), body).await?;
    let session_id = resp.headers().get(headers::SESSION_ID).cloned();
    let mut stream = MessageStream::new(resp, settings.max_event_bytes)?;
    while let Some(text) = stream.next().await? {
        let env = Envelope::parse(text.as_bytes())
            .map_err(|e| UpstreamError::Initialize(format!("bad message: {e}")))?;
        if let Envelope::Response(resp) = env {
            return handshake::result_of(resp.outcome).map(|raw| (session_id, raw));
        }
    }
    Err(UpstreamError::Initialize("stream ended before the initialize response".to_owned()))
}
