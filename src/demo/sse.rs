//! The Server-Sent Events writer of the demo server and the HTTP body it feeds.
//!
//! Every response stream of a legacy Streamable HTTP server is SSE: a handler writes events
//! through a [`SseWriter`] while hyper drains the matching [`SseBody`]. The channel between them
//! is bounded, so a client that stops reading slows the handler down instead of growing memory.
//! Event ids are unique per session (the transport spec requires it) and come from one counter
//! shared by all streams of the session.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame};
use tokio::sync::mpsc;

/// Frames buffered between a handler and its HTTP response before the handler waits.
const STREAM_BUFFER: usize = 32;
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
    tx: mpsc::Sender<Item>,
    ids: Arc<AtomicU64>,
}

/// The HTTP body of one event stream; ends when every writer is dropped.
pub(crate) struct SseBody {
    rx: mpsc::Receiver<Item>,
}

/// Opens a stream whose event ids come from the session counter `ids`.
pub(crate) fn channel(ids: Arc<AtomicU64>) -> (SseWriter, SseBody) {
    let (tx, rx) = mpsc::channel(STREAM_BUFFER);
    (SseWriter { tx, ids }, SseBody { rx })
}

// === impl SseWriter ===

impl SseWriter {
    /// Writes the 2025-11-25 priming event: an event id with empty data, so that a client
    /// could resume from it.
    pub(crate) async fn prime(&self) -> Result<(), SseError> {
        self.send(self.priming_frame()).await
    }

    /// [`prime`](Self::prime) for a stream nothing has been written to yet, where the buffer
    /// cannot be full and waiting is not needed.
    pub(crate) fn prime_fresh(&self) -> Result<(), SseError> {
        let frame = self.priming_frame();
        self.tx.try_send(frame).map_err(|_| SseError::Closed)
    }

    fn priming_frame(&self) -> Item {
        Item::Data(Bytes::from(format!("id: {}\ndata: \n\n", self.next_id())))
    }

    /// Writes one JSON-RPC message as an `event: message`.
    pub(crate) async fn message(&self, json: &[u8]) -> Result<(), SseError> {
        self.send(Item::Data(self.message_frame(json))).await
    }

    /// Makes the response fail mid-stream, as a crashing server would.
    pub(crate) async fn abort(&self) -> Result<(), SseError> {
        self.send(Item::Abort).await
    }

    /// Waits, at most `limit`, until the body has taken every buffered frame; hyper flushes
    /// what it took before it asks the body for more.
    pub(crate) async fn drained(&self, limit: Duration) {
        let emptied = async {
            while self.tx.capacity() < self.tx.max_capacity() {
                tokio::time::sleep(DRAIN_POLL).await;
            }
        };
        let _ = tokio::time::timeout(limit, emptied).await;
    }

    /// True once the client has gone away.
    pub(crate) fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }

    fn message_frame(&self, json: &[u8]) -> Bytes {
        let id = self.next_id();
        let mut frame = Vec::with_capacity(json.len() + 40);
        frame.extend_from_slice(format!("event: message\nid: {id}\ndata: ").as_bytes());
        // Serialised JSON has no raw newlines, so one `data:` line carries it whole.
        frame.extend_from_slice(json);
        frame.extend_from_slice(b"\n\n");
        Bytes::from(frame)
    }

    fn next_id(&self) -> u64 {
        self.ids.fetch_add(1, Ordering::Relaxed)
    }

    async fn send(&self, item: Item) -> Result<(), SseError> {
        self.tx.send(item).await.map_err(|_| SseError::Closed)
    }
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
            Item::Abort => Some(Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "the handler aborted the stream",
            ))),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn events_carry_increasing_ids_and_end_with_the_writers() {
        let (writer, body) = channel(Arc::new(AtomicU64::new(5)));
        writer.prime().await.unwrap();
        writer.message(br#"{"a":1}"#).await.unwrap();
        drop(writer);
        let bytes = body.collect().await.unwrap().to_bytes();
        assert_eq!(
            &bytes[..],
            b"id: 5\ndata: \n\nevent: message\nid: 6\ndata: {\"a\":1}\n\n"
        );
    }

    #[tokio::test]
    async fn abort_fails_the_body_and_a_dropped_body_closes_the_writer() {
        let (writer, body) = channel(Arc::new(AtomicU64::new(0)));
        writer.abort().await.unwrap();
        assert!(body.collect().await.is_err());
        assert!(writer.is_closed());
        assert!(matches!(writer.message(b"{}").await, Err(SseError::Closed)));
    }
}
