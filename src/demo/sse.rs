//! The Server-Sent Events writer of the demo server and the HTTP body it feeds, with optional
//! resumption.
//!
//! Every response stream of a legacy Streamable HTTP server is SSE: a handler writes events
//! through a [`SseWriter`] while hyper drains the current [`SseBody`]. The channel between them
//! is bounded, so a client that stops reading slows the handler down instead of growing memory.
//! Event ids are `<stream>-<seq>`: unique per session, as the transport spec requires, and
//! naming the stream a `Last-Event-ID` resumes. A resumable stream keeps its last events in a
//! bounded log and survives its client going away; [`SseWriter::resume`] replays what followed
//! an event id onto a new body and carries on there (2025-11-25 polling, SEP-1699).

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame};
use parking_lot::Mutex;
use tokio::sync::mpsc;

/// Frames buffered between a handler and its HTTP response before the handler waits.
const STREAM_BUFFER: usize = 32;
/// Events a resumable stream keeps for replay; older ones are forgotten.
const LOG_LIMIT: usize = 64;
/// How often [`SseWriter::drained`] looks at the buffer.
const DRAIN_POLL: Duration = Duration::from_millis(2);

/// Errors from writing to an event stream.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SseError {
    #[error("the client closed the event stream")]
    Closed,
}

enum Item {
    Data(Bytes),
    /// Ends the body with an error so that hyper drops the connection mid-response.
    Abort,
}

/// The writing half of one event stream.
#[derive(Clone)]
pub(crate) struct SseWriter {
    stream: Arc<Stream>,
}

/// The HTTP body of one event stream; ends when the stream's sink is dropped.
pub(crate) struct SseBody {
    rx: mpsc::Receiver<Item>,
}

struct Stream {
    number: u64,
    resumable: bool,
    next_seq: AtomicU64,
    state: Mutex<State>,
}

struct State {
    /// Where events go now; `None` while no client is attached or once the stream finished.
    sink: Option<mpsc::Sender<Item>>,
    log: VecDeque<(u64, Bytes)>,
    finished: bool,
}

/// Opens stream `number` of a session; a `resumable` one logs its events for replay.
pub(crate) fn channel(number: u64, resumable: bool) -> (SseWriter, SseBody) {
    let (tx, rx) = mpsc::channel(STREAM_BUFFER);
    let state = State { sink: Some(tx), log: VecDeque::new(), finished: false };
    let stream = Stream { number, resumable, next_seq: AtomicU64::new(0), state: Mutex::new(state) };
    let writer = SseWriter { stream: Arc::new(stream) };
    (writer, SseBody { rx })
}

/// Splits a `Last-Event-ID` into stream number and sequence.
pub(crate) fn parse_event_id(id: &str) -> Option<(u64, u64)> {
    let (stream, seq) = id.split_once('-')?;
    Some((stream.parse().ok()?, seq.parse().ok()?))
}

// === impl SseWriter ===

impl SseWriter {
    pub(crate) fn number(&self) -> u64 {
        self.stream.number
    }

    /// Writes the 2025-11-25 priming event: an event id with empty data, so that a client
    /// can resume from it.
    pub(crate) async fn prime(&self) -> Result<(), SseError> {
        self.send_event(b"", None).await
    }

    /// [`prime`](Self::prime) for a stream nothing has been written to yet, where the buffer
    /// cannot be full and waiting is not needed.
    pub(crate) fn prime_fresh(&self) -> Result<(), SseError> {
        let (frame, sink) = self.enqueue(b"", None);
        let sink = sink.ok_or(SseError::Closed)?;
        sink.try_send(Item::Data(frame)).map_err(|_| SseError::Closed)
    }

    /// Primes the stream with a `retry` hint, then lets the connection go: the client must
    /// come back with `GET` + `Last-Event-ID` to read the rest.
    pub(crate) async fn prime_and_detach(&self, retry: Duration) -> Result<(), SseError> {
        self.send_event(b"", Some(retry)).await?;
        self.stream.state.lock().sink = None;
        Ok(())
    }

    /// Writes one JSON-RPC message as an `event: message`.
    pub(crate) async fn message(&self, json: &[u8]) -> Result<(), SseError> {
        self.send_event(json, None).await
    }

    /// Makes the response fail mid-stream, as a crashing server would.
    pub(crate) async fn abort(&self) -> Result<(), SseError> {
        let sink = self.stream.state.lock().sink.clone();
        let sink = sink.ok_or(SseError::Closed)?;
        sink.send(Item::Abort).await.map_err(|_| SseError::Closed)
    }

    /// Ends the stream: its body ends after what is buffered, and a later resume only replays.
    pub(crate) fn finish(&self) {
        let mut state = self.stream.state.lock();
        state.finished = true;
        state.sink = None;
    }

    /// True once no client can read what is written (a resumable stream is never closed
    /// before it finishes: its client may come back).
    pub(crate) fn is_closed(&self) -> bool {
        let state = self.stream.state.lock();
        let detached = state.sink.as_ref().is_none_or(mpsc::Sender::is_closed);
        detached && (state.finished || !self.stream.resumable)
    }

