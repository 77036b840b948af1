//! What one HTTP session's handles, calls and GET-stream task share: the transport, the
//! session headers, the transport-neutral [`SessionState`], and the acting on routed messages
//! (deliver to a call, or POST an answer upstream). A module of its own, below the session,
//! its calls and its GET stream, so that none of them imports another in a circle.

use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::Value;
use tokio::task::AbortHandle;

use super::transport::{SessionHeaders, Transport};
use crate::protocol::jsonrpc::ErrorObject;
use crate::protocol::RequestId;
use crate::upstream::event::Origin;
use crate::upstream::handshake::InitializeResult;
use crate::upstream::router::Action;
use crate::upstream::state::{self, SessionState};
use crate::upstream::UpstreamError;

/// The state shared by a session's handles, calls and GET-stream task.
pub(super) struct Inner {
    pub(super) state: Arc<SessionState>,
    pub(super) transport: Transport,
    pub(super) headers: SessionHeaders,
    init: Arc<InitializeResult>,
    get_task: Mutex<Option<AbortHandle>>,
}

// === impl Inner ===

impl Inner {
    pub(super) fn new(transport: Transport, headers: SessionHeaders, init: InitializeResult) -> Self {
        let roots = transport.settings().roots.clone();
        Self {
            state: Arc::new(SessionState::new(roots)),
            transport,
            headers,
            init: Arc::new(init),
            get_task: Mutex::new(None),
        }
    }

    pub(super) fn initialize_result(&self) -> &Arc<InitializeResult> {
        &self.init
    }

    /// Routes one message text and acts on it; true when it ended the origin call.
    pub(super) async fn dispatch(&self, text: &str, origin: Origin) -> Result<bool, UpstreamError> {
        let (action, ends_origin) = self.state.route(text, origin)?;
        if let Some(Action::Answer(id, outcome)) = state::deliver(action).await {
            if let Err(e) = self.respond(&id, outcome).await {
                tracing::warn!(error = %e, "could not answer an upstream request");
            }
        }
        Ok(ends_origin)
    }

    pub(super) async fn respond(
        &self,
        id: &RequestId,
        outcome: Result<Value, ErrorObject>,
    ) -> Result<(), UpstreamError> {
        self.post(state::response_bytes(id, outcome)?).await
    }

    /// POSTs a message that expects no response body (202).
    pub(super) async fn post(&self, body: Vec<u8>) -> Result<(), UpstreamError> {
        let resp = self.transport.post(&self.headers, body).await;
        self.state.note(resp).map(drop)
    }

    pub(super) fn set_get_task(&self, handle: AbortHandle) {
        *self.get_task.lock() = Some(handle);
    }

    pub(super) fn stop_get_stream(&self) {
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
