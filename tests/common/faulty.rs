//! A scriptable faulty legacy server, for the fault matrix. It speaks 2025-11-25 Streamable
//! HTTP well enough to be a healthy upstream (an `initialize` that opens a numbered session,
//! `notifications/initialized`, DELETE, no standalone GET stream (405, which a test can hold
//! back until it lets it go), and resumption of a parked POST stream with GET +
//! `Last-Event-ID`); each tool name is one way of misbehaving (see [`tools`]). Its lists come
//! in the shapes a list can take: `tools/list` as a JSON body (no tools), `prompts/list` as an
//! SSE stream (a notification, then the response) and `resources/list` as a priming event
//! whose stream ends there, the response coming on the stream resumed with GET +
//! `Last-Event-ID`; each of the last two lists a `public` and a `secret` item. A test can also
//! expire every session (404 from then on) and kill the server outright, its listener and every
//! open connection dropped, then bring it back on its port.
//!
//! It counts what proves cleanup: sessions opened and deleted, the session that served each call,
//! cancellations, answers, resumptions, and the connections and response streams open right now;
//! and it keeps the headers of every request, so a test can tell what reached the upstream.
//! Every response says `Connection: close`, so once the gateway is idle no connection to this
//! server is open at all and a leaked one shows as a count above zero. Every script ends when its
//! response body is dropped, when it is cancelled, or after [`SCRIPT_LIFETIME`], so a broken test
//! cannot leak a task past that.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header::{CONNECTION, CONTENT_TYPE};
use http::{HeaderValue, Method, Request, Response, StatusCode};
use http_body::{Body as HttpBody, Frame};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use mrtr_gateway::protocol::jsonrpc::{Outcome, Request as RpcRequest};
use mrtr_gateway::protocol::{Envelope, RequestId};
use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, Notify};
use tokio::task::{JoinHandle, JoinSet};

use super::TestResult;

/// Longest a script or a hung handler lives, so a broken test cannot leak it past this.
const SCRIPT_LIFETIME: Duration = Duration::from_secs(10);
/// The `retry` (ms) a priming event asks for before the client resumes.
const PRIMING_RETRY_MS: u64 = 20;
/// Planted in every faulty payload and error body: it must never reach the gateway's client.
pub(crate) const UPSTREAM_SECRET: &str = "upstream-internal-detail-7f3a";
/// One SSE event this large is past the gateway's bound on an upstream event (4 MiB).
const OVERSIZED_BYTES: usize = 4 * 1024 * 1024 + 64 * 1024;
/// The id of a response to a request the gateway never sent.
const UNKNOWN_ID: i64 = 987_654;
/// The id both requests of `duplicate_id` carry.
const DUPLICATE_ID: i64 = 7;
const EVENTS_QUEUE: usize = 16;

/// The tools, one per behaviour. Every other name gets a JSON-RPC error.
pub(crate) mod tools {
    /// A JSON result naming the session that served it: `ok from s<n>`.
    pub(crate) const OK: &str = "ok";
    /// One form question (a name) on the POST stream, then `Hello, <name>`.
    pub(crate) const ASK: &str = "ask";
    /// Two questions in turn (a name, then a confirmation), then `Confirmed <name>: <bool>`.
    pub(crate) const ASK_TWICE: &str = "ask_twice";
    /// One notification, then the connection is reset (RST) mid-stream.
    pub(crate) const RESET: &str = "reset";
    /// A priming event (id, empty data, `retry`) and a clean close; `ask` continues on the
    /// stream resumed with GET + `Last-Event-ID`.
    pub(crate) const PRIME_THEN_ASK: &str = "prime_then_ask";
    /// A priming event and a clean close, after which the server forgets the session: the
    /// resumption gets 404.
    pub(crate) const PRIME_THEN_EXPIRE: &str = "prime_then_expire";
    /// An SSE event whose data is not JSON.
    pub(crate) const MALFORMED_SSE: &str = "malformed_sse";
    /// An `application/json` body that is not JSON.
    pub(crate) const MALFORMED_JSON: &str = "malformed_json";
    /// One SSE event larger than the gateway accepts.
    pub(crate) const OVERSIZED: &str = "oversized";
    /// A response to an id the gateway never used, then the real response.
    pub(crate) const UNKNOWN_ID: &str = "unknown_id";
    /// Only a response to an id the gateway never used, then the stream ends.
    pub(crate) const ONLY_UNKNOWN_ID: &str = "only_unknown_id";
    /// Two different questions with the same JSON-RPC id.
    pub(crate) const DUPLICATE_ID: &str = "duplicate_id";
    /// HTTP 500 with an error page of the server's own.
    pub(crate) const HTTP_500: &str = "http_500";
    /// Never answers: not even a response head.
    pub(crate) const HANG: &str = "hang";
    /// An SSE stream with one progress notification that then waits for a cancel.
    pub(crate) const WAIT: &str = "wait";
    /// Waits until the test opens the gate ([`super::FaultyLegacy::open_gate`]), then answers
    /// `released from s<n>` in JSON.
    pub(crate) const GATED: &str = "gated";
    /// A JSON result whose text is the call's `_meta`, as received (`null` without one).
    pub(crate) const META: &str = "meta";
}

