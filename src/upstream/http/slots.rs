//! The bound on upstream requests in flight, set below the bound on connections
//! ([`super::limit`]), and the response body that holds a request's slot until it ends.
//!
//! The `hyper-util` client starts a connect for every request that finds no idle connection,
//! and when an idle one comes back first it finishes that connect in the background. With as
//! many requests in flight as connections allowed, such a connect found every slot taken and
//! waited (up to the connect timeout) with its task and buffers alive: thousands of them at
//! once under sustained load. Here a request first takes a slot, in arrival order; there are
//! `max_connecting` fewer slots than connections, so a request that finds no idle connection,
//! or the connect the client finishes for it in the background, finds a free connection slot
//! at once. A slot is held until the response body has ended or is dropped, which is when the
//! connection under it is free again.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::driven::UpstreamBody;

/// Requests in flight at once for `max_connections` connections, `max_connecting` of them
/// being opened, when `min` requests must always fit (each session's two streams and one
/// more): `max_connecting` below the connections, never below `min`, never above the
/// connections.
pub(crate) fn bound(max_connections: usize, max_connecting: usize, min: usize) -> usize {
    max_connections.saturating_sub(max_connecting).max(min).min(max_connections).max(1)
}

/// The slots of one upstream client, shared by its clones.
#[derive(Clone, Debug)]
pub(crate) struct Slots {
    semaphore: Arc<Semaphore>,
}

/// A response body and the request slot it holds until it ends.
pub(crate) struct SlotBody<B = UpstreamBody> {
    body: B,
    slot: Option<OwnedSemaphorePermit>,
}

// === impl Slots ===

impl Slots {
    pub(crate) fn new(bound: usize) -> Self {
        Self { semaphore: Arc::new(Semaphore::new(bound.max(1))) }
    }

    /// A slot, once the requests before this one have theirs (the semaphore is fair); `None`
    /// only if the slots were closed, which nothing does.
    pub(crate) async fn take(&self) -> Option<OwnedSemaphorePermit> {
        self.semaphore.clone().acquire_owned().await.ok()
    }

    /// Slots free now.
    #[cfg(test)]
    pub(crate) fn available(&self) -> usize {
        self.semaphore.available_permits()
    }
}

// === impl SlotBody ===

impl<B> SlotBody<B> {
    pub(crate) fn new(body: B, slot: OwnedSemaphorePermit) -> Self {
        Self { body, slot: Some(slot) }
    }
}

impl<B: Body<Data = Bytes> + Unpin> Body for SlotBody<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = &mut *self;
        let frame = Pin::new(&mut this.body).poll_frame(cx);
        if let Poll::Ready(None | Some(Err(_))) = frame {
            // The body ended (the connection goes back to the pool) or broke (it is closed).
            this.slot = None;
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use futures_util::FutureExt;
    use http_body_util::{BodyExt, Full};

    use super::*;

    #[test]
    fn the_bound_leaves_room_for_connects_but_always_fits_the_sessions_streams() {
        // The defaults: 256 sessions, 2 × 256 + 48 connections, 32 being opened.
        assert_eq!(bound(560, 32, 513), 528);
        // Too few connections to leave room for connects: the sessions' streams still fit.
        assert_eq!(bound(528, 32, 513), 513);
        // Never more requests than connections, never none.
        assert_eq!(bound(3, 1, 513), 3);
        assert_eq!(bound(1, 5, 0), 1);
    }

    #[tokio::test]
    async fn a_body_holds_its_slot_until_it_ends() {
        let slots = Slots::new(1);
        let slot = slots.take().await.unwrap();
        let body = SlotBody::new(Full::new(Bytes::from_static(b"done")), slot);
        assert_eq!(body.size_hint().exact(), Some(4), "the body's own length");
        assert!(!body.is_end_stream());
        assert_eq!(slots.available(), 0);
        assert!(slots.take().now_or_never().is_none(), "a second request waits for the slot");
        assert_eq!(body.collect().await.unwrap().to_bytes(), "done");
        assert_eq!(slots.available(), 1, "the slot is free once the body ended");
    }

    #[tokio::test]
    async fn a_body_dropped_before_its_end_frees_its_slot() {
        let slots = Slots::new(1);
        let body = SlotBody::new(Full::new(Bytes::from_static(b"unread")), slots.take().await.unwrap());
        drop(body);
        assert!(slots.take().now_or_never().flatten().is_some());
    }
}
