//! Legacy sessions on a stdio or HTTP+SSE upstream, driven through the upstream seam
//! ([`crate::upstream::Session`]): the gateway is the Streamable HTTP server the client talks
//! to, and each client session gets an upstream session of its own (a child process, an SSE
//! stream), never a pooled one, ended when the client deletes it or it idles out.
//!
//! The client's `initialize` opens the upstream session with the client's own protocol
//! version, capabilities and `clientInfo`, and the upstream's answer is returned as is. Each
//! request the client POSTs becomes one upstream call whose events (server requests,
//! notifications, the response) are written to that POST's SSE stream as they come; the
//! client's answers, POSTed back, go to the upstream by their ids. Server requests that no
//! call carries (a child's stdout ties nothing to a call) go to the session's oldest open call,
//! as the seam attributes them.
//!
//! The client's GET stream carries what no open call can take, as a Streamable HTTP server
//! sends it there: notifications, and server requests made while no call is open (the client
//! POSTs its answers as for any other). Without a GET stream open, such a request is refused
//! upstream, as the seam refuses any request nobody can answer; when the client closes the
//! stream, a request still queued on it is refused the same way. One GET stream at a time: a
//! new one takes over from the old. Its events carry no ids, so there is no resumption
//! (`Last-Event-ID` opens a fresh stream).
//!
//! A JSON-RPC batch (a POSTed array, which 2025-03-26 clients may send) is taken apart: its
//! notifications and answers go upstream one by one, and the events and responses of its
//! requests share one SSE stream, which ends after the last response.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{CACHE_CONTROL, CONTENT_TYPE};
use http::request::Parts;
use http::{HeaderValue, Method, Response, StatusCode};
use parking_lot::Mutex;
use prometheus::IntGauge;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use tokio::sync::{mpsc, watch};

use super::error::{LegacyError, TRANSPORT_ERROR};
use super::lists::{ListOf, Lists};
use super::table::{Active, Entry};
use crate::body::{sse_event, FrontBody};
use crate::mrtr::LegacyVersion;
use crate::outbound::Bound;
use crate::protocol::jsonrpc::{
    error_bytes, notification_bytes, request_bytes, result_bytes, ErrorObject, Notification, Outcome, Request,
};
use crate::protocol::{methods, Envelope, RequestId};
use crate::upstream::{Call, Connector, EventTx, Session, UpstreamError, UpstreamEvent, UpstreamSettings};

/// Frames buffered towards the client before the upstream call waits.
const FRAMES: usize = 16;
const INITIALIZED: &str = "notifications/initialized";

/// Opens a session of its own for each legacy client.
#[derive(Clone)]
pub(super) struct SeamConnector {
    settings: Arc<UpstreamSettings>,
    /// The upstream's connection bound, for an HTTP+SSE upstream (a stdio one has none).
    bound: Option<Bound>,
}

/// One client's upstream session.
pub(super) struct SeamSession {
    session: Session,
    /// The client's id of each open call → the upstream's, to forward the client's cancels.
    calls: Arc<Mutex<HashMap<RequestId, RequestId>>>,
}

// === impl SeamConnector ===

impl SeamConnector {
    pub(super) fn new(settings: Arc<UpstreamSettings>, bound: Option<Bound>) -> Self {
        Self { settings, bound }
    }

    /// Opens an upstream session for the client's `initialize` (`body`) and returns it with the
    /// response to that request.
    pub(super) async fn open(&self, body: &[u8]) -> Result<(SeamSession, Response<FrontBody>), LegacyError> {
        let Ok(Envelope::Request(req)) = Envelope::parse(body) else {
            return Err(LegacyError::MissingSession);
        };
        let params = req.params.unwrap_or_else(|| json!({}));
        let settings = Arc::new(client_settings(&self.settings, &params));
        let connector = match &self.bound {
            Some(bound) => Connector::with_bound(settings, bound.clone())?,
            None => Connector::new(settings, unused_gauge()?)?,
        };
        let capabilities = params.get("capabilities").cloned().unwrap_or_else(|| json!({}));
        let session = connector.connect(&capabilities).await?;
        let bytes = result_bytes(&req.id, &session.initialize_result().raw);
        let seam = SeamSession { session, calls: Arc::default() };
        Ok((seam, json_response(StatusCode::OK, bytes)))
    }
}

