//! Load shedding at a concurrency limit. A request takes a permit or is refused at once with
//! tower's `Overloaded` error (the client sees 503): queueing would only add latency to a
//! gateway that is already saturated. The permit moves into the response body and is released
//! when the body ends or is dropped, so a streamed SSE run counts for as long as it streams.
//! (tower's `ConcurrencyLimit` releases its permit with the response head, too early here.)

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::Response;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tower::load_shed::error::Overloaded;
use tower::{BoxError, Layer, Service};

/// Wraps a service in [`Shed`].
#[derive(Debug, Clone)]
pub(super) struct ShedLayer {
    permits: Arc<Semaphore>,
}

/// Admits up to the limit, sheds the rest.
#[derive(Debug, Clone)]
pub(super) struct Shed<S> {
    inner: S,
    permits: Arc<Semaphore>,
}

pin_project! {
    /// The response future: the inner call with its permit, or the refusal.
    #[project = ShedProj]
    pub(super) enum ShedFuture<F> {
        Admitted { #[pin] inner: F, permit: Option<OwnedSemaphorePermit> },
        Shed,
    }
}

pin_project! {
    /// A response body that holds a concurrency permit until it ends.
    #[derive(Debug)]
    pub(super) struct Permitted<B> {
        #[pin]
        inner: B,
        permit: Option<OwnedSemaphorePermit>,
    }
}

// === impl ShedLayer ===

impl ShedLayer {
    pub(super) fn new(max_in_flight: usize) -> Self {
        Self { permits: Arc::new(Semaphore::new(max_in_flight)) }
    }
}

impl<S> Layer<S> for ShedLayer {
    type Service = Shed<S>;

    fn layer(&self, inner: S) -> Shed<S> {
        Shed { inner, permits: self.permits.clone() }
    }
}

// === impl Shed ===

impl<S, Req, B> Service<Req> for Shed<S>
where
    S: Service<Req, Response = Response<B>>,
    S::Error: Into<BoxError>,
{
    type Response = Response<Permitted<B>>;
    type Error = BoxError;
    type Future = ShedFuture<S::Future>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        match self.permits.clone().try_acquire_owned() {
            Ok(permit) => ShedFuture::Admitted { inner: self.inner.call(req), permit: Some(permit) },
            Err(_) => ShedFuture::Shed,
        }
    }
}

// === impl ShedFuture ===

impl<F, B, E> std::future::Future for ShedFuture<F>
where
    F: std::future::Future<Output = Result<Response<B>, E>>,
    E: Into<BoxError>,
{
    type Output = Result<Response<Permitted<B>>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            ShedProj::Admitted { inner, permit } => {
                let response = std::task::ready!(inner.poll(cx)).map_err(Into::into)?;
                let permit = permit.take();
                Poll::Ready(Ok(response.map(|inner| Permitted { inner, permit })))
            }
            ShedProj::Shed => Poll::Ready(Err(Overloaded::new().into())),
        }
    }
}

// === impl Permitted ===

/// A body that holds no permit (a response made outside the limit).
impl<B> From<B> for Permitted<B> {
    fn from(inner: B) -> Self {
        Self { inner, permit: None }
    }
}

impl<B: Body> Body for Permitted<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let this = self.project();
        let frame = std::task::ready!(this.inner.poll_frame(cx));
        if frame.is_none() {
            // Ended: the next request may start now, whenever the server drops the body.
            this.permit.take();
        }
        Poll::Ready(frame)
    }

    #[inline]
    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    #[inline]
    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use http_body_util::{Empty, Full};

    use super::*;

    /// A service not ready yet: its callers must wait.
    struct Busy;

    impl Service<()> for Busy {
        type Response = Response<Empty<Bytes>>;
        type Error = BoxError;
        type Future = std::future::Ready<Result<Self::Response, BoxError>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
            Poll::Pending
        }

        fn call(&mut self, (): ()) -> Self::Future {
            std::future::ready(Err("called while not ready".into()))
        }
    }

    #[test]
    fn the_layer_is_ready_only_when_the_service_behind_it_is() {
        let mut shed = ShedLayer::new(4).layer(Busy);
        let mut cx = Context::from_waker(futures_util::task::noop_waker_ref());
        assert!(shed.poll_ready(&mut cx).is_pending());
    }

    /// hyper reads `is_end_stream` to decide whether a response has a body to send at all.
    #[test]
    fn a_permitted_body_ends_when_its_inner_body_does() {
        assert!(!Permitted::from(Full::new(Bytes::from_static(b"{}"))).is_end_stream());
        assert!(Permitted::from(Empty::<Bytes>::new()).is_end_stream());
    }

    /// hyper writes a `Content-Length` from the exact size hint.
    #[test]
    fn a_permitted_body_has_its_inner_bodys_size() {
        assert_eq!(Permitted::from(Full::new(Bytes::from_static(b"{}"))).size_hint().exact(), Some(2));
    }
}