    /// Waits, at most `limit`, until the body has taken every buffered frame; hyper flushes
    /// what it took before it asks the body for more.
    pub(crate) async fn drained(&self, limit: Duration) {
        let Some(sink) = self.stream.state.lock().sink.clone() else {
            return;
        };
        let emptied = async {
            while sink.capacity() < sink.max_capacity() {
                tokio::time::sleep(DRAIN_POLL).await;
            }
        };
        let _ = tokio::time::timeout(limit, emptied).await;
    }

    /// A new body replaying the events after `after` and then following the stream live
    /// (or ending, if the stream has finished).
    pub(crate) fn resume(&self, after: u64) -> SseBody {
        let mut state = self.stream.state.lock();
        let (tx, rx) = mpsc::channel(LOG_LIMIT + STREAM_BUFFER);
        for (_, frame) in state.log.iter().filter(|(seq, _)| *seq > after) {
            // The channel has room for the whole log.
            let _ = tx.try_send(Item::Data(frame.clone()));
        }
        if !state.finished {
            state.sink = Some(tx);
        }
        SseBody { rx }
    }

    /// Sends `data` to the attached client, if any. A resumable stream that is not finished
    /// accepts events with no client attached: they wait in the log for a resume.
    async fn send_event(&self, data: &[u8], retry: Option<Duration>) -> Result<(), SseError> {
        let (frame, sink) = self.enqueue(data, retry);
        let delivered = match sink {
            Some(sink) => sink.send(Item::Data(frame)).await.is_ok(),
            None => false,
        };
        let keeps = self.stream.resumable && !self.stream.state.lock().finished;
        if delivered || keeps {
            Ok(())
        } else {
            Err(SseError::Closed)
        }
    }

    /// Frames `data` under the next event id and logs it, under one lock so that a resume
    /// sees every event either in the log it replays or on the sink it installs.
    fn enqueue(&self, data: &[u8], retry: Option<Duration>) -> (Bytes, Option<mpsc::Sender<Item>>) {
        let mut state = self.stream.state.lock();
        let seq = self.stream.next_seq.fetch_add(1, Ordering::Relaxed);
        let frame = frame(self.stream.number, seq, data, retry);
        if self.stream.resumable {
            if state.log.len() >= LOG_LIMIT {
                state.log.pop_front();
            }
            state.log.push_back((seq, frame.clone()));
        }
        (frame, state.sink.clone())
    }
}

/// One SSE event. Serialised JSON has no raw newlines, so one `data:` line carries it whole.
fn frame(stream: u64, seq: u64, data: &[u8], retry: Option<Duration>) -> Bytes {
    let event = if data.is_empty() { "" } else { "event: message\n" };
    let retry = retry.map_or(String::new(), |r| format!("retry: {}\n", r.as_millis()));
    let head = format!("{event}id: {stream}-{seq}\n{retry}data: ");
    let mut frame = Vec::with_capacity(head.len() + data.len() + 2);
    frame.extend_from_slice(head.as_bytes());
    frame.extend_from_slice(data);
    frame.extend_from_slice(b"\n\n");
    Bytes::from(frame)
}

// === impl SseBody ===

impl Body for SseBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        self.rx.poll_recv(cx).map(|item| match item? {
            Item::Data(bytes) => Some(Ok(Frame::data(bytes))),
            Item::Abort => {
                Some(Err(io::Error::new(io::ErrorKind::ConnectionAborted, "the handler aborted the stream")))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    async fn text(body: SseBody) -> String {
        let bytes = body.collect().await.unwrap().to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn events_carry_stream_scoped_ids_and_end_with_the_stream() {
        let (writer, body) = channel(5, false);
        writer.prime().await.unwrap();
        writer.message(br#"{"a":1}"#).await.unwrap();
        writer.finish();
        let expected = "id: 5-0\ndata: \n\nevent: message\nid: 5-1\ndata: {\"a\":1}\n\n";
        assert_eq!(text(body).await, expected);
        assert_eq!(parse_event_id("5-1"), Some((5, 1)));
        assert_eq!(parse_event_id("5"), None);
    }

    #[tokio::test]
    async fn abort_fails_the_body_and_a_dropped_body_closes_the_writer() {
        let (writer, body) = channel(0, false);
        writer.abort().await.unwrap();
        assert!(body.collect().await.is_err());
        assert!(writer.is_closed());
        assert!(matches!(writer.message(b"{}").await, Err(SseError::Closed)));
    }

    #[tokio::test]
    async fn a_detached_resumable_stream_replays_after_the_given_event() {
        let (writer, body) = channel(2, true);
        writer.prime_and_detach(Duration::from_millis(10)).await.unwrap();
        assert_eq!(text(body).await, "id: 2-0\nretry: 10\ndata: \n\n");
        writer.message(b"{}").await.unwrap();
        assert!(!writer.is_closed(), "the client may still come back");
        let resumed = writer.resume(0);
        writer.message(b"[]").await.unwrap();
        writer.finish();
        let expected = "event: message\nid: 2-1\ndata: {}\n\nevent: message\nid: 2-2\ndata: []\n\n";
        assert_eq!(text(resumed).await, expected);
        assert_eq!(text(writer.resume(1)).await, "event: message\nid: 2-2\ndata: []\n\n");
    }
}