/// The upstream settings with the client's own version and `clientInfo`, so that the server
/// negotiates with what the client offered.
fn client_settings(base: &UpstreamSettings, params: &Value) -> UpstreamSettings {
    let mut settings = base.clone();
    if let Some(v) = params.get("protocolVersion").and_then(Value::as_str).and_then(LegacyVersion::parse) {
        settings.preferred_version = v;
    }
    let info = params.get("clientInfo");
    if let Some(name) = info.and_then(|i| i.get("name")).and_then(Value::as_str) {
        settings.client_name = name.to_owned();
    }
    if let Some(version) = info.and_then(|i| i.get("version")).and_then(Value::as_str) {
        settings.client_version = version.to_owned();
    }
    settings
}

// === impl SeamSession ===

impl SeamSession {
    /// One POST or GET of the session.
    pub(super) async fn handle(
        &self,
        entry: &Arc<Entry>,
        parts: &Parts,
        body: Bytes,
        lists: Option<Lists>,
    ) -> Result<Response<FrontBody>, LegacyError> {
        if parts.method == Method::GET {
            return Ok(self.get_stream(entry));
        }
        if parts.method != Method::POST {
            return Err(LegacyError::MethodNotAllowed(parts.method.to_string()));
        }
        let _active = entry.begin();
        if body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') {
            return self.batch(entry, &body, lists.as_ref()).await;
        }
        match Envelope::parse(&body).map_err(|e| LegacyError::Invalid(e.to_string()))? {
            Envelope::Request(req) => Ok(self.call(entry, req, lists.as_ref())),
            other => self.deliver(other).await.map(|()| accepted()),
        }
    }

    /// A notification or an answer, sent upstream.
    async fn deliver(&self, envelope: Envelope) -> Result<(), LegacyError> {
        match envelope {
            Envelope::Notification(n) => self.notify(n).await,
            Envelope::Response(r) => {
                let id = r.id.ok_or_else(|| LegacyError::Invalid("a response needs an id".into()))?;
                let outcome = match r.outcome {
                    Outcome::Result(raw) => Ok(serde_json::from_str(raw.get()).unwrap_or(Value::Null)),
                    Outcome::Error(e) => Err(e),
                };
                Ok(self.session.respond(&id, outcome).await?)
            }
            Envelope::Request(_) => Err(LegacyError::Invalid("a request is not an answer".into())),
        }
    }

    /// A batch: its notifications and answers upstream in order, its requests as calls whose
    /// events share one stream (or 202 when it holds no request).
    async fn batch(
        &self,
        entry: &Arc<Entry>,
        body: &[u8],
        lists: Option<&Lists>,
    ) -> Result<Response<FrontBody>, LegacyError> {
        let items: Vec<&RawValue> =
            serde_json::from_slice(body).map_err(|e| LegacyError::Invalid(e.to_string()))?;
        if items.is_empty() {
            return Err(LegacyError::Invalid("an empty batch".into()));
        }
        let mut requests = Vec::new();
        for item in items {
            match Envelope::parse_str(item.get()).map_err(|e| LegacyError::Invalid(e.to_string()))? {
                Envelope::Request(req) => requests.push(req),
                other => self.deliver(other).await?,
            }
        }
        if requests.is_empty() {
            return Ok(accepted());
        }
        let (tx, rx) = mpsc::channel(FRAMES);
        for req in requests {
            let list = lists.and_then(|l| l.of_request(&req.id));
            self.start(entry, req, tx.clone(), list);
        }
        Ok(sse_response(rx))
    }

    /// The GET stream: what no call can take, until the client closes it or the session ends.
    fn get_stream(&self, entry: &Arc<Entry>) -> Response<FrontBody> {
        let (mine, events) = self.session.open_standalone(FRAMES);
        let (tx, rx) = mpsc::channel(FRAMES);
        let run = GetRun { session: self.session.clone(), mine, tx, _active: entry.begin() };
        tokio::spawn(run.run(events, entry.ended()));
        sse_response(rx)
    }

    /// False once the process exited or the stream broke.
    pub(super) fn is_healthy(&self) -> bool {
        self.session.is_healthy()
    }

    /// Ends the upstream session (stops the process, closes the stream).
    pub(super) async fn close(&self) {
        if let Err(e) = self.session.close().await {
            tracing::debug!(error = %e, "closing a legacy upstream session");
        }
    }

    /// Starts the call and streams its events to the client.
    fn call(&self, entry: &Arc<Entry>, req: Request, lists: Option<&Lists>) -> Response<FrontBody> {
        let (tx, rx) = mpsc::channel(FRAMES);
        let list = lists.and_then(|l| l.of_request(&req.id));
        self.start(entry, req, tx, list);
        sse_response(rx)
    }

    /// Starts the call; its events go to `tx` until its response, which `list` filters when
    /// the call is a list request of a restricted client.
    fn start(&self, entry: &Arc<Entry>, req: Request, tx: mpsc::Sender<Bytes>, list: Option<ListOf>) {
        let call = self.session.call(&req.method, req.params);
        self.calls.lock().insert(req.id.clone(), call.id().clone());
        let run = CallRun {
            session: self.session.clone(),
            calls: self.calls.clone(),
            client_id: req.id,
            tx,
            list,
            _active: entry.begin(),
        };
        tokio::spawn(run.run(call, entry.ended()));
    }

    async fn notify(&self, n: Notification) -> Result<(), LegacyError> {
        match n.method.as_str() {
            // The seam sent it when it opened the session.
            INITIALIZED => Ok(()),
            methods::CANCELLED => {
                let client_id = n.params.as_ref().and_then(|p| p.get("requestId")).cloned();
                let client_id = client_id.and_then(|id| serde_json::from_value::<RequestId>(id).ok());
                let upstream = client_id.and_then(|id| self.calls.lock().get(&id).cloned());
                let Some(upstream) = upstream else { return Ok(()) };
                let mut params = n.params.unwrap_or_else(|| json!({}));
                params["requestId"] = json!(upstream);
                Ok(self.session.notify(methods::CANCELLED, Some(params)).await?)
            }
            _ => Ok(self.session.notify(&n.method, n.params).await?),
        }
    }
}

