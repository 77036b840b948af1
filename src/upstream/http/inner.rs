//! What one HTTP session's handles, calls and GET-stream task share: the transport, the
//! session headers, the transport-neutral [`SessionState`], and the acting on routed messages
//! (deliver to a call, or POST an answer upstream). A module of its own, below the session,
//! its calls and its GET stream, so that none of them imports another in a circle.
//!
//! It also renews the legacy session in place when the server has forgotten it: a 404 on the
//! first POST of a call means nothing of that call reached anyone yet, so the session opens a
//! fresh legacy session (a new `initialize`, with the capabilities it first declared) under the
//! same handle, and the call is sent again there (see [`super::exchange`]). The handle keeps its
//! place in the pool; the forgotten session id is dropped without a DELETE, since the server no
//! longer knows it.

use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use serde_json::Value;
use tokio::task::AbortHandle;

use super::open::{self, Opened};
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
    current: RwLock<Current>,
    /// Held while the session renews itself, so that concurrent 404s renew it once.
    renewal: tokio::sync::Mutex<()>,
    /// What `initialize` declared, declared again by a renewal.
    capabilities: Value,
    init: Arc<InitializeResult>,
    get_task: Mutex<Option<AbortHandle>>,
}

/// The legacy session the handle speaks for now.
#[derive(Clone)]
pub(super) struct Current {
    pub(super) headers: SessionHeaders,
    /// Counts renewals: a caller that saw 404 with generation `n` renews only if it is still `n`.
    pub(super) generation: u64,
}

// === impl Inner ===

impl Inner {
    pub(super) fn new(transport: Transport, opened: Opened, capabilities: Value) -> Self {
        let headers = opened.headers();
        Self {
            state: Arc::new(SessionState::new(transport.settings())),
            transport,
            current: RwLock::new(Current { headers, generation: 0 }),
            renewal: tokio::sync::Mutex::new(()),
            capabilities,
            init: Arc::new(opened.init),
            get_task: Mutex::new(None),
        }
    }

    pub(super) fn initialize_result(&self) -> &Arc<InitializeResult> {
        &self.init
    }

    /// The headers of the legacy session in use now, and its generation.
    pub(super) fn current(&self) -> Current {
        self.current.read().clone()
    }

    pub(super) fn headers(&self) -> SessionHeaders {
        self.current.read().headers.clone()
    }

    /// Replaces a legacy session the server forgot (it answered 404 to generation `seen`) by a
    /// fresh one, and restarts the GET stream on it. If another call renewed it meanwhile, that
    /// renewal stands. The new session must speak the revision the first one negotiated, since
    /// callers already hold it; otherwise the session stays expired.
    pub(super) async fn renew(self: &Arc<Self>, seen: u64) -> Result<(), UpstreamError> {
        let _renewing = self.renewal.lock().await;
        if self.current.read().generation != seen {
            return Ok(());
        }
        let opened = open::open(&self.transport, &self.capabilities).await?;
        if opened.init.protocol_version != self.init.protocol_version {
            let _ = self.transport.delete(&opened.headers()).await;
            return Err(UpstreamError::SessionExpired);
        }
        {
            let mut current = self.current.write();
            current.headers = opened.headers();
            current.generation += 1;
        }
        tracing::info!("the upstream forgot its session (HTTP 404); opened a new one for the call");
        self.stop_get_stream();
        super::get_stream::spawn(self, self.transport.settings().connect_timeout).await;
        Ok(())
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
        let resp = self.transport.post(&self.headers(), body).await;
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
