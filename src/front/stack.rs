//! The front as one tower stack, assembled once at start. Each layer says why it is there;
//! they are listed outermost first, the order a request meets them. A connection and a request
//! clone the stack, which clones `Arc`s: no layer is boxed or built per request.

mod echo_id;
mod recover;
mod shed;
mod size;
mod span;
#[cfg(test)]
mod tests;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{AUTHORIZATION, COOKIE, PROXY_AUTHORIZATION};
use http::{Request, Response};
use http_body::Body;
use http_body_util::Limited;
use tower::timeout::TimeoutLayer;
use tower::{BoxError, Service, ServiceBuilder};
use tower_http::request_id::SetRequestIdLayer;
use tower_http::sensitive_headers::SetSensitiveRequestHeadersLayer;
use tower_http::trace::{DefaultOnFailure, TraceLayer};
use tracing::Level;

use super::service::{handler, FrontState};
use crate::body::FrontBody;
use crate::config::FrontConfig;
use crate::metrics::Metrics;

/// The bounds the stack enforces.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Requests served at once, a streamed response counted until its body ends.
    pub max_in_flight: usize,
    pub max_body_bytes: usize,
    /// Time to the response head (for a streamed run: to its first event).
    pub request_timeout: Duration,
}

// === impl Limits ===

impl Limits {
    /// The front's bounds (`front.max_in_flight`, `front.max_body_bytes`), with its timeout.
    pub fn of(cfg: &FrontConfig, request_timeout: Duration) -> Self {
        Self { max_in_flight: cfg.max_in_flight, max_body_bytes: cfg.max_body_bytes, request_timeout }
    }
}

/// The front service the serve loop drives: the handler inside the layers.
pub fn stack<B>(
    state: Arc<FrontState>,
    request_timeout: Duration,
) -> impl Service<
    Request<B>,
    Response = Response<impl Body<Data = Bytes, Error = Infallible> + Send + 'static>,
    Error = Infallible,
    Future: Send + 'static,
> + Clone
       + Send
       + 'static
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let limits = Limits::of(&state.cfg, request_timeout);
    let metrics = state.metrics.clone();
    layered(handler(state), limits, metrics)
}

/// The layers around any handler of limited bodies: the front's, the internal listener's (the
/// cluster), and a stub in tests. Every entrance meets the same ones.
pub fn layered<S, B>(
    inner: S,
    limits: Limits,
    metrics: Arc<Metrics>,
) -> impl Service<
    Request<B>,
    Response = Response<impl Body<Data = Bytes, Error = Infallible> + Send + 'static>,
    Error = Infallible,
    Future: Send + 'static,
> + Clone
       + Send
       + 'static
where
    S: Service<Request<Limited<B>>, Response = Response<FrontBody>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: Body + Send + 'static,
{
    ServiceBuilder::new()
        // Secrets (a legacy session's id among them) are marked before any layer below can
        // record a header.
        .layer(SetSensitiveRequestHeadersLayer::new([
            AUTHORIZATION,
            PROXY_AUTHORIZATION,
            COOKIE,
            span::SESSION_ID,
        ]))
        // A client's `x-request-id` that is too long, of unsafe characters or of the gateway's
        // own form is dropped, never echoed or logged.
        .map_request(span::screen_request_id)
        // Every request gets an id: the client's own `x-request-id`, or a fresh one.
        .layer(SetRequestIdLayer::new(span::X_REQUEST_ID, span::NextId::new()))
        // One span per request, carrying its id; 5xx are counted and logged by the handler.
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(span::FrontSpan)
                .on_failure(DefaultOnFailure::new().level(Level::DEBUG)),
        )
        // The id goes back on every response, a shed or timed-out one included.
        .layer(echo_id::EchoIdLayer::new(span::X_REQUEST_ID))
        // Layers below fail with errors; the client gets each as a counted JSON-RPC error.
        .layer(recover::RecoverLayer::new(metrics))
        // Past the limit a request is refused at once (503), not queued; the permit rides in
        // the response body, so a streamed run holds it until its stream ends.
        .layer(shed::ShedLayer::new(limits.max_in_flight))
        // A backstop for a handler that never answers. It ends at the response head, so it
        // never cuts an SSE body short: a committed run is bounded by the bridge's own timeout.
        .layer(TimeoutLayer::new(limits.request_timeout))
        // Bodies over the limit are refused by `Content-Length` at once, else as they are read.
        .layer(size::BodyLimitLayer::new(limits.max_body_bytes))
        .service(inner)
}
