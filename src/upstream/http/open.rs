//! Opening one legacy Streamable HTTP session on the wire: POST `initialize`, read its answer
//! (JSON or SSE), then POST `notifications/initialized` with the new session's headers.
//!
//! A module of its own because two places open sessions: a new [`super::HttpSession`], and a
//! session whose server forgot it (404 on a call's first POST) and that renews itself in place
//! ([`super::inner::Inner::renew`]). Both must open it the same way.

use http::HeaderValue;
use serde_json::value::RawValue;
use serde_json::Value;

use super::messages::MessageStream;
use super::transport::{SessionHeaders, Transport};
use crate::protocol::jsonrpc::notification_bytes;
use crate::protocol::{headers, methods, Envelope};
use crate::upstream::handshake::{self, InitializeResult};
use crate::upstream::UpstreamError;

/// A session the server has just opened: its id (if it gave one) and its `initialize` answer.
pub(super) struct Opened {
    pub(super) session_id: Option<HeaderValue>,
    pub(super) init: InitializeResult,
}

impl Opened {
    /// The headers every later request of this session carries.
    pub(super) fn headers(&self) -> SessionHeaders {
        SessionHeaders::new(self.session_id.clone(), &self.init.protocol_version)
    }
}

/// `initialize` and `notifications/initialized`, bounded by the request timeout. A session the
/// server opened but that cannot be used (a bad answer, a refused notification) is deleted.
pub(super) async fn open(transport: &Transport, capabilities: &Value) -> Result<Opened, UpstreamError> {
    let timeout = transport.settings().request_timeout;
    let (session_id, raw) = tokio::time::timeout(timeout, initialize(transport, capabilities))
        .await
        .map_err(|_| UpstreamError::Timeout(timeout))??;
    let init = match InitializeResult::parse(raw) {
        Ok(init) => init,
        Err(e) => {
            let _ = transport.delete(&SessionHeaders::new(session_id, "")).await;
            return Err(e);
        }
    };
    let opened = Opened { session_id, init };
    let body = notification_bytes(methods::INITIALIZED, None);
    if let Err(e) = transport.post(&opened.headers(), body).await {
        let _ = transport.delete(&opened.headers()).await;
        return Err(e);
    }
    Ok(opened)
}

/// POSTs `initialize` and reads its response; returns the session id and the raw result.
async fn initialize(
    transport: &Transport,
    capabilities: &Value,
) -> Result<(Option<HeaderValue>, Box<RawValue>), UpstreamError> {
    let settings = transport.settings();
    let body = handshake::request(settings, capabilities);
    let resp = transport.post(&SessionHeaders::default(), body).await?;
    let session_id = resp.headers().get(headers::SESSION_ID).cloned();
    let mut stream = MessageStream::new(resp, settings.max_event_bytes)?;
    while let Some(text) = stream.next().await? {
        let env =
            Envelope::parse_str(&text).map_err(|e| UpstreamError::Initialize(format!("bad message: {e}")))?;
        if let Envelope::Response(resp) = env {
            return handshake::result_of(resp.outcome).map(|raw| (session_id, raw));
        }
    }
    Err(UpstreamError::Initialize("stream ended before the initialize response".to_owned()))
}