type Body = BoxBody<Bytes, Infallible>;
type Waiters = HashMap<(String, i64), Vec<oneshot::Sender<Value>>>;

/// What the server saw, and what is open right now.
#[derive(Default)]
pub(crate) struct FaultStats {
    initializes: AtomicU64,
    deletes: AtomicU64,
    cancellations: AtomicU64,
    answers: AtomicU64,
    refusals: AtomicU64,
    calls: Mutex<Vec<(String, String)>>,
    resumes: Mutex<Vec<String>>,
    open_connections: Arc<AtomicUsize>,
    open_streams: Arc<AtomicUsize>,
    /// The headers of every request received, in order.
    headers: Mutex<Vec<http::HeaderMap>>,
    /// `gated` calls waiting for the gate right now.
    gated: Arc<AtomicUsize>,
    /// The `protocolVersion` of every `initialize`, in order.
    proposed: Mutex<Vec<String>>,
    /// Fresh GETs held back right now ([`FaultyLegacy::hold_streams`]).
    held_streams: Arc<AtomicUsize>,
    /// In order: `call <tool>` for each `tools/call` received, `GET answered` for each fresh GET.
    order: Mutex<Vec<String>>,
}

/// The server's state, shared by every connection; it outlives a kill.
#[derive(Default)]
struct Shared {
    stats: FaultStats,
    next_session: AtomicU64,
    /// Live session ids; any other id gets 404.
    sessions: Mutex<Vec<String>>,
    /// Sessions still to be forgotten as soon as `initialize` opens them.
    forget_next: AtomicU64,
    /// The rest of a primed POST stream, by its priming event id.
    parked: Mutex<HashMap<String, mpsc::Receiver<Bytes>>>,
    /// Server requests waiting for their answer, by (session, id).
    waiting: Mutex<Waiters>,
    /// The cancel signal of each running call, by (session, call id).
    cancels: Mutex<HashMap<(String, i64), Arc<Notify>>>,
    /// Whether `gated` calls may answer, and the signal that they may.
    gate_open: std::sync::atomic::AtomicBool,
    gate: Notify,
    /// Whether a fresh GET waits before its answer, and the signal that it may answer.
    hold_streams: std::sync::atomic::AtomicBool,
    streams: Notify,
    /// The version `initialize` answers; `None`: a supported proposed one, else 2025-11-25.
    version: Mutex<Option<&'static str>>,
}

/// A running faulty server; killed on drop.
pub(crate) struct FaultyLegacy {
    pub(crate) addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

/// Counts one open thing while alive.
struct Open(Arc<AtomicUsize>);

/// A streamed response body that counts as an open stream until hyper drops it.
struct StreamBody {
    rx: mpsc::Receiver<Bytes>,
    _open: Open,
}

/// Asks the connection task to reset its connection.
#[derive(Default)]
struct ConnControl {
    reset: Notify,
}

/// What a script needs: its session, its call, where to write events, how it is cancelled.
struct Script {
    shared: Arc<Shared>,
    session: String,
    call: i64,
    tx: mpsc::Sender<Bytes>,
    /// Event ids of a resumable stream: `<prefix>-<n>`.
    event_prefix: Option<String>,
    next_event: u64,
    cancel: Arc<Notify>,
}

// === impl FaultStats ===

impl FaultStats {
    /// Sessions opened with `initialize`.
    pub(crate) fn initializes(&self) -> u64 {
        self.initializes.load(Ordering::SeqCst)
    }

