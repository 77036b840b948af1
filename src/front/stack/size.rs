//! The request body size limit. A `Content-Length` over the limit is refused before anything
//! else runs; any other body is wrapped so that reading past the limit fails, which the handler
//! turns into the same 413. The refusal is a `FrontError`, so it is answered and counted like
//! every other front error.

use std::future::{ready, Ready};
use std::task::{Context, Poll};

use futures_util::future::{Either, ErrInto, TryFutureExt};
use http::header::CONTENT_LENGTH;
use http::Request;
use http_body_util::Limited;
use tower::{BoxError, Layer, Service};

use crate::error::FrontError;

/// Wraps a service in [`BodyLimit`].
#[derive(Debug, Clone, Copy)]
pub(super) struct BodyLimitLayer {
    limit: usize,
}

/// Limits the request body to `limit` bytes.
#[derive(Debug, Clone)]
pub(super) struct BodyLimit<S> {
    inner: S,
    limit: usize,
}

// === impl BodyLimitLayer ===

impl BodyLimitLayer {
    pub(super) fn new(limit: usize) -> Self {
        Self { limit }
    }
}

impl<S> Layer<S> for BodyLimitLayer {
    type Service = BodyLimit<S>;

    fn layer(&self, inner: S) -> BodyLimit<S> {
        BodyLimit { inner, limit: self.limit }
    }
}

// === impl BodyLimit ===

impl<S, B> Service<Request<B>> for BodyLimit<S>
where
    S: Service<Request<Limited<B>>>,
    S::Error: Into<BoxError>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Either<Ready<Result<S::Response, BoxError>>, ErrInto<S::Future, BoxError>>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        if declared_length(&req).is_some_and(|n| n > self.limit as u64) {
            let refused = FrontError::PayloadTooLarge { limit: self.limit };
            return Either::Left(ready(Err(refused.into())));
        }
        let limit = self.limit;
        Either::Right(self.inner.call(req.map(|body| Limited::new(body, limit))).err_into())
    }
}

fn declared_length<B>(req: &Request<B>) -> Option<u64> {
    req.headers().get(CONTENT_LENGTH)?.to_str().ok()?.parse().ok()
}
