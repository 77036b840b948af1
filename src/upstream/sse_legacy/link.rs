//! What a deprecated HTTP+SSE session's handles, calls and pump share: the HTTP transport, the
//! message endpoint the server announced, and the transport-neutral [`SessionState`]. Below the
//! session and the pump, so that neither imports the other.

use std::sync::Arc;
use std::time::Duration;

use http::Uri;

use crate::upstream::http::Transport;
use crate::upstream::state::SessionState;
use crate::upstream::UpstreamError;

/// One session's way to the server.
pub(super) struct Link {
    pub(super) state: Arc<SessionState>,
    pub(super) transport: Transport,
    pub(super) endpoint: Uri,
}

// === impl Link ===

impl Link {
    pub(super) fn new(transport: Transport, endpoint: Uri) -> Self {
        let state = Arc::new(SessionState::new(transport.settings()));
        Self { state, transport, endpoint }
    }

    pub(super) fn timeout(&self) -> Duration {
        self.transport.settings().request_timeout
    }

    /// POSTs one message to the endpoint (202 expected); a failure retires the session.
    pub(super) async fn post(&self, body: Vec<u8>) -> Result<(), UpstreamError> {
        let sent = self.transport.post_to(&self.endpoint, body).await;
        self.state.note(sent)
    }
}
