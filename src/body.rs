//! The response body of every entrance (the 2026 front, the legacy relay, subscription
//! streams, the cluster listener): either one buffer (a JSON response) or a stream of SSE
//! frames fed by a channel (progress notifications, then the final response). An enum rather
//! than a boxed body, so a plain JSON response allocates nothing beyond its bytes.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::sync::mpsc;

/// A front response body.
#[derive(Debug)]
pub enum FrontBody {
    Full(Option<Bytes>),
    Stream(mpsc::Receiver<Bytes>),
}

// === impl FrontBody ===

impl FrontBody {
    pub fn full(bytes: impl Into<Bytes>) -> Self {
        Self::Full(Some(bytes.into()))
    }

    pub fn empty() -> Self {
        Self::Full(None)
    }
}

impl Body for FrontBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            Self::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            Self::Stream(rx) => rx.poll_recv(cx).map(|chunk| chunk.map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, Self::Full(None))
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Self::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            Self::Full(None) => SizeHint::with_exact(0),
            Self::Stream(_) => SizeHint::default(),
        }
    }
}

/// Frames one JSON-RPC message as an SSE `message` event.
pub fn sse_event(json: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(json.len() + 24);
    out.extend_from_slice(b"event: message\ndata: ");
    out.extend_from_slice(json);
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;

    use super::*;

    #[tokio::test]
    async fn full_and_stream_bodies_yield_their_bytes() {
        let body = FrontBody::full("abc");
        assert_eq!(body.collect().await.unwrap().to_bytes(), "abc");
        let (tx, rx) = mpsc::channel(2);
        tx.send(Bytes::from_static(b"1")).await.unwrap();
        tx.send(Bytes::from_static(b"2")).await.unwrap();
        drop(tx);
        assert_eq!(FrontBody::Stream(rx).collect().await.unwrap().to_bytes(), "12");
    }

    #[test]
    fn sse_event_framing() {
        assert_eq!(&sse_event(b"{}")[..], b"event: message\ndata: {}\n\n");
    }
}