    /// DELETEs of a live session.
    pub(crate) fn deletes(&self) -> u64 {
        self.deletes.load(Ordering::SeqCst)
    }

    /// `notifications/cancelled` received.
    pub(crate) fn cancellations(&self) -> u64 {
        self.cancellations.load(Ordering::SeqCst)
    }

    /// Results answering this server's own requests.
    pub(crate) fn answers(&self) -> u64 {
        self.answers.load(Ordering::SeqCst)
    }

    /// Errors answering this server's own requests (the gateway refusing them).
    pub(crate) fn refusals(&self) -> u64 {
        self.refusals.load(Ordering::SeqCst)
    }

    /// `tools/call` requests of `tool` received.
    pub(crate) fn calls_of(&self, tool: &str) -> usize {
        self.calls.lock().iter().filter(|(_, t)| t == tool).count()
    }

    /// The session of the latest `tools/call` of `tool`.
    pub(crate) fn last_session_of(&self, tool: &str) -> Option<String> {
        self.calls.lock().iter().rev().find(|(_, t)| t == tool).map(|(s, _)| s.clone())
    }

    /// `Last-Event-ID` of every GET that resumed a stream.
    pub(crate) fn resumes(&self) -> Vec<String> {
        self.resumes.lock().clone()
    }

    /// TCP connections open right now.
    pub(crate) fn open_connections(&self) -> usize {
        self.open_connections.load(Ordering::SeqCst)
    }

    /// Responses still being produced: streamed bodies not yet dropped, and hung handlers.
    pub(crate) fn open_streams(&self) -> usize {
        self.open_streams.load(Ordering::SeqCst)
    }

    /// The values of header `name` on every request that carried it.
    pub(crate) fn header_values(&self, name: &str) -> Vec<String> {
        let headers = self.headers.lock();
        let values = headers.iter().flat_map(|h| h.get_all(name).iter());
        values.map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()).collect()
    }

    /// The number of requests seen so far and the values of header `name` on them, read in one
    /// snapshot (a request arriving between two separate reads cannot split them).
    pub(crate) fn requests_and_header(&self, name: &str) -> (usize, Vec<String>) {
        let headers = self.headers.lock();
        let values = headers.iter().flat_map(|h| h.get_all(name).iter());
        (headers.len(), values.map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()).collect())
    }

    /// The headers of every request received after the first `from`, in order.
    pub(crate) fn headers_since(&self, from: usize) -> Vec<http::HeaderMap> {
        self.headers.lock().iter().skip(from).cloned().collect()
    }

    /// `gated` calls waiting for the gate right now.
    pub(crate) fn gated(&self) -> usize {
        self.gated.load(Ordering::SeqCst)
    }

    /// The `protocolVersion` every `initialize` proposed.
    pub(crate) fn proposed_versions(&self) -> Vec<String> {
        self.proposed.lock().clone()
    }

    /// Fresh GETs held back right now.
    pub(crate) fn held_streams(&self) -> usize {
        self.held_streams.load(Ordering::SeqCst)
    }

    /// What reached the server, in order: `call <tool>` and `GET answered`.
    pub(crate) fn order(&self) -> Vec<String> {
        self.order.lock().clone()
    }
}

// === impl FaultyLegacy ===

