//! The internal listener (`cluster.listen`): where other replicas forward the retries whose
//! parked call this replica holds (docs/src/park-mode.md, "Across replicas"). It answers one
//! path, and only a request whose replica MAC verifies under this replica's key ring
//! ([`crate::mrtr::replica_auth`]); a bad, missing or stale MAC is refused with 401 and
//! counted, the reason going to the log only. What a verified request gets is the bridge's
//! answer in the wire format of [`super::wire`]: the reply, the fixed error object the
//! owner would send its own client, or "not held" (the forwarding replica then replays).
//! It never runs a call that is not parked here: that is the forwarding replica's to replay.
//! Every verified retry is answered at once with a response head and then a stream of lines
//! (`stream_answer`): the reply is the last line, and a retry whose client asked for progress
//! or logs gets them as lines before it, each sent as the call produces it, so they reach the
//! client as they would on this replica. The early head is how the forwarding replica knows
//! this one took the retry ([`super::Forwarder`] bounds the wait for it, and replays
//! when it does not come): a retry waiting in a full listener's backlog is not a slow call.
//! A second path takes the task requests other replicas forward to this one, the owner of the
//! task (`super::tasks`), under the same MAC.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use serde_json::Value;
use tokio::sync::mpsc;
use tower::Service;

use super::tasks::TASKS_PATH;
use super::wire::{WireFrame, WireReply, WireRequest, RESUME_PATH};
use crate::body::FrontBody;
use crate::bridge::{Bridge, MrtrRequest, ParkOutcome};
use crate::defaults;
use crate::error::FrontError;
use crate::front::{layered, StackLimits};
use crate::metrics::Metrics;
use crate::mrtr::{replica_auth, LiveRing};
use crate::tasks::Tasks;

/// What the internal listener needs.
pub struct Cluster {
    bridge: Arc<Bridge>,
    keys: Arc<LiveRing>,
    metrics: Arc<Metrics>,
    /// The task bridge that serves forwarded task requests; `None` when tasks are off.
    tasks: Option<Arc<Tasks>>,
}

// === impl Cluster ===

impl Cluster {
    /// Serves forwarded retries with `bridge`, the one the front runs its rounds with.
    pub fn new(bridge: Arc<Bridge>, keys: Arc<LiveRing>, metrics: Arc<Metrics>) -> Arc<Self> {
        Self::with_tasks(bridge, keys, metrics, None)
    }

    /// Serves forwarded retries with `bridge`, and forwarded task requests with `tasks`.
    pub fn with_tasks(
        bridge: Arc<Bridge>,
        keys: Arc<LiveRing>,
        metrics: Arc<Metrics>,
        tasks: Option<Arc<Tasks>>,
    ) -> Arc<Self> {
        Arc::new(Self { bridge, keys, metrics, tasks })
    }

