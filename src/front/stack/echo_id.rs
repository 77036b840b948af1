//! The request's `x-request-id` echoed on its response, whichever layer made the response (a
//! shed or timed-out one included). tower-http's `PropagateRequestIdLayer` does the same and
//! also files the id in the response's extensions, which nothing here reads: that costs a map
//! allocated and filled on every call, so this layer copies the header and nothing else.

use std::pin::Pin;
use std::task::{Context, Poll};

use http::{HeaderName, HeaderValue, Request, Response};
use pin_project_lite::pin_project;
use tower::{Layer, Service};

/// Wraps a service in [`EchoId`].
#[derive(Debug, Clone)]
pub(super) struct EchoIdLayer {
    header: HeaderName,
}

/// Puts the request's id header on the response, unless the response has one.
#[derive(Debug, Clone)]
pub(super) struct EchoId<S> {
    inner: S,
    header: HeaderName,
}

pin_project! {
    /// The inner call, with the id to echo.
    pub(super) struct EchoIdFuture<F> {
        #[pin]
        inner: F,
        echo: Option<(HeaderName, HeaderValue)>,
    }
}

// === impl EchoIdLayer ===

impl EchoIdLayer {
    pub(super) fn new(header: HeaderName) -> Self {
        Self { header }
    }
}

impl<S> Layer<S> for EchoIdLayer {
    type Service = EchoId<S>;

    fn layer(&self, inner: S) -> EchoId<S> {
        EchoId { inner, header: self.header.clone() }
    }
}

// === impl EchoId ===

impl<S, B, R> Service<Request<B>> for EchoId<S>
where
    S: Service<Request<B>, Response = Response<R>>,
{
    type Response = Response<R>;
    type Error = S::Error;
    type Future = EchoIdFuture<S::Future>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let echo = req.headers().get(&self.header).map(|id| (self.header.clone(), id.clone()));
        EchoIdFuture { inner: self.inner.call(req), echo }
    }
}

// === impl EchoIdFuture ===

impl<F, R, E> std::future::Future for EchoIdFuture<F>
where
    F: std::future::Future<Output = Result<Response<R>, E>>,
{
    type Output = Result<Response<R>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let mut response = std::task::ready!(this.inner.poll(cx))?;
        if let Some((header, id)) = this.echo.take() {
            response.headers_mut().entry(header).or_insert(id);
        }
        Poll::Ready(Ok(response))
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use tower::{service_fn, ServiceExt};

    use super::*;

    const ID: HeaderName = HeaderName::from_static("x-request-id");

    /// The response's id header after the layer, for a request with `sent` and a service that
    /// answers with `own`.
    async fn echoed(sent: Option<&'static str>, own: Option<&'static str>) -> Option<HeaderValue> {
        let service = EchoIdLayer::new(ID).layer(service_fn(move |_: Request<()>| async move {
            let mut response = Response::new(());
            if let Some(own) = own {
                response.headers_mut().insert(ID, HeaderValue::from_static(own));
            }
            Ok::<_, Infallible>(response)
        }));
        let mut req = Request::new(());
        if let Some(sent) = sent {
            req.headers_mut().insert(ID, HeaderValue::from_static(sent));
        }
        let response = service.oneshot(req).await.expect("infallible");
        assert!(response.headers().get_all(&ID).iter().count() <= 1, "one id at most");
        response.headers().get(&ID).cloned()
    }

    #[tokio::test]
    async fn the_request_id_goes_back_unless_the_response_has_its_own() {
        assert_eq!(echoed(Some("rid-1"), None).await.unwrap(), "rid-1");
        assert_eq!(echoed(Some("rid-1"), Some("owner-9")).await.unwrap(), "owner-9");
        assert_eq!(echoed(None, Some("owner-9")).await.unwrap(), "owner-9");
        assert_eq!(echoed(None, None).await, None);
    }
}