impl FaultyLegacy {
    /// Binds `127.0.0.1:0` and serves until killed or dropped.
    pub(crate) async fn spawn() -> TestResult<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::default());
        let accept = Some(tokio::spawn(accept(listener, shared.clone())));
        Ok(Self { addr, shared, accept })
    }

    /// The MCP endpoint.
    pub(crate) fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    pub(crate) fn stats(&self) -> &FaultStats {
        &self.shared.stats
    }

    /// Answers 404 to every session opened so far, as a server does whose sessions expired.
    pub(crate) fn expire_sessions(&self) {
        self.shared.sessions.lock().clear();
    }

    /// Answers every later `initialize` with `version`, whatever was proposed.
    pub(crate) fn answer_version(&self, version: &'static str) {
        *self.shared.version.lock() = Some(version);
    }

    /// Lets every `gated` call, waiting or still to come, answer.
    pub(crate) fn open_gate(&self) {
        self.shared.gate_open.store(true, Ordering::SeqCst);
        self.shared.gate.notify_waiters();
    }

    /// Holds back the answer to every fresh GET (no `Last-Event-ID`), waiting or still to come,
    /// until [`FaultyLegacy::release_streams`] (or [`SCRIPT_LIFETIME`]).
    pub(crate) fn hold_streams(&self) {
        self.shared.hold_streams.store(true, Ordering::SeqCst);
    }

    /// Lets every fresh GET held back answer, and those to come answer at once.
    pub(crate) fn release_streams(&self) {
        self.shared.hold_streams.store(false, Ordering::SeqCst);
        self.shared.streams.notify_waiters();
    }

    /// Forgets each of the next `n` sessions right after `initialize` opens it: every request
    /// of such a session gets 404, as from a server that keeps losing its sessions.
    pub(crate) fn forget_next_sessions(&self, n: u64) {
        self.shared.forget_next.store(n, Ordering::SeqCst);
    }

    /// Kills the server: the listener and every open connection are dropped at once, and its
    /// sessions are forgotten, as when the process dies. The port is refused until [`revive`].
    ///
    /// [`revive`]: Self::revive
    pub(crate) fn kill(&mut self) {
        if let Some(accept) = self.accept.take() {
            // The accept task owns the connection tasks: aborting it drops them all.
            accept.abort();
        }
        self.shared.sessions.lock().clear();
        self.shared.parked.lock().clear();
        self.shared.waiting.lock().clear();
    }

    /// Serves again on the same port, with no sessions (a restarted process).
    pub(crate) async fn revive(&mut self) -> TestResult {
        let listener = super::bounded("the killed server's port to be free again", async {
            loop {
                match TcpListener::bind(self.addr).await {
                    Ok(listener) => return listener,
                    Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                }
            }
        })
        .await?;
        self.accept = Some(tokio::spawn(accept(listener, self.shared.clone())));
        Ok(())
    }
}

impl Drop for FaultyLegacy {
    fn drop(&mut self) {
        self.kill();
    }
}

// === impl Open ===

impl Open {
    fn new(count: &Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        Self(count.clone())
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl HttpBody for StreamBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.get_mut().rx.poll_recv(cx).map(|chunk| chunk.map(|b| Ok(Frame::data(b))))
    }
}

/// Accepts connections; each runs in a task of `conns`, so aborting this task drops them all.
async fn accept(listener: TcpListener, shared: Arc<Shared>) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { return };
                conns.spawn(connection(stream, shared.clone()));
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

/// Serves one connection until it ends or a script asks for a reset.
async fn connection(stream: TcpStream, shared: Arc<Shared>) {
    let _open = Open::new(&shared.stats.open_connections);
    // A second handle on the socket, to reset it: hyper owns the first.
    let Ok(std) = stream.into_std() else { return };
    let Ok(peer) = std.try_clone().and_then(TcpStream::from_std) else { return };
    let Ok(stream) = TcpStream::from_std(std) else { return };
    let control = Arc::new(ConnControl::default());
    let service = {
        let (shared, control) = (shared.clone(), control.clone());
        service_fn(move |req| handle(req, shared.clone(), control.clone()))
    };
    let serve = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service);
    tokio::select! {
        biased;
        () = control.reset.notified() => {
            // Zero linger: closing the last handle sends RST instead of FIN.
            let _ = peer.set_zero_linger();
        }
        _ = serve => {}
    }
}

async fn handle(
    req: Request<Incoming>,
    shared: Arc<Shared>,
    control: Arc<ConnControl>,
) -> Result<Response<Body>, Infallible> {
    shared.stats.headers.lock().push(req.headers().clone());
    let session = req.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let method = req.method().clone();
    let last_event_id = req.headers().get("last-event-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let bytes = match req.into_body().collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => return Ok(status(StatusCode::BAD_REQUEST)),
    };
    let live = session.as_ref().is_some_and(|s| shared.sessions.lock().contains(s));
    Ok(match (method, session) {
        (Method::POST, session) => post(&shared, &control, session, live, &bytes).await,
        (Method::GET, Some(_)) if !live => expired(),
        (Method::GET, Some(_)) => match last_event_id {
            None => fresh_get(&shared).await,
            Some(last) => resume(&shared, last),
        },
        (Method::DELETE, Some(session)) if live => {
            shared.sessions.lock().retain(|s| *s != session);
            shared.stats.deletes.fetch_add(1, Ordering::SeqCst);
            status(StatusCode::OK)
        }
        (Method::DELETE, Some(_)) => expired(),
        _ => status(StatusCode::METHOD_NOT_ALLOWED),
    })
}

