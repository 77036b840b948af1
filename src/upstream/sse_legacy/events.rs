//! The event stream of a deprecated HTTP+SSE server, read as whole SSE events with the shared
//! parser ([`crate::upstream::sse`]), each bounded by `max_event_bytes`.
//!
//! [`EventReader::next`] keeps parsed events that a caller has not taken yet, so the stream can
//! be handed from the connect step (which waits for `endpoint`) to the session's pump without
//! losing what followed in the same chunk.

use std::collections::VecDeque;

use crate::upstream::http::SlotBody;
use http::header::CONTENT_TYPE;
use http::Response;
use http_body_util::BodyExt;

use crate::upstream::sse::{SseEvent, SseParser};
use crate::upstream::UpstreamError;

/// Whole events from one `text/event-stream` body.
pub(super) struct EventReader {
    body: SlotBody,
    parser: SseParser,
    pending: VecDeque<SseEvent>,
}

// === impl EventReader ===

impl EventReader {
    /// Refuses a response that is not an event stream.
    pub(super) fn new(resp: Response<SlotBody>, max_bytes: usize) -> Result<Self, UpstreamError> {
        let kind = resp.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
        if !kind.to_ascii_lowercase().starts_with("text/event-stream") {
            return Err(UpstreamError::Protocol(format!(
                "the SSE URL answered {:?}, not an event stream",
                kind.chars().take(64).collect::<String>()
            )));
        }
        Ok(Self { body: resp.into_body(), parser: SseParser::new(max_bytes), pending: VecDeque::new() })
    }

    /// The next event, or `None` when the server ended the stream.
    pub(super) async fn next(&mut self) -> Result<Option<SseEvent>, UpstreamError> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Ok(Some(event));
            }
            let Some(frame) = self.body.frame().await else {
                return Ok(None);
            };
            let frame = frame.map_err(|e| UpstreamError::Closed(format!("event stream broke: {e}")))?;
            if let Ok(data) = frame.into_data() {
                self.parser.feed_into(&data, &mut self.pending)?;
            }
        }
    }
}

/// True for an event that carries a JSON-RPC message (`message`, the default type).
pub(super) fn is_message(event: &SseEvent) -> bool {
    matches!(event.event.as_deref(), None | Some("message")) && !event.data.trim().is_empty()
}

/// True for the `endpoint` announcement.
pub(super) fn is_endpoint(event: &SseEvent) -> bool {
    event.event.as_deref() == Some("endpoint")
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use super::*;

    fn event(kind: Option<&'static str>, data: &str) -> SseEvent {
        SseEvent { event: kind.map(Cow::Borrowed), data: data.to_owned(), ..SseEvent::default() }
    }

    #[test]
    fn the_endpoint_announcement_and_messages_are_told_apart() {
        let endpoint = event(Some("endpoint"), "/messages?session_id=1");
        assert!(is_endpoint(&endpoint) && !is_message(&endpoint));
        for message in [event(None, "{}"), event(Some("message"), "{}")] {
            assert!(is_message(&message) && !is_endpoint(&message), "{message:?}");
        }
        assert!(!is_message(&event(None, "  ")), "an event without data carries no message");
        assert!(!is_message(&event(Some("ping"), "{}")) && !is_endpoint(&event(Some("ping"), "{}")));
    }
}
