//! The admin listener: `/metrics` (Prometheus text), `/admin/tools` (the per-tool migration
//! report as JSON, see [`crate::tool_report`]), `/healthz` (the process serves) and `/readyz` (the upstream has answered an `initialize`, no shutdown has begun and, with
//! single-use states, the state store answers its pings, so traffic can be sent here). It outlives the front's drain, so probes see `/readyz` fail first. It runs on
//! its own port so that metrics and probes never share limits or auth with client traffic.

use std::convert::Infallible;
use std::future::{ready, Ready};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use tower::Service;

use crate::metrics::Metrics;
pub use crate::readiness::{Readiness, ReadyCheck};

/// A source of the current upstream pool size, read at scrape time.
pub type PoolSize = Arc<dyn Fn() -> usize + Send + Sync>;

/// The admin request handler.
#[derive(Clone)]
pub struct Admin {
    metrics: Arc<Metrics>,
    ready: Readiness,
    pool_size: PoolSize,
}

// === impl Admin ===

impl Admin {
    pub fn new(metrics: Arc<Metrics>, ready: Readiness, pool_size: PoolSize) -> Self {
        Self { metrics, ready, pool_size }
    }

    fn respond(&self, method: &Method, path: &str) -> Response<Full<Bytes>> {
        if method != Method::GET {
            return text(StatusCode::METHOD_NOT_ALLOWED, "use GET\n");
        }
        match path {
            "/metrics" => {
                self.metrics.pool_sessions.set((self.pool_size)() as i64);
                let mut r = Response::new(Full::new(Bytes::from(self.metrics.render())));
                r.headers_mut()
                    .insert(CONTENT_TYPE, http::HeaderValue::from_static("text/plain; version=0.0.4"));
                r
            }
            "/admin/tools" => self.tool_report(),
            "/healthz" => text(StatusCode::OK, "ok\n"),
            "/readyz" if self.ready.is_ready() => text(StatusCode::OK, "ready\n"),
            "/readyz" if self.ready.is_draining() => text(StatusCode::SERVICE_UNAVAILABLE, "shutting down\n"),
            "/readyz" if !self.ready.extra_holds() => text(
                StatusCode::SERVICE_UNAVAILABLE,
                "token keys not loaded (the key source has not answered)\n",
            ),
            "/readyz" if self.ready.is_state_store_down() => {
                text(StatusCode::SERVICE_UNAVAILABLE, "state store unavailable\n")
            }
            "/readyz" => text(StatusCode::SERVICE_UNAVAILABLE, "upstream has not answered initialize yet\n"),
            _ => text(StatusCode::NOT_FOUND, "not found\n"),
        }
    }

    fn tool_report(&self) -> Response<Full<Bytes>> {
        match self.metrics.tools.to_json() {
            Ok(json) => {
                let mut r = Response::new(Full::new(Bytes::from(json)));
                r.headers_mut().insert(CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
                r
            }
            Err(e) => {
                tracing::warn!(error = %e, "the tool report could not be serialised");
                text(StatusCode::INTERNAL_SERVER_ERROR, "tool report unavailable\n")
            }
        }
    }
}

impl<B> Service<Request<B>> for Admin {
    type Response = Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = Ready<Result<Response<Full<Bytes>>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        ready(Ok(self.respond(req.method(), req.uri().path())))
    }
}

fn text(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, http::HeaderValue::from_static("text/plain"));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_silent_state_store_withdraws_readiness_until_it_answers() {
        let ready = Readiness::default();
        let admin = Admin::new(Arc::new(Metrics::new().unwrap()), ready.clone(), Arc::new(|| 0));
        ready.set_ready();
        ready.set_state_store(false);
        let r = admin.respond(&Method::GET, "/readyz");
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        ready.set_state_store(true);
        assert_eq!(admin.respond(&Method::GET, "/readyz").status(), StatusCode::OK);
    }

    #[test]
    fn routes() {
        let ready = Readiness::default();
        let admin = Admin::new(Arc::new(Metrics::new().unwrap()), ready.clone(), Arc::new(|| 3));
        assert_eq!(admin.respond(&Method::GET, "/healthz").status(), StatusCode::OK);
        assert_eq!(admin.respond(&Method::GET, "/readyz").status(), StatusCode::SERVICE_UNAVAILABLE);
        ready.set_ready();
        assert_eq!(admin.respond(&Method::GET, "/readyz").status(), StatusCode::OK);
        ready.set_unready();
        ready.set_ready();
        assert_eq!(admin.respond(&Method::GET, "/readyz").status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(admin.respond(&Method::GET, "/healthz").status(), StatusCode::OK);
        assert_eq!(admin.respond(&Method::GET, "/metrics").status(), StatusCode::OK);
        assert_eq!(admin.metrics.pool_sessions.get(), 3);
        assert_eq!(admin.respond(&Method::POST, "/metrics").status(), StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(admin.respond(&Method::GET, "/nope").status(), StatusCode::NOT_FOUND);
        let tools = admin.respond(&Method::GET, "/admin/tools");
        assert_eq!(tools.status(), StatusCode::OK);
        assert_eq!(tools.headers()[CONTENT_TYPE], "application/json");
    }
}