async fn post(
    shared: &Arc<Shared>,
    control: &Arc<ConnControl>,
    session: Option<String>,
    live: bool,
    bytes: &[u8],
) -> Response<Body> {
    let Ok(envelope) = Envelope::parse(bytes) else { return status(StatusCode::BAD_REQUEST) };
    if let Envelope::Request(r) = &envelope {
        if r.method == "initialize" {
            return initialize(shared, r);
        }
    }
    let Some(session) = session.filter(|_| live) else { return expired() };
    match envelope {
        Envelope::Request(r) => request(shared, control, session, r).await,
        Envelope::Notification(n) => {
            if n.method == "notifications/cancelled" {
                shared.stats.cancellations.fetch_add(1, Ordering::SeqCst);
                let id = n.params.as_ref().and_then(|p| p["requestId"].as_i64()).unwrap_or(-1);
                if let Some(cancel) = shared.cancels.lock().get(&(session, id)) {
                    cancel.notify_one();
                }
            }
            status(StatusCode::ACCEPTED)
        }
        Envelope::Response(r) => {
            let answer = match r.outcome {
                Outcome::Result(raw) => {
                    shared.stats.answers.fetch_add(1, Ordering::SeqCst);
                    serde_json::from_str(raw.get()).unwrap_or(Value::Null)
                }
                Outcome::Error(e) => {
                    shared.stats.refusals.fetch_add(1, Ordering::SeqCst);
                    json!({"error": e.code})
                }
            };
            if let Some(RequestId::Number(id)) = r.id {
                let waiter = shared.waiting.lock().get_mut(&(session, id)).and_then(Vec::pop);
                if let Some(waiter) = waiter {
                    let _ = waiter.send(answer);
                }
            }
            status(StatusCode::ACCEPTED)
        }
    }
}

fn initialize(shared: &Shared, r: &RpcRequest) -> Response<Body> {
    let session = format!("s{}", shared.next_session.fetch_add(1, Ordering::SeqCst) + 1);
    let forget = shared.forget_next.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
    if forget.is_err() {
        shared.sessions.lock().push(session.clone());
    }
    shared.stats.initializes.fetch_add(1, Ordering::SeqCst);
    let proposed = r.params.as_ref().and_then(|p| p["protocolVersion"].as_str()).unwrap_or_default();
    shared.stats.proposed.lock().push(proposed.to_owned());
    let supported = mrtr_gateway::protocol::LEGACY_VERSIONS.iter().find(|v| **v == proposed).copied();
    let version = shared.version.lock().or(supported).unwrap_or("2025-11-25");
    let result = json!({
        "protocolVersion": version,
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "faulty-legacy", "version": "1.0.0"},
    });
    let mut response = json_response(&json!({"jsonrpc": "2.0", "id": r.id, "result": result}));
    if let Ok(value) = HeaderValue::from_str(&session) {
        response.headers_mut().insert("mcp-session-id", value);
    }
    response
}

async fn request(
    shared: &Arc<Shared>,
    control: &Arc<ConnControl>,
    session: String,
    r: RpcRequest,
) -> Response<Body> {
    match r.method.as_str() {
        "tools/list" => json_response(&json!({"jsonrpc": "2.0", "id": r.id, "result": {"tools": []}})),
        "prompts/list" => {
            let prompts = json!({"prompts": [{"name": "public"}, {"name": "secret"}]});
            let note = json!({"jsonrpc": "2.0", "method": "notifications/message",
                "params": {"level": "info", "data": "listing"}});
            let answer = json!({"jsonrpc": "2.0", "id": r.id, "result": prompts});
            let stream =
                format!("event: message\ndata: {note}\n\nid: p-1\nevent: message\ndata: {answer}\n\n");
            with_type(Full::new(Bytes::from(stream)).boxed(), "text/event-stream")
        }
        "resources/list" => {
            let resources = json!({"resources": [{"uri": "faulty://public", "name": "public"},
                {"uri": "faulty://secret", "name": "secret"}]});
            let answer = json!({"jsonrpc": "2.0", "id": r.id, "result": resources});
            let prefix = format!("{session}-list");
            let (tx, rx) = mpsc::channel(1);
            let _ = tx.try_send(Bytes::from(format!("id: {prefix}-1\ndata: {answer}\n\n")));
            shared.parked.lock().insert(format!("{prefix}-0"), rx);
            let priming = format!("id: {prefix}-0\nretry: {PRIMING_RETRY_MS}\ndata:\n\n");
            with_type(Full::new(Bytes::from(priming)).boxed(), "text/event-stream")
        }
        "tools/call" => call(shared, control, session, r).await,
        _ => json_response(&json!({"jsonrpc": "2.0", "id": r.id,
            "error": {"code": -32601, "message": "method not found"}})),
    }
}

