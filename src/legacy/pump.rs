//! Streams an upstream response body to the client as it arrives (an SSE stream of server
//! requests, notifications and the response; or a JSON body), without buffering it.
//!
//! One task per relayed body moves frames into the front body's bounded channel, so a slow
//! client slows the upstream read instead of growing memory. It stops at the first of: the
//! body's end, the client going away, the session ending (deleted or expired) and, for a
//! POST's stream, the call's [`Deadline`]. Dropping the upstream body closes its stream upstream.
//! A POST's SSE stream cut at its deadline first answers the POST's request with a timeout
//! error, as the stream of a call that fails does, when it is between two events.
//! While it runs it holds the session [`Active`], so a session with an open stream never idles out.
//! A restricted client's list responses go through a [`Rewrite`] on the way.

use std::time::Duration;

use bytes::Bytes;
use http_body::Body;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::error::LegacyError;
use super::rewrite::Rewrite;
use super::table::Active;
use crate::body::{sse_event, FrontBody};
use crate::protocol::jsonrpc::error_bytes;
use crate::protocol::RequestId;

/// Chunks buffered towards the client before the upstream read waits.
const CHUNKS: usize = 16;

/// When a POST's relayed stream stops waiting for the upstream, and whom it answers then.
#[derive(Debug)]
pub(super) struct Deadline {
    at: Instant,
    timeout: Duration,
    /// The POST's one request; `None` for a batch, or a body a message cannot be added to.
    id: Option<RequestId>,
}

// === impl Deadline ===

impl Deadline {
    /// `timeout` from now.
    pub(super) fn new(timeout: Duration, id: Option<RequestId>) -> Self {
        Self { at: Instant::now() + timeout, timeout, id }
    }

    /// This deadline for a body of `content_type`: only an SSE stream can take one more message.
    pub(super) fn for_stream(mut self, content_type: &str) -> Self {
        if !super::is_media(content_type, "text/event-stream") {
            self.id = None;
        }
        self
    }

    /// The event that answers the request when the stream is cut at the deadline.
    fn answer(&self) -> Option<Bytes> {
        let id = self.id.as_ref()?;
        let error = LegacyError::Timeout(self.timeout).error_object();
        Some(sse_event(&error_bytes(Some(id), &error)))
    }

    /// The stream reached the deadline: the client's request gets its timeout error when the
    /// bytes sent so far end an event (a message added inside one would corrupt both).
    fn cut(&self, tx: &mpsc::Sender<Bytes>, sent: &Tail) {
        tracing::warn!(timeout = ?self.timeout, "legacy call reached the upstream request timeout");
        let Some(answer) = self.answer() else { return };
        if !sent.ends_event() {
            tracing::debug!("legacy stream cut inside an event: its request is left unanswered");
        } else if tx.try_send(answer).is_err() {
            tracing::debug!("legacy stream cut with the client's queue full: its request is left unanswered");
        }
    }
}

/// The last bytes sent to the client: enough to tell whether they end an SSE event.
#[derive(Debug, Default)]
struct Tail {
    bytes: [u8; 3],
    len: usize,
}

// === impl Tail ===

impl Tail {
    fn push(&mut self, chunk: &[u8]) {
        for &b in &chunk[chunk.len().saturating_sub(3)..] {
            self.bytes = [self.bytes[1], self.bytes[2], b];
            self.len = (self.len + 1).min(3);
        }
    }

    /// True when nothing was sent or what was sent ends with a blank line (the end of an event),
    /// whichever line ends (CRLF, LF or CR) it uses.
    fn ends_event(&self) -> bool {
        let sent = &self.bytes[3 - self.len..];
        let before_last_end = match sent {
            [] => return true,
            [rest @ .., b'\r', b'\n'] => rest,
            [rest @ .., b'\n' | b'\r'] => rest,
            _ => return false,
        };
        before_last_end.last().is_none_or(|b| matches!(b, b'\n' | b'\r'))
    }
}

/// The front body fed from `body`, through `rewrite` when there is one.
pub(super) fn stream(
    body: Incoming,
    active: Active,
    ended: watch::Receiver<bool>,
    deadline: Option<Deadline>,
    rewrite: Option<Rewrite>,
) -> FrontBody {
    if body.is_end_stream() {
        return FrontBody::empty();
    }
    let (tx, rx) = mpsc::channel(CHUNKS);
    tokio::spawn(pump(body, tx, active, (ended, deadline), rewrite));
    FrontBody::Stream(rx)
}