    /// The listener's service, inside the same stack layers as the front (request id, span,
    /// recovery, load shedding, the head timeout, the body limit): `limits` are the front's,
    /// the body limit the forwarded-retry bound.
    pub fn service(
        self: &Arc<Self>,
        limits: StackLimits,
    ) -> impl Service<
        Request<Incoming>,
        Response = Response<impl http_body::Body<Data = Bytes, Error = Infallible> + Send + 'static>,
        Error = Infallible,
        Future: Send + 'static,
    > + Clone
           + Send
           + 'static {
        let cluster = self.clone();
        let inner = tower::service_fn(move |req: Request<Limited<Incoming>>| {
            let cluster = cluster.clone();
            async move { Ok::<_, Infallible>(cluster.handle(req).await) }
        });
        let limits = StackLimits { max_body_bytes: defaults::MAX_FORWARD_BYTES, ..limits };
        layered(inner, limits, self.metrics.clone())
    }

    async fn handle(&self, req: Request<Limited<Incoming>>) -> Response<FrontBody> {
        let for_tasks = match req.uri().path() {
            RESUME_PATH => false,
            TASKS_PATH => true,
            _ => return plain(StatusCode::NOT_FOUND, "not found"),
        };
        if req.method() != Method::POST {
            return plain(StatusCode::METHOD_NOT_ALLOWED, "use POST");
        }
        let mac = req.headers().get(replica_auth::HEADER).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let body = match req.into_body().collect().await {
            Ok(body) => body.to_bytes(),
            Err(_) => return plain(StatusCode::PAYLOAD_TOO_LARGE, "body too large or unreadable"),
        };
        let skew = defaults::FORWARD_SKEW.as_secs();
        if let Err(e) = replica_auth::verify(&self.keys.current(), mac.as_deref(), &body, unix_now(), skew) {
            tracing::warn!(reason = e.reason(), error = %e, for_tasks, "refused a forwarded request");
            match for_tasks {
                true => self.metrics.tasks.forward("unauthenticated"),
                false => self
                    .metrics
                    .park_outcomes
                    .with_label_values(&[ParkOutcome::Unauthenticated.label()])
                    .inc(),
            }
            return plain(StatusCode::UNAUTHORIZED, "unauthenticated");
        }
        if for_tasks {
            return super::tasks::serve(self.tasks.as_ref(), &body).await;
        }
        let Ok(wire) = serde_json::from_slice::<WireRequest>(&body) else {
            return plain(StatusCode::BAD_REQUEST, "not a forwarded retry");
        };
        let (tx, notes) = mpsc::channel(defaults::NOTES_QUEUE);
        let wanted = wire.wants_notes().then(|| wire.notes(tx));
        let Some(request) = wire.into_request() else {
            return plain(StatusCode::BAD_REQUEST, "not a forwarded retry");
        };
        let (lines, body) = mpsc::channel(defaults::NOTES_QUEUE);
        tokio::spawn(stream_answer(self.bridge.clone(), request, wanted, notes, lines));
        let mut response = Response::new(FrontBody::Stream(body));
        response.headers_mut().insert(CONTENT_TYPE, http::HeaderValue::from_static("application/x-ndjson"));
        response
    }
}

/// Runs the retry and writes its notifications, then its reply, one line each. The call runs
/// to its end even if the forwarding replica goes: a parked call is answered at most once.
async fn stream_answer(
    bridge: Arc<Bridge>,
    request: MrtrRequest,
    wanted: Option<crate::bridge::Notes>,
    mut notes: mpsc::Receiver<Value>,
    lines: mpsc::Sender<Bytes>,
) {
    let run = bridge.run_forwarded(request, wanted);
    tokio::pin!(run);
    let reply = loop {
        tokio::select! {
            // Notes first: each one queued before the reply goes out before it.
            biased;
            Some(note) = notes.recv() => send_line(&lines, &WireFrame::Note(note)).await,
            reply = &mut run => break reply,
        }
    };
    while let Ok(note) = notes.try_recv() {
        send_line(&lines, &WireFrame::Note(note)).await;
    }
    send_line(&lines, &WireFrame::Reply(wire_reply(reply))).await;
}

async fn send_line(lines: &mpsc::Sender<Bytes>, frame: &WireFrame) {
    let Ok(line) = frame.to_line() else { return };
    // A forwarding replica that went away reads nothing more; the run still ends here.
    let _ = lines.send(line.into()).await;
}

/// The bridge's answer in the wire format.
fn wire_reply(served: Result<Option<crate::bridge::Reply>, FrontError>) -> WireReply {
    match served {
        Ok(Some(reply)) => WireReply::from(reply),
        Ok(None) => WireReply::NotHeld,
        Err(e) => {
            tracing::info!(error = %e.detail(), "a forwarded retry failed");
            WireReply::Error { error: e.to_object(), status: e.status().as_u16() }
        }
    }
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn plain(status: StatusCode, text: &'static str) -> Response<FrontBody> {
    respond(status, "text/plain", Bytes::from_static(text.as_bytes()))
}

fn respond(status: StatusCode, content_type: &'static str, body: Bytes) -> Response<FrontBody> {
    let mut response = Response::new(FrontBody::full(body));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, http::HeaderValue::from_static(content_type));
    response
}