/// Starts the script of one `tools/call` and returns its response.
async fn call(
    shared: &Arc<Shared>,
    control: &Arc<ConnControl>,
    session: String,
    r: RpcRequest,
) -> Response<Body> {
    let params = r.params.unwrap_or(Value::Null);
    let tool = params["name"].as_str().unwrap_or_default().to_owned();
    shared.stats.calls.lock().push((session.clone(), tool.clone()));
    shared.stats.order.lock().push(format!("call {tool}"));
    let RequestId::Number(call) = r.id else {
        return json_response(&json!({"jsonrpc": "2.0", "id": r.id,
            "error": {"code": -32600, "message": "this server wants numeric ids"}}));
    };
    let id = json!(call);
    match tool.as_str() {
        tools::OK => json_response(&result(&id, &format!("ok from {session}"))),
        tools::META => json_response(&result(&id, &params["_meta"].to_string())),
        tools::MALFORMED_JSON => {
            let text = format!("{{\"jsonrpc\":\"2.0\",\"id\":{call},\"result\":{UPSTREAM_SECRET}");
            with_type(Full::new(Bytes::from(text)).boxed(), "application/json")
        }
        tools::HANG => hang(shared).await,
        tools::GATED => {
            gated(shared).await;
            json_response(&result(&id, &format!("released from {session}")))
        }
        tools::HTTP_500 => {
            let mut response = Response::new(Full::new(Bytes::from(UPSTREAM_SECRET)).boxed());
            *response.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
            closing(response)
        }
        tools::ASK
        | tools::ASK_TWICE
        | tools::RESET
        | tools::MALFORMED_SSE
        | tools::OVERSIZED
        | tools::UNKNOWN_ID
        | tools::ONLY_UNKNOWN_ID
        | tools::DUPLICATE_ID
        | tools::WAIT => {
            let (script, rx) = Script::new(shared, session, call, None);
            let control = control.clone();
            tokio::spawn(async move {
                let _ = tokio::time::timeout(SCRIPT_LIFETIME, script.run(&tool, control)).await;
            });
            sse_response(shared, rx)
        }
        tools::PRIME_THEN_ASK => {
            let prefix = format!("{session}-{call}");
            let (script, rx) = Script::new(shared, session, call, Some(prefix.clone()));
            shared.parked.lock().insert(format!("{prefix}-0"), rx);
            let control = control.clone();
            tokio::spawn(async move {
                let _ = tokio::time::timeout(SCRIPT_LIFETIME, script.run(tools::ASK, control)).await;
            });
            let priming = format!("id: {prefix}-0\nretry: {PRIMING_RETRY_MS}\ndata:\n\n");
            with_type(Full::new(Bytes::from(priming)).boxed(), "text/event-stream")
        }
        tools::PRIME_THEN_EXPIRE => {
            let priming = format!("id: {session}-{call}-0\nretry: {PRIMING_RETRY_MS}\ndata:\n\n");
            shared.sessions.lock().retain(|s| *s != session);
            with_type(Full::new(Bytes::from(priming)).boxed(), "text/event-stream")
        }
        _ => json_response(&json!({"jsonrpc": "2.0", "id": id,
            "error": {"code": -32602, "message": format!("unknown tool {tool}")}})),
    }
}

/// Never answers: not even a response head. Hyper drops this future when the client closes the
/// connection; until then it counts as an open response.
async fn hang(shared: &Shared) -> Response<Body> {
    let _open = Open::new(&shared.stats.open_streams);
    tokio::time::sleep(SCRIPT_LIFETIME).await;
    status(StatusCode::INTERNAL_SERVER_ERROR)
}