/// One relayed call: its events, as SSE frames, until its response.
struct CallRun {
    session: Session,
    calls: Arc<Mutex<HashMap<RequestId, RequestId>>>,
    client_id: RequestId,
    tx: mpsc::Sender<Bytes>,
    /// The filter of a restricted client's list result.
    list: Option<ListOf>,
    _active: Active,
}

impl CallRun {
    async fn run(self, mut call: Call, mut ended: watch::Receiver<bool>) {
        let client_gone = loop {
            // Biased: the client leaving or the session ending wins over a ready event.
            let event = tokio::select! {
                biased;
                _ = self.tx.closed() => break true,
                _ = ended.wait_for(|e| *e) => break false,
                event = call.next_event() => event,
            };
            let (frame, last) = self.frame(event);
            if let Some(frame) = frame {
                if self.tx.send(sse_event(&frame)).await.is_err() {
                    break true;
                }
            }
            if last {
                break false;
            }
        };
        self.calls.lock().remove(&self.client_id);
        if client_gone {
            let _ = self.session.cancel(call, "the client closed its stream").await;
        }
    }

    /// The SSE payload of one event, and whether the call is over.
    fn frame(
        &self,
        event: Result<Option<UpstreamEvent>, crate::upstream::UpstreamError>,
    ) -> (Option<Vec<u8>>, bool) {
        match event {
            Ok(Some(UpstreamEvent::Request { id, method, params })) => {
                (Some(request_bytes(&id, &method, params.as_ref())), false)
            }
            Ok(Some(UpstreamEvent::Notification { method, params })) => {
                (Some(notification_bytes(&method, params.as_ref())), false)
            }
            Ok(Some(UpstreamEvent::Response(Outcome::Result(raw)))) => {
                let raw = match &self.list {
                    Some(list) => list.apply(raw),
                    None => raw,
                };
                (Some(result_bytes(&self.client_id, &raw)), true)
            }
            Ok(Some(UpstreamEvent::Response(Outcome::Error(e)))) => {
                (Some(error_bytes(Some(&self.client_id), &e)), true)
            }
            Ok(None) => (None, true),
            Err(e) => {
                let e = LegacyError::from(e);
                tracing::warn!(error = %e.detail(), "legacy upstream call failed");
                (Some(error_bytes(Some(&self.client_id), &e.error_object())), true)
            }
        }
    }
}

