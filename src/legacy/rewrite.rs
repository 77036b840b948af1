//! Rewrites the list responses of a relayed body as it streams ([`super::lists`]), leaving
//! every other byte as the upstream sent it.
//!
//! An SSE body is cut into whole events on their blank lines, in the raw bytes, so an event
//! that is not a response to filter goes out byte for byte; one that is goes out re-encoded
//! (its `id`, `event` and `retry` fields kept, its data one line of compact JSON). A JSON body
//! is one message (or a batch): it is held whole, then filtered. Once every awaited response
//! has gone by, the rest of the body passes straight through.
//!
//! Bounded: an event (or a JSON body) is held up to [`MAX_EVENT_BYTES`], the largest the
//! gateway accepts from an upstream anywhere. One past it while a list response is awaited
//! cannot be checked, so it is not relayed: the awaited requests get an error naming the cause
//! and the body ends there.

use bytes::{Bytes, BytesMut};
use serde_json::Value;

use super::error::TRANSPORT_ERROR;
use super::lists::Lists;
use crate::defaults::MAX_EVENT_BYTES;
use crate::protocol::jsonrpc::{error_bytes, ErrorObject};
use crate::upstream::sse::{SseEvent, SseParser};

/// The message the client gets for a list response too large to filter.
const TOO_LARGE: &str = "the list result is too large for the gateway to filter";

/// A body's rewriter.
#[derive(Debug)]
pub(super) struct Rewrite {
    lists: Lists,
    kind: Kind,
    /// Bytes held: an unfinished SSE event, or the JSON body so far.
    held: BytesMut,
    /// Where the unfinished line of `held` starts, and how far `held` was scanned (SSE).
    line_start: usize,
    scanned: usize,
    max: usize,
    /// The body has ended: a CR last in `held` is a whole line end, not half of a CRLF.
    ended: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Sse,
    Json,
}

/// What a chunk turned into.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Out {
    pub(super) chunks: Vec<Bytes>,
    /// The body must end here (a response too large to filter).
    pub(super) end: bool,
}

// === impl Rewrite ===

impl Rewrite {
    /// A rewriter for a body of `content_type`; `None` for one that is neither SSE nor JSON
    /// (relayed as it is).
    pub(super) fn new(lists: Lists, content_type: &str) -> Option<Self> {
        let kind = if super::is_media(content_type, "text/event-stream") {
            Kind::Sse
        } else if super::is_media(content_type, "application/json") {
            Kind::Json
        } else {
            return None;
        };
        let held = BytesMut::new();
        Some(Self { lists, kind, held, line_start: 0, scanned: 0, max: MAX_EVENT_BYTES, ended: false })
    }

    /// Takes the next chunk of the body.
    pub(super) fn push(&mut self, chunk: Bytes) -> Out {
        if self.lists.is_done() && self.held.is_empty() {
            return Out { chunks: vec![chunk], end: false };
        }
        self.held.extend_from_slice(&chunk);
        let mut out = Out::default();
        if self.kind == Kind::Sse {
            self.events(&mut out.chunks);
        }
        if self.held.len() > self.max {
            self.overflow(&mut out);
        }
        out
    }

    /// The end of the body: what is still held, filtered if it is a whole JSON message or
    /// ends whole SSE events.
    pub(super) fn finish(mut self) -> Option<Bytes> {
        if self.held.is_empty() {
            return None;
        }
        if self.kind == Kind::Sse {
            // A CR last in the body ends its line: the last event may be whole only now.
            self.ended = true;
            let mut out = Vec::new();
            self.events(&mut out);
            // An unfinished SSE event is never dispatched by the client either: as it came.
            out.push(std::mem::take(&mut self.held).freeze());
            let out = out.concat();
            return (!out.is_empty()).then(|| out.into());
        }
        let held = std::mem::take(&mut self.held).freeze();
        if let Ok(mut message) = serde_json::from_slice::<Value>(&held) {
            if self.lists.filter_message(&mut message) {
                return Some(Bytes::from(message.to_string()));
            }
        }
        Some(held)
    }

    /// Cuts the whole events off `held`, each relayed or rewritten.
    fn events(&mut self, out: &mut Vec<Bytes>) {
        while let Some(end) = self.next_event_end() {
            // Split off, not copied: an event relayed as it came is the upstream's own bytes.
            let raw = self.held.split_to(end).freeze();
            (self.line_start, self.scanned) = (0, 0);
            out.push(self.event(raw));
            if self.lists.is_done() {
                if !self.held.is_empty() {
                    out.push(self.held.split().freeze());
                }
                return;
            }
        }
    }

    /// The end of the first whole event in `held` (after its blank line), scanning on from
    /// where the last call stopped. A CR last in `held` may be the first half of a CRLF: it
    /// waits for the next byte, unless the body has ended.
    fn next_event_end(&mut self) -> Option<usize> {
        loop {
            let from = self.scanned;
            let at = from + self.held[from..].iter().position(|&b| b == b'\r' || b == b'\n')?;
            let next = match self.held[at] {
                b'\r' if at + 1 == self.held.len() && !self.ended => return None,
                b'\r' if self.held.get(at + 1) == Some(&b'\n') => at + 2,
                _ => at + 1,
            };
            let blank = at == self.line_start;
            (self.line_start, self.scanned) = (next, next);
            if blank {
                return Some(next);
            }
        }
    }

    /// One whole event: as it came, unless it is a response to filter.
    fn event(&mut self, raw: Bytes) -> Bytes {
        let mut parser = SseParser::new(self.max);
        let Ok(mut events) = parser.feed(&raw) else { return raw };
        let Some(event) = events.pop().filter(|e| !e.data.is_empty()) else { return raw };
        let Ok(mut message) = serde_json::from_str::<Value>(&event.data) else { return raw };
        if !self.lists.filter_message(&mut message) {
            return raw;
        }
        encode(&event, &message)
    }

    /// A body past the bound while responses are awaited: their requests get an error, and
    /// nothing more is relayed.
    fn overflow(&mut self, out: &mut Out) {
        tracing::warn!(bytes = self.held.len(), "a legacy list response is too large to filter: not relayed");
        if let Some(counter) = &self.lists.too_large {
            counter.inc();
        }
        self.held = BytesMut::new();
        let error = ErrorObject { code: TRANSPORT_ERROR, message: TOO_LARGE.to_owned(), data: None };
        let errors = self.lists.waiting().iter().map(|(id, _)| error_bytes(Some(id), &error));
        match self.kind {
            Kind::Sse => out.chunks.extend(errors.map(|e| crate::body::sse_event(&e))),
            Kind::Json => {
                let errors: Vec<Vec<u8>> = errors.collect();
                let body = match errors.len() {
                    1 => errors.into_iter().next().unwrap_or_default(),
                    _ => [b"[".as_slice(), &errors.join(&b","[..]), b"]"].concat(),
                };
                out.chunks.push(Bytes::from(body));
            }
        }
        out.end = true;
    }
}

/// An event carrying `message` in place of its data, its other fields kept.
fn encode(event: &SseEvent, message: &Value) -> Bytes {
    let mut out = String::new();
    if let Some(id) = &event.id {
        out.push_str(&format!("id: {id}\n"));
    }
    if let Some(name) = &event.event {
        out.push_str(&format!("event: {name}\n"));
    }
    if let Some(retry) = event.retry {
        out.push_str(&format!("retry: {}\n", retry.as_millis()));
    }
    out.push_str(&format!("data: {message}\n\n"));
    Bytes::from(out)
}

#[cfg(test)]
mod tests;