/// Waits for the gate (at most [`SCRIPT_LIFETIME`]), counted as an open response and a gated
/// call meanwhile.
async fn gated(shared: &Shared) {
    let _open = Open::new(&shared.stats.open_streams);
    let _gated = Open::new(&shared.stats.gated);
    released(&shared.gate, || shared.gate_open.load(Ordering::SeqCst)).await;
}

/// Waits until `free` holds, checked again at each `signal` (at most [`SCRIPT_LIFETIME`]).
async fn released(signal: &Notify, free: impl Fn() -> bool) {
    let wait = async {
        loop {
            let signalled = signal.notified();
            if free() {
                return;
            }
            signalled.await;
        }
    };
    let _ = tokio::time::timeout(SCRIPT_LIFETIME, wait).await;
}

/// A GET without `Last-Event-ID`: no standalone stream here (405), once the test lets it answer.
async fn fresh_get(shared: &Shared) -> Response<Body> {
    let _held = Open::new(&shared.stats.held_streams);
    released(&shared.streams, || !shared.hold_streams.load(Ordering::SeqCst)).await;
    shared.stats.order.lock().push("GET answered".into());
    status(StatusCode::METHOD_NOT_ALLOWED)
}

/// GET with `Last-Event-ID`: the rest of a primed stream.
fn resume(shared: &Shared, last: String) -> Response<Body> {
    let Some(rx) = shared.parked.lock().remove(&last) else {
        let mut response = Response::new(Full::new(Bytes::from(UPSTREAM_SECRET)).boxed());
        *response.status_mut() = StatusCode::BAD_REQUEST;
        return closing(response);
    };
    shared.stats.resumes.lock().push(last);
    sse_response(shared, rx)
}

// === impl Script ===

impl Script {
    fn new(
        shared: &Arc<Shared>,
        session: String,
        call: i64,
        event_prefix: Option<String>,
    ) -> (Self, mpsc::Receiver<Bytes>) {
        let (tx, rx) = mpsc::channel(EVENTS_QUEUE);
        let cancel = Arc::new(Notify::new());
        shared.cancels.lock().insert((session.clone(), call), cancel.clone());
        let script = Self { shared: shared.clone(), session, call, tx, event_prefix, next_event: 1, cancel };
        (script, rx)
    }

