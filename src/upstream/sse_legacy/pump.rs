//! The pump of one deprecated HTTP+SSE session: every server message (responses, requests,
//! notifications) arrives on the one event stream, and is attributed through the lease by the
//! shared router, exactly as a child's stdout is ([`crate::upstream::router`]).
//!
//! Nothing on this stream ties a message to a call except a response's id, so server requests
//! go to the call holding the session's lease. When the stream ends or breaks, the session is
//! dead: its calls fail with [`UpstreamError::StreamEnded`] and the pool replaces it.

use std::sync::Arc;

use tokio::task::AbortHandle;

use super::events::{is_endpoint, is_message, EventReader};
use super::link::Link;
use crate::upstream::event::Origin;
use crate::upstream::router::Action;
use crate::upstream::state;
use crate::upstream::UpstreamError;

/// Longest excerpt of a skipped event in the log.
const LOG_EXCERPT: usize = 200;

/// Starts the pump; aborting it drops the stream.
pub(super) fn spawn(link: Arc<Link>, events: EventReader) -> AbortHandle {
    tokio::spawn(async move {
        let why = pump(&link, events).await;
        tracing::warn!(reason = %why, endpoint = %link.endpoint.path(), "upstream event stream ended: its session is retired");
        link.state.fail_all(|| UpstreamError::StreamEnded).await;
    })
    .abort_handle()
}

/// Routes events until the stream ends; returns how it ended, for the log.
async fn pump(link: &Link, mut events: EventReader) -> String {
    loop {
        match events.next().await {
            Ok(Some(event)) if is_message(&event) => on_message(link, &event.data).await,
            Ok(Some(event)) if is_endpoint(&event) => {
                tracing::debug!("upstream announced its endpoint again; the first one is kept");
            }
            Ok(Some(_)) => {}
            Ok(None) => return "closed by the server".to_owned(),
            Err(e) => return e.to_string(),
        }
    }
}

/// Delivers one message to its call, or answers it (`ping`, requests no call can take).
async fn on_message(link: &Link, text: &str) {
    let routed = match link.state.route(text, Origin::Unattributed) {
        Ok((action, _)) => action,
        Err(e) => {
            let excerpt: String = text.chars().take(LOG_EXCERPT).collect();
            tracing::warn!(error = %e, event = %excerpt, "upstream event is not JSON-RPC; skipped");
            return;
        }
    };
    if let Some(Action::Answer(id, outcome)) = state::deliver(routed).await {
        let sent = match state::response_bytes(&id, outcome) {
            Ok(bytes) => link.post(bytes).await,
            Err(e) => Err(e),
        };
        if let Err(e) = sent {
            tracing::warn!(error = %e, "could not answer an upstream request");
        }
    }
}
