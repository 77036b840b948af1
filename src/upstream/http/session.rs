//! One legacy Streamable HTTP session as the seam drives it: the `initialize` exchange, the
//! start of a call, and the messages the gateway POSTs upstream (opening it on the wire is
//! [`super::open`]). What its calls and GET stream
//! share lives in [`super::inner`].
//!
//! After `initialize` every request carries `Mcp-Session-Id` and `MCP-Protocol-Version`; the
//! standalone GET stream is opened at once, because some servers send their requests only
//! there.

use std::sync::Arc;

use serde_json::Value;

use super::inner::Inner;
use super::transport::Transport;
use super::{exchange, get_stream, open};
use crate::protocol::jsonrpc::{notification_bytes, ErrorObject, Outgoing};
use crate::protocol::RequestId;
use crate::upstream::call::Call;
use crate::upstream::handshake::InitializeResult;
use crate::upstream::state::SessionState;
use crate::upstream::UpstreamError;

/// Trace context headers for one call's POST.
pub(crate) type TraceHeaders = Vec<(http::HeaderName, http::HeaderValue)>;

/// A handle on one HTTP session; clones share it.
#[derive(Clone)]
pub(crate) struct HttpSession {
    inner: Arc<Inner>,
}

// === impl HttpSession ===

impl HttpSession {
    /// `initialize`, `notifications/initialized`, then the standalone GET stream, answered
    /// before the session is handed out (bounded by the connect timeout).
    pub(crate) async fn initialize(
        transport: Transport,
        capabilities: &Value,
    ) -> Result<Self, UpstreamError> {
        let opened = open::open(&transport, capabilities).await?;
        let session = Self { inner: Arc::new(Inner::new(transport, opened, capabilities.clone())) };
        let bound = session.inner.transport.settings().connect_timeout;
        get_stream::spawn(&session.inner, bound).await;
        Ok(session)
    }

    pub(crate) fn initialize_result(&self) -> &Arc<InitializeResult> {
        self.inner.initialize_result()
    }

    pub(crate) fn state(&self) -> &Arc<SessionState> {
        &self.inner.state
    }

    #[cfg(test)]
    pub(crate) fn cancel_drain(&self) -> &super::drain::CancelDrain {
        self.inner.transport.cancel_drain()
    }

    /// Starts `method(params)`: the call's reader POSTs it, with the `trace` headers (empty
    /// unless tracing is on), and reads its response stream, driven by the call's consumer.
    pub(crate) fn start(
        &self,
        method: &str,
        params: Outgoing<'_>,
        surface: bool,
        trace: TraceHeaders,
    ) -> Call {
        let raw_id = self.inner.state.next_id();
        let timeout = self.inner.transport.settings().request_timeout;
        let (call, tx) = Call::open(&self.inner.state, raw_id, surface, timeout);
        let body = params.request_bytes(call.id(), method);
        // Not cut short when the call drops: it notices and ends itself, draining the stream
        // so that its connection is reused (see `exchange::drive`). The box is allocated before
        // the future is made, so that it is built in place: `Box::pin` built it on the stack and
        // copied it in (callgrind: about 480 instructions of memcpy per call).
        let reader =
            Box::write(Box::new_uninit(), exchange::drive(self.inner.clone(), raw_id, body, tx, trace));
        call.with_reader(Box::into_pin(reader))
    }

    /// The upstream's URL and the session id, for a span.
    pub(crate) fn peer(&self) -> (&http::Uri, Option<String>) {
        let id = self.inner.current().headers.session_id().map(str::to_owned);
        (&self.inner.transport.settings().url, id)
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
        self.inner.transport.delete(&self.inner.headers()).await
    }
}
