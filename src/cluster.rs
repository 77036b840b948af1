//! The internal listener (`cluster.listen`): where other replicas forward the retries whose
//! parked call this replica holds (design.md, "Park mode"). It answers one path, and only a
//! request whose replica MAC verifies under this replica's key ring
//! ([`crate::mrtr::replica_auth`]); a bad, missing or stale MAC is refused with 401 and
//! counted, the reason going to the log only. What a verified request gets is the bridge's
//! answer in the wire format of [`crate::bridge::wire`]: the reply, the fixed error object the
//! owner would send its own client, or "not held" (the forwarding replica then replays).
//! It never runs a call that is not parked here: that is the forwarding replica's to replay.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use tower::Service;

use crate::bridge::wire::{WireReply, WireRequest, RESUME_PATH};
use crate::bridge::ParkOutcome;
use crate::defaults;
use crate::front::FrontState;
use crate::metrics::Metrics;
use crate::mrtr::{replica_auth, LiveRing};

/// What the internal listener needs.
pub struct Cluster {
    front: Arc<FrontState>,
    keys: Arc<LiveRing>,
    metrics: Arc<Metrics>,
}

// === impl Cluster ===

impl Cluster {
    /// Serves forwarded retries with the bridge of `front`.
    pub fn new(front: Arc<FrontState>, keys: Arc<LiveRing>, metrics: Arc<Metrics>) -> Arc<Self> {
        Arc::new(Self { front, keys, metrics })
    }

    /// The listener's service.
    pub fn service(
        self: &Arc<Self>,
    ) -> impl Service<
        Request<Incoming>,
        Response = Response<Full<Bytes>>,
        Error = Infallible,
        Future: Send + 'static,
    > + Clone
           + Send
           + 'static {
        let cluster = self.clone();
        tower::service_fn(move |req: Request<Incoming>| {
            let cluster = cluster.clone();
            async move { Ok(cluster.handle(req).await) }
        })
    }

    async fn handle(&self, req: Request<Incoming>) -> Response<Full<Bytes>> {
        if req.uri().path() != RESUME_PATH {
            return plain(StatusCode::NOT_FOUND, "not found");
        }
        if req.method() != Method::POST {
            return plain(StatusCode::METHOD_NOT_ALLOWED, "use POST");
        }
        let mac = req.headers().get(replica_auth::HEADER).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let body = match Limited::new(req.into_body(), defaults::MAX_FORWARD_BYTES).collect().await {
            Ok(body) => body.to_bytes(),
            Err(_) => return plain(StatusCode::PAYLOAD_TOO_LARGE, "body too large or unreadable"),
        };
        let skew = defaults::FORWARD_SKEW.as_secs();
        if let Err(e) = replica_auth::verify(&self.keys.current(), mac.as_deref(), &body, unix_now(), skew) {
            tracing::warn!(reason = e.reason(), error = %e, "refused a forwarded retry");
            self.metrics.park_outcomes.with_label_values(&[ParkOutcome::Unauthenticated.label()]).inc();
            return plain(StatusCode::UNAUTHORIZED, "unauthenticated");
        }
        let Some(request) =
            serde_json::from_slice::<WireRequest>(&body).ok().and_then(WireRequest::into_request)
        else {
            return plain(StatusCode::BAD_REQUEST, "not a forwarded retry");
        };
        let answer = match self.front.bridge.run_forwarded(request).await {
            Ok(Some(reply)) => WireReply::from(reply),
            Ok(None) => WireReply::NotHeld,
            Err(e) => {
                tracing::info!(error = %e.detail(), "a forwarded retry failed");
                WireReply::Error { error: e.to_object(), status: e.status().as_u16() }
            }
        };
        match serde_json::to_vec(&answer) {
            Ok(json) => respond(StatusCode::OK, "application/json", json.into()),
            Err(_) => plain(StatusCode::INTERNAL_SERVER_ERROR, "internal error"),
        }
    }
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn plain(status: StatusCode, text: &'static str) -> Response<Full<Bytes>> {
    respond(status, "text/plain", Bytes::from_static(text.as_bytes()))
}

fn respond(status: StatusCode, content_type: &'static str, body: Bytes) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, http::HeaderValue::from_static(content_type));
    response
}
