//! One deprecated HTTP+SSE session as the seam drives it: open the event stream, wait for the
//! `endpoint` event, `initialize` through it, then POST every request, answer and notification
//! to the endpoint while the pump routes what comes back on the stream.
//!
//! One event stream is one legacy session. Closing it (or dropping the last handle) stops the
//! pump, which closes the stream; the server ends the session when its stream goes.

use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::value::RawValue;
use serde_json::Value;
use tokio::task::AbortHandle;

use super::endpoint;
use super::events::{is_endpoint, is_message, EventReader};
use super::link::Link;
use super::pump;
use crate::protocol::jsonrpc::{notification_bytes, ErrorObject, Outgoing};
use crate::protocol::{methods, RequestId};
use crate::upstream::call::Call;
use crate::upstream::event::UpstreamEvent;
use crate::upstream::handshake::{self, InitializeResult, INITIALIZE_ID};
use crate::upstream::http::Transport;
use crate::upstream::state::{self, SessionState};
use crate::upstream::UpstreamError;

/// A handle on one HTTP+SSE session; clones share it.
#[derive(Clone)]
pub(crate) struct SseSession {
    inner: Arc<Inner>,
}

struct Inner {
    link: Arc<Link>,
    init: Arc<InitializeResult>,
    pump: Pump,
}

/// The pump's task, stopped when the session closes or its last handle drops.
struct Pump(Mutex<Option<AbortHandle>>);

// === impl Pump ===

impl Pump {
    fn stop(&self) {
        if let Some(task) = self.0.lock().take() {
            task.abort();
        }
    }
}

impl Drop for Pump {
    fn drop(&mut self) {
        self.stop();
    }
}

// === impl SseSession ===

impl SseSession {
    /// Opens the stream, learns the endpoint, and initialises the session, all within the
    /// request timeout.
    pub(crate) async fn connect(transport: Transport, capabilities: &Value) -> Result<Self, UpstreamError> {
        let timeout = transport.settings().request_timeout;
        let (link, events) = tokio::time::timeout(timeout, open(transport))
            .await
            .map_err(|_| UpstreamError::Timeout(timeout))??;
        let link = Arc::new(link);
        let pump = Pump(Mutex::new(Some(pump::spawn(link.clone(), events))));
        let raw = tokio::time::timeout(timeout, handshake(&link, capabilities))
            .await
            .map_err(|_| UpstreamError::Timeout(timeout))??;
        let init = Arc::new(InitializeResult::parse(raw)?);
        link.post(notification_bytes(methods::INITIALIZED, None)).await?;
        tracing::debug!(version = %init.protocol_version, "upstream HTTP+SSE session initialised");
        Ok(Self { inner: Arc::new(Inner { link, init, pump }) })
    }

    pub(crate) fn initialize_result(&self) -> &Arc<InitializeResult> {
        &self.inner.init
    }

    pub(crate) fn state(&self) -> &Arc<SessionState> {
        &self.inner.link.state
    }

    /// The server's message endpoint, for a span.
    pub(crate) fn url(&self) -> &http::Uri {
        &self.inner.link.endpoint
    }

    /// POSTs the request in a task of the call's own; its events come from the pump.
    pub(crate) fn start(&self, method: &str, params: Outgoing<'_>, surface: bool) -> Call {
        let link = &self.inner.link;
        let (call, tx) = Call::open(&link.state, link.state.next_id(), surface, link.timeout());
        let body = params.request_bytes(call.id(), method);
        let poster = link.clone();
        let task = tokio::spawn(async move {
            if let Err(e) = poster.post(body).await {
                let _ = tx.send(Err(e)).await;
            }
        });
        call.with_task(task.abort_handle())
    }

    pub(crate) async fn respond(
        &self,
        id: &RequestId,
        outcome: Result<Value, ErrorObject>,
    ) -> Result<(), UpstreamError> {
        self.inner.link.post(state::response_bytes(id, outcome)?).await
    }

    pub(crate) async fn notify(&self, method: &str, params: Option<Value>) -> Result<(), UpstreamError> {
        self.inner.link.post(notification_bytes(method, params.as_ref())).await
    }

    /// Closes the stream (the transport has no other way to end a session) and fails the
    /// calls still in flight.
    pub(crate) async fn close(&self) -> Result<(), UpstreamError> {
        let state = &self.inner.link.state;
        state.mark_unhealthy();
        self.inner.pump.stop();
        state.fail_all(|| UpstreamError::Closed("the upstream session was closed".to_owned())).await;
        Ok(())
    }
}

/// GETs the event stream and reads it up to the `endpoint` event.
async fn open(transport: Transport) -> Result<(Link, EventReader), UpstreamError> {
    let settings = transport.settings();
    let resp = transport.open_event_stream().await?;
    let mut events = EventReader::new(resp, settings.max_event_bytes)?;
    loop {
        match events.next().await? {
            Some(event) if is_endpoint(&event) => {
                let uri = endpoint::resolve(&settings.url, &event.data).inspect_err(|e| {
                    tracing::error!(error = %e, stream = %settings.url, "upstream endpoint refused");
                })?;
                return Ok((Link::new(transport, uri), events));
            }
            Some(event) if is_message(&event) => {
                tracing::debug!("upstream message before its endpoint event; skipped");
            }
            Some(_) => {}
            None => return Err(UpstreamError::StreamEnded),
        }
    }
}

/// POSTs `initialize` and waits for its answer on the stream.
async fn handshake(link: &Link, capabilities: &Value) -> Result<Box<RawValue>, UpstreamError> {
    let settings = link.transport.settings();
    let (mut call, _tx) = Call::open(&link.state, INITIALIZE_ID, false, settings.request_timeout);
    link.post(handshake::request(settings, capabilities)).await?;
    loop {
        match call.next_event().await? {
            Some(UpstreamEvent::Response(outcome)) => return handshake::result_of(outcome),
            Some(_) => continue,
            None => return Err(UpstreamError::Initialize("no answer to initialize".to_owned())),
        }
    }
}
