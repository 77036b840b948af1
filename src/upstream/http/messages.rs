//! Reads JSON-RPC messages out of an upstream response body, whatever its framing.
//!
//! A legacy server answers a POST with `application/json` (one message) or `text/event-stream`
//! (any number of messages, then usually the response). This reader hides the difference and
//! keeps the SSE cursor (last event id, `retry`) the caller needs to resume a dropped stream.

use std::collections::VecDeque;
use std::time::Duration;

use super::slots::SlotBody;
use http::header::CONTENT_TYPE;
use http::Response;
use http_body_util::{BodyExt, Limited};

use crate::upstream::sse::{SseEvent, SseParser};
use crate::upstream::UpstreamError;

/// Where to resume an SSE stream from.
#[derive(Debug, Clone, Default)]
pub(crate) struct Cursor {
    pub(crate) last_event_id: Option<String>,
    pub(crate) retry: Option<Duration>,
}

enum Framing {
    Json { done: bool },
    Sse(SseParser),
}

/// A stream of message texts from one response body.
pub(crate) struct MessageStream {
    body: Option<SlotBody>,
    framing: Framing,
    pending: VecDeque<SseEvent>,
    cursor: Cursor,
    max_bytes: usize,
}

// === impl MessageStream ===

impl MessageStream {
    /// Classifies the response by its content type; anything but JSON or SSE is an error.
    pub(crate) fn new(resp: Response<SlotBody>, max_bytes: usize) -> Result<Self, UpstreamError> {
        let kind =
            resp.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_ascii_lowercase();
        let framing = if kind.starts_with("text/event-stream") {
            Framing::Sse(SseParser::new(max_bytes))
        } else if kind.starts_with("application/json") {
            Framing::Json { done: false }
        } else {
            return Err(UpstreamError::Protocol(format!("unexpected response content type {kind:?}")));
        };
        Ok(Self {
            body: Some(resp.into_body()),
            framing,
            pending: VecDeque::new(),
            cursor: Cursor::default(),
            max_bytes,
        })
    }

    /// Continues from an earlier stream's cursor (a resumed stream may not repeat it).
    pub(crate) fn with_cursor(mut self, cursor: Cursor) -> Self {
        self.cursor = cursor;
        self
    }

    pub(crate) fn cursor(&self) -> &Cursor {
        &self.cursor
    }

    /// The next message's JSON text, or `None` when the body has ended.
    pub(crate) async fn next(&mut self) -> Result<Option<String>, UpstreamError> {
        match self.framing {
            Framing::Json { ref mut done } if !*done => {
                *done = true;
                self.read_json().await.map(Some)
            }
            Framing::Json { .. } => Ok(None),
            Framing::Sse(_) => self.next_sse().await,
        }
    }

    /// Reads what is left of the body, for at most `bound`, and drops it: hyper closes a
    /// connection whose response body is dropped before its end, and a server usually ends a
    /// call's stream right after the response, so this keeps the connection for the next
    /// request instead of opening one. Messages after the response have no call to go to.
    /// Reads the rest of the body, unparsed, for at most `bound`; true if it ended in time.
    pub(crate) async fn drain(mut self, bound: Duration) -> bool {
        let Some(body) = self.body.take() else { return true };
        let rest = Limited::new(body, self.max_bytes).collect();
        matches!(tokio::time::timeout(bound, rest).await, Ok(Ok(_)))
    }

    async fn read_json(&mut self) -> Result<String, UpstreamError> {
        let Some(body) = self.body.take() else {
            return Err(UpstreamError::Closed("JSON body already read".to_owned()));
        };
        let collected = Limited::new(body, self.max_bytes)
            .collect()
            .await
            .map_err(|e| UpstreamError::Closed(format!("reading the JSON body failed: {e}")))?;
        String::from_utf8(Vec::from(collected.to_bytes()))
            .map_err(|_| UpstreamError::Protocol("JSON body is not UTF-8".to_owned()))
    }

    async fn next_sse(&mut self) -> Result<Option<String>, UpstreamError> {
        loop {
            while let Some(event) = self.pending.pop_front() {
                if let Some(text) = self.take_event(event) {
                    return Ok(Some(text));
                }
            }
            if !self.fill().await? {
                return Ok(None);
            }
        }
    }

    /// Records the event's cursor fields; returns its data if it carries a message.
    fn take_event(&mut self, event: SseEvent) -> Option<String> {
        if event.id.is_some() {
            self.cursor.last_event_id = event.id;
        }
        if event.retry.is_some() {
            self.cursor.retry = event.retry;
        }
        let is_message = matches!(event.event.as_deref(), None | Some("message"));
        (is_message && !event.data.trim().is_empty()).then_some(event.data)
    }

    /// Reads one body frame into the parser; false at the end of the body.
    async fn fill(&mut self) -> Result<bool, UpstreamError> {
        let (Some(body), Framing::Sse(parser)) = (self.body.as_mut(), &mut self.framing) else {
            return Ok(false);
        };
        let Some(frame) = body.frame().await else {
            self.body = None;
            return Ok(false);
        };
        let frame = frame.map_err(|e| UpstreamError::Closed(format!("stream broke: {e}")))?;
        if let Ok(data) = frame.into_data() {
            parser.feed_into(&data, &mut self.pending)?;
        }
        Ok(true)
    }
}
