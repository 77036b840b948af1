//! Request ids and the request span. An id is the client's own `x-request-id` when it sent
//! one; otherwise a random per-process prefix and a counter, unique across replicas without a
//! random draw per request. The span carries the id, so every line logged while serving the
//! request (the request line included) names it; headers are recorded only at debug level,
//! after the stack has marked secrets sensitive.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use http::{HeaderName, HeaderValue, Request};
use tower_http::request_id::{MakeRequestId, RequestId};
use tower_http::trace::MakeSpan;
use tracing::{Level, Span};

/// The request id header, read and echoed.
pub(super) const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Makes `<prefix>-<counter>` ids, in hex.
#[derive(Debug, Clone)]
pub(super) struct NextId {
    prefix: u32,
    counter: Arc<AtomicU64>,
}

/// Makes the request span.
#[derive(Debug, Clone, Copy)]
pub(super) struct FrontSpan;

// === impl NextId ===

impl NextId {
    pub(super) fn new() -> Self {
        Self { prefix: rand::random(), counter: Arc::new(AtomicU64::new(1)) }
    }
}

impl MakeRequestId for NextId {
    fn make_request_id<B>(&mut self, _: &Request<B>) -> Option<RequestId> {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let id = HeaderValue::try_from(format!("{:08x}-{n:x}", self.prefix)).ok()?;
        Some(RequestId::new(id))
    }
}

// === impl FrontSpan ===

impl<B> MakeSpan<B> for FrontSpan {
    fn make_span(&mut self, req: &Request<B>) -> Span {
        let id = req.headers().get(X_REQUEST_ID).and_then(|v| v.to_str().ok()).unwrap_or_default();
        let span = tracing::info_span!("front", request_id = id, headers = tracing::field::Empty);
        if !span.is_disabled() && tracing::enabled!(Level::DEBUG) {
            span.record("headers", tracing::field::debug(req.headers()));
        }
        span
    }
}