/// One GET stream: the session's messages no call took, as SSE frames.
struct GetRun {
    session: Session,
    /// The stream's queue as the session knows it, to end it there.
    mine: EventTx,
    tx: mpsc::Sender<Bytes>,
    _active: Active,
}

impl GetRun {
    async fn run(
        self,
        mut events: mpsc::Receiver<Result<UpstreamEvent, UpstreamError>>,
        mut ended: watch::Receiver<bool>,
    ) {
        loop {
            // Biased: the client leaving or the session ending wins over a ready event.
            let event = tokio::select! {
                biased;
                _ = self.tx.closed() => break,
                _ = ended.wait_for(|e| *e) => break,
                event = events.recv() => event,
            };
            let (frame, asked) = match event {
                Some(Ok(UpstreamEvent::Request { id, method, params })) => {
                    (request_bytes(&id, &method, params.as_ref()), Some(id))
                }
                Some(Ok(UpstreamEvent::Notification { method, params })) => {
                    (notification_bytes(&method, params.as_ref()), None)
                }
                Some(Ok(UpstreamEvent::Response(_))) => continue,
                Some(Err(_)) | None => break,
            };
            if self.tx.send(sse_event(&frame)).await.is_err() {
                // The client left as it was being asked: the question never reached it.
                if let Some(id) = asked {
                    self.refuse(&id).await;
                }
                break;
            }
        }
        // Nothing more comes here; what is queued still gets an answer if it needs one.
        self.session.close_standalone(&self.mine);
        events.close();
        while let Ok(event) = events.try_recv() {
            if let Ok(UpstreamEvent::Request { id, .. }) = event {
                self.refuse(&id).await;
            }
        }
    }

    /// Answers the server's request `id` with an error: no client will answer it here.
    async fn refuse(&self, id: &RequestId) {
        let message = "the client's event stream closed".to_owned();
        let error = ErrorObject { code: TRANSPORT_ERROR, message, data: None };
        let _ = self.session.respond(id, Err(error)).await;
    }
}

fn sse_response(rx: mpsc::Receiver<Bytes>) -> Response<FrontBody> {
    let mut resp = Response::new(FrontBody::Stream(rx));
    resp.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    resp.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    resp
}

fn json_response(status: StatusCode, bytes: Vec<u8>) -> Response<FrontBody> {
    let mut r = Response::new(FrontBody::full(bytes));
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

fn accepted() -> Response<FrontBody> {
    let mut r = Response::new(FrontBody::empty());
    *r.status_mut() = StatusCode::ACCEPTED;
    r
}

/// The gauge a stdio session's connector takes and never moves (it opens no connection).
fn unused_gauge() -> Result<IntGauge, LegacyError> {
    IntGauge::new("legacy_seam_connections", "connections of one legacy session")
        .map_err(|e| LegacyError::Settings(e.to_string()))
}