    async fn run(mut self, tool: &str, control: Arc<ConnControl>) {
        let id = json!(self.call);
        match tool {
            tools::ASK => {
                if let Some(name) = self.ask(1, "What is your name?", "name", "string").await {
                    self.send(&result(&id, &format!("Hello, {}", name.as_str().unwrap_or("?")))).await;
                }
            }
            tools::ASK_TWICE => {
                let Some(name) = self.ask(1, "What is your name?", "name", "string").await else { return };
                let name = name.as_str().unwrap_or("?").to_owned();
                let question = format!("Please confirm: is your name {name}?");
                if let Some(sure) = self.ask(2, &question, "confirm", "boolean").await {
                    self.send(&result(&id, &format!("Confirmed {name}: {sure}"))).await;
                }
            }
            tools::RESET => {
                let note = json!({"jsonrpc": "2.0", "method": "notifications/message",
                    "params": {"level": "info", "data": UPSTREAM_SECRET}});
                if self.send(&note).await {
                    // Let the event reach the gateway first, so the reset is mid-stream; then
                    // keep the stream open, or its clean end could beat the reset.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    control.reset.notify_one();
                    self.wait_for_end().await;
                }
            }
            tools::MALFORMED_SSE => {
                let text = format!("{{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":{UPSTREAM_SECRET}", self.call);
                self.send_data(&text).await;
                self.wait_for_end().await;
            }
            tools::OVERSIZED => self.oversized().await,
            tools::UNKNOWN_ID | tools::ONLY_UNKNOWN_ID => {
                self.send(&result(&json!(UNKNOWN_ID), UPSTREAM_SECRET)).await;
                if tool == tools::UNKNOWN_ID {
                    self.send(&result(&id, &format!("ok from {}", self.session))).await;
                }
            }
            tools::DUPLICATE_ID => {
                for message in ["First question?", "Second question?"] {
                    let ask = form(DUPLICATE_ID, message, "name", "string");
                    if !self.send(&ask).await {
                        return;
                    }
                }
                self.wait_for_end().await;
            }
            tools::WAIT => {
                let note = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                    "params": {"progressToken": 0, "progress": 1, "total": 2}});
                if self.send(&note).await {
                    self.wait_for_end().await;
                }
            }
            _ => {}
        }
    }

    /// Asks one form question and waits for its answer: `content[field]`, or `None` when the call
    /// is cancelled or the stream closed first.
    async fn ask(&mut self, n: i64, message: &str, field: &str, kind: &str) -> Option<Value> {
        let id = self.call * 10 + n;
        let (tx, rx) = oneshot::channel();
        self.shared.waiting.lock().entry((self.session.clone(), id)).or_default().push(tx);
        if !self.send(&form(id, message, field, kind)).await {
            return None;
        }
        let answer = tokio::select! {
            answer = rx => answer.ok(),
            () = self.cancel.notified() => None,
            () = self.tx.closed() => None,
        };
        self.shared.waiting.lock().remove(&(self.session.clone(), id));
        Some(answer?["content"][field].clone())
    }

    /// Waits until the call is cancelled or its stream is dropped.
    async fn wait_for_end(&self) {
        tokio::select! {
            () = self.cancel.notified() => {}
            () = self.tx.closed() => {}
        }
    }

    /// One `data:` line past the bound, written in chunks as a real server would stream it.
    async fn oversized(&mut self) {
        const CHUNK: usize = 64 * 1024;
        if self.tx.send(Bytes::from_static(b"event: message\ndata: ")).await.is_err() {
            return;
        }
        let chunk = Bytes::from(vec![b'x'; CHUNK]);
        for _ in 0..OVERSIZED_BYTES.div_ceil(CHUNK) {
            if self.tx.send(chunk.clone()).await.is_err() {
                return;
            }
        }
        let _ = self.tx.send(Bytes::from_static(b"\n\n")).await;
        self.wait_for_end().await;
    }

    async fn send(&mut self, message: &Value) -> bool {
        self.send_data(&message.to_string()).await
    }

    /// Writes one `message` event (with the next id on a resumable stream); false once the
    /// client dropped the stream.
    async fn send_data(&mut self, data: &str) -> bool {
        let mut event = String::from("event: message\n");
        if let Some(prefix) = &self.event_prefix {
            event.push_str(&format!("id: {prefix}-{}\n", self.next_event));
            self.next_event += 1;
        }
        event.push_str(&format!("data: {data}\n\n"));
        self.tx.send(Bytes::from(event)).await.is_ok()
    }
}

impl Drop for Script {
    fn drop(&mut self) {
        self.shared.cancels.lock().remove(&(self.session.clone(), self.call));
        if let Some(prefix) = &self.event_prefix {
            self.shared.parked.lock().remove(&format!("{prefix}-0"));
        }
    }
}

fn form(id: i64, message: &str, field: &str, kind: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "elicitation/create", "params": {
        "mode": "form",
        "message": message,
        "requestedSchema": {"type": "object", "properties": {field: {"type": kind}}, "required": [field]},
    }})
}

fn result(id: &Value, text: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": text}]}})
}

fn sse_response(shared: &Shared, rx: mpsc::Receiver<Bytes>) -> Response<Body> {
    let body = StreamBody { rx, _open: Open::new(&shared.stats.open_streams) };
    with_type(BodyExt::boxed(body), "text/event-stream")
}

fn json_response(message: &Value) -> Response<Body> {
    with_type(Full::new(Bytes::from(message.to_string())).boxed(), "application/json")
}

fn with_type(body: Body, content_type: &'static str) -> Response<Body> {
    let mut response = Response::new(body);
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    closing(response)
}

/// 404 for a session this server does not know, with a body the gateway must not relay.
fn expired() -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(UPSTREAM_SECRET)).boxed());
    *response.status_mut() = StatusCode::NOT_FOUND;
    closing(response)
}

fn status(code: StatusCode) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::new()).boxed());
    *response.status_mut() = code;
    closing(response)
}

/// Every response ends its connection, so an idle gateway holds none open.
fn closing(mut response: Response<Body>) -> Response<Body> {
    response.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
    response
}
