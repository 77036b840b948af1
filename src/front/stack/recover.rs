//! The error boundary of the stack: a layer below that fails (load shed, timeout, body too
//! large) becomes the JSON-RPC error response the client is owed, counted and logged like a
//! request the handler answered. The method label comes from the `Mcp-Method` header, since
//! such a request's body was never read.
//!
//! It also records the requests nobody answers: when the client closes its connection before
//! the response head, hyper drops the whole call, and no layer below gets to record it. The
//! call's future then counts it as `abandoned` and writes its log line as it is dropped.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use pin_project_lite::pin_project;
use tokio::time::Instant;
use tower::load_shed::error::Overloaded;
use tower::timeout::error::Elapsed;
use tower::{BoxError, Layer, Service};

use crate::body::FrontBody;
use crate::error::FrontError;
use crate::front::outcome::{self, Outcome};
use crate::metrics::Metrics;
use crate::protocol::headers;
use crate::protocol::methods::FrontMethod;

/// The method label of a request whose `Mcp-Method` names no front method.
const UNNAMED: &str = "unknown";

/// Wraps a service in [`Recover`].
#[derive(Debug, Clone)]
pub(super) struct RecoverLayer {
    metrics: Arc<Metrics>,
}

/// Answers the inner service's errors.
#[derive(Debug, Clone)]
pub(super) struct Recover<S> {
    inner: S,
    metrics: Arc<Metrics>,
}

pin_project! {
    /// The inner call, with what its error response needs.
    pub(super) struct RecoverFuture<F> {
        #[pin]
        inner: F,
        request: Pending,
    }
}

/// What recording the request needs. Dropped before [`Pending::answered`], it records the
/// request as abandoned, in the request span it carries.
pub(super) struct Pending {
    pending: bool,
    metrics: Arc<Metrics>,
    method: &'static str,
    started: Instant,
    span: tracing::Span,
}

// === impl RecoverLayer ===

impl RecoverLayer {
    pub(super) fn new(metrics: Arc<Metrics>) -> Self {
        Self { metrics }
    }
}

impl<S> Layer<S> for RecoverLayer {
    type Service = Recover<S>;

    fn layer(&self, inner: S) -> Recover<S> {
        Recover { inner, metrics: self.metrics.clone() }
    }
}

// === impl Recover ===

impl<S, B, RB> Service<Request<B>> for Recover<S>
where
    S: Service<Request<B>, Response = Response<RB>, Error = BoxError>,
    RB: From<FrontBody>,
{
    type Response = Response<RB>;
    type Error = Infallible;
    type Future = RecoverFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // The layers below are always ready; an error here would still be answered per call.
        match self.inner.poll_ready(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(_) => Poll::Ready(Ok(())),
        }
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let request = Pending {
            pending: true,
            metrics: self.metrics.clone(),
            method: method_label(&req),
            started: Instant::now(),
            span: tracing::Span::current(),
        };
        RecoverFuture { inner: self.inner.call(req), request }
    }
}

impl<F, RB> Future for RecoverFuture<F>
where
    F: Future<Output = Result<Response<RB>, BoxError>>,
    RB: From<FrontBody>,
{
    type Output = Result<Response<RB>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let result = std::task::ready!(this.inner.poll(cx));
        let request = this.request;
        request.answered();
        match result {
            Ok(response) => Poll::Ready(Ok(response)),
            Err(e) => {
                let outcome = Outcome::error(None, &front_error(e));
                outcome.record(&request.metrics, request.method, request.started);
                Poll::Ready(Ok(outcome.response.map(RB::from)))
            }
        }
    }
}

// === impl Pending ===

impl Pending {
    /// The request has its response head: whatever happens next is recorded elsewhere.
    fn answered(&mut self) {
        self.pending = false;
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if self.pending {
            let _entered = self.span.enter();
            outcome::record_abandoned(&self.metrics, self.method, self.started);
        }
    }
}

/// What a layer's failure means to the client.
fn front_error(e: BoxError) -> FrontError {
    if e.is::<Overloaded>() {
        return FrontError::Overloaded;
    }
    if e.is::<Elapsed>() {
        return FrontError::RequestTimeout;
    }
    match e.downcast::<FrontError>() {
        Ok(e) => *e,
        Err(e) => FrontError::Internal(e),
    }
}

fn method_label<B>(req: &Request<B>) -> &'static str {
    let named = req.headers().get(headers::METHOD).and_then(|v| v.to_str().ok());
    named.and_then(FrontMethod::parse).map_or(UNNAMED, FrontMethod::label)
}