async fn pump(
    mut body: Incoming,
    tx: mpsc::Sender<Bytes>,
    _active: Active,
    (mut ended, deadline): (watch::Receiver<bool>, Option<Deadline>),
    mut rewrite: Option<Rewrite>,
) {
    let expiry = async {
        match &deadline {
            Some(d) => tokio::time::sleep_until(d.at).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(expiry);
    let mut sent = Tail::default();
    loop {
        // Biased: a stop signal wins over a frame that is ready at the same time.
        let frame = tokio::select! {
            biased;
            _ = tx.closed() => return,
            _ = ended.wait_for(|e| *e) => return,
            _ = &mut expiry => {
                if let Some(d) = &deadline {
                    d.cut(&tx, &sent);
                }
                return;
            }
            frame = body.frame() => frame,
        };
        match frame {
            Some(Ok(frame)) => {
                let Ok(data) = frame.into_data() else { continue };
                let Some(rewriting) = &mut rewrite else {
                    if !send(&tx, &mut sent, data).await {
                        return;
                    }
                    continue;
                };
                let out = rewriting.push(data);
                for chunk in out.chunks {
                    if !send(&tx, &mut sent, chunk).await {
                        return;
                    }
                }
                if out.end {
                    return;
                }
            }
            Some(Err(e)) => {
                tracing::debug!(error = %e, "legacy upstream stream failed");
                return;
            }
            None => {
                if let Some(rest) = rewrite.and_then(Rewrite::finish) {
                    let _ = tx.send(rest).await;
                }
                return;
            }
        }
    }
}

/// Sends `chunk` to the client, noting its end; false once the client has gone.
async fn send(tx: &mpsc::Sender<Bytes>, sent: &mut Tail, chunk: Bytes) -> bool {
    sent.push(&chunk);
    tx.send(chunk).await.is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn after(chunks: &[&[u8]]) -> bool {
        let mut tail = Tail::default();
        for chunk in chunks {
            tail.push(chunk);
        }
        tail.ends_event()
    }

    #[test]
    fn an_event_ends_at_a_blank_line_with_any_line_end() {
        assert!(after(&[]), "nothing sent yet");
        for ended in ["data: x\n\n", "data: x\r\n\r\n", "data: x\r\r", "data: x\n\r\n", "data: x\r\n\n", "\n"]
        {
            assert!(after(&[ended.as_bytes()]), "{ended:?}");
        }
        for open in ["data: x", "data: x\n", "data: x\r\n", "data: x\r", "event: message\ndata: {}\r\n"] {
            assert!(!after(&[open.as_bytes()]), "{open:?}");
        }
        // The blank line split across chunks, down to one byte each.
        assert!(after(&[b"data: x\r", b"\n", b"\r", b"\n"]));
        assert!(after(&[b"data: x\n", b"\n"]));
        assert!(!after(&[b"data: x\n\n", b"data: y\n"]));
    }

    #[test]
    fn only_an_sse_stream_of_one_request_is_answered() {
        let id = || Some(RequestId::Number(4));
        let answer = Deadline::new(Duration::from_millis(250), id()).for_stream("text/event-stream").answer();
        let text = String::from_utf8(answer.expect("an answer").to_vec()).expect("utf-8");
        assert!(text.starts_with("event: message\ndata: {") && text.ends_with("}\n\n"), "{text}");
        let json: serde_json::Value =
            serde_json::from_str(&text["event: message\ndata: ".len()..]).expect("json");
        assert_eq!(json["id"], 4);
        assert_eq!(json["error"]["code"], -32000);
        assert_eq!(json["error"]["message"], "upstream server did not answer within 250ms");
        let sse = Deadline::new(Duration::from_secs(1), id()).for_stream("Text/Event-Stream; charset=utf-8");
        assert!(sse.answer().is_some());
        assert!(Deadline::new(Duration::from_secs(1), id())
            .for_stream("application/json")
            .answer()
            .is_none());
        assert!(Deadline::new(Duration::from_secs(1), None)
            .for_stream("text/event-stream")
            .answer()
            .is_none());
    }
}
