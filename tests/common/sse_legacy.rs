//! A scripted legacy server on the deprecated HTTP+SSE transport, as 2024-11-05 servers speak
//! it: `GET /sse` opens a stream whose first event is `endpoint` (`/messages?session=N`), and
//! every `POST /messages?session=N` is answered 202 while its reply goes out on stream N.
//!
//! Its tools: `echo`; `stream` (names the stream that served it); `greet` (asks an elicitation,
//! then greets with the answer); `drop` (ends its stream instead of answering); `meta` (the
//! call's `params._meta` as JSON text); and the demo's park-mode tools, with the same texts:
//! `place_order` (places an order, counted, then asks for a delivery note, then one progress
//! notification when the call has a progress token), `confirm_twice` (a name, then a
//! confirmation) and `flaky_question` (a question that changes on every run). It counts orders,
//! tool calls and `notifications/cancelled`, and a cancelled call's questions are forgotten, so
//! an answer that comes later finishes nothing. It declares `resources.subscribe`, and answers each
//! `resources/subscribe` of a session after sending it `notifications/resources/updated` for
//! every URI that session held before. A POST calling `hold_post` (not listed) is never
//! answered, and counted while its sender keeps it open. Which protocol version it answers,
//! and where its endpoint points, are the test's choice.
//!
//! It also sends events of a type of their own (`ping`), which a client must ignore: one
//! before each stream's `endpoint` (whose data is a path that does not exist), and one before
//! each `echo` result (whose data is the same response with another text). A client that took
//! any event for the endpoint, or for a message, would fail there.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body::Frame;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use mrtr_gateway::app::Gateway;
use mrtr_gateway::config::Config;
use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::{eventually, Client, Setup, TestResult};

type Body = BoxBody<Bytes, Infallible>;
type StreamTx = mpsc::Sender<Bytes>;

/// Where the server says its endpoint is, from its address and the stream's number.
pub(crate) type EndpointFn = fn(SocketAddr, u64) -> String;

/// The endpoint a well-behaved server announces: a relative URL on its own origin.
pub(crate) fn same_origin(_: SocketAddr, session: u64) -> String {
    format!("/messages?session={session}")
}

/// A running scripted server; stopped on drop.
pub(crate) struct SseLegacy {
    pub(crate) addr: SocketAddr,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

struct Shared {
    addr: SocketAddr,
    version: &'static str,
    endpoint: EndpointFn,
    next_stream: AtomicU64,
    streams: Mutex<HashMap<u64, StreamTx>>,
    /// Elicitations asked and not answered: their id and what the call does with the answer.
    asked: Mutex<HashMap<String, Waiting>>,
    /// Orders placed, tool calls by name, and cancellations received (with the last one's
    /// reason).
    orders: AtomicU64,
    calls: Mutex<HashMap<String, u64>>,
    cancellations: AtomicU64,
    cancel_reason: Mutex<String>,
    rolls: AtomicU64,
    /// Numbers the questions asked, so no two share an id.
    asks: AtomicU64,
    /// Resource URIs each session subscribed to.
    subscribed: Mutex<HashMap<u64, Vec<String>>>,
    /// POSTs of `hold_post` calls held unanswered now (their client has not gone).
    held_posts: Arc<AtomicU64>,
}

/// Counts a held POST until its client goes and hyper drops the handler.
struct Held(Arc<AtomicU64>);

impl Drop for Held {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A call waiting for the answer to its question, and what it does with it.
#[derive(Clone)]
struct Waiting {
    call: Value,
    step: Step,
    /// The call's progress token, if any.
    progress: Option<Value>,
}

#[derive(Clone)]
enum Step {
    Greet,
    Order(u64),
    ConfirmName,
    ConfirmOk(String),
    Flaky(u64),
}

// === impl SseLegacy ===

impl SseLegacy {
    /// Binds `127.0.0.1:0`, answers `initialize` with `version`, and announces `endpoint`.
    pub(crate) async fn spawn(version: &'static str, endpoint: EndpointFn) -> TestResult<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            addr,
            version,
            endpoint,
            next_stream: AtomicU64::new(1),
            streams: Mutex::new(HashMap::new()),
            asked: Mutex::new(HashMap::new()),
            subscribed: Mutex::new(HashMap::new()),
            orders: AtomicU64::new(0),
            calls: Mutex::new(HashMap::new()),
            cancellations: AtomicU64::new(0),
            cancel_reason: Mutex::new(String::new()),
            rolls: AtomicU64::new(0),
            asks: AtomicU64::new(0),
            held_posts: Arc::new(AtomicU64::new(0)),
        });
        let task = tokio::spawn(accept(listener, shared.clone()));
        Ok(Self { addr, shared, task })
    }

    /// POSTs of `hold_post` calls held now: their sender has not closed them.
    pub(crate) fn held_posts(&self) -> u64 {
        self.shared.held_posts.load(Ordering::SeqCst)
    }

    /// Event streams open now: their client has not closed them.
    pub(crate) fn open_streams(&self) -> usize {
        self.shared.streams.lock().values().filter(|tx| !tx.is_closed()).count()
    }

    /// Event streams opened so far.
    pub(crate) fn streams_opened(&self) -> u64 {
        self.shared.next_stream.load(Ordering::Relaxed) - 1
    }

    /// Orders `place_order` placed.
    pub(crate) fn orders(&self) -> u64 {
        self.shared.orders.load(Ordering::Relaxed)
    }

    /// `tools/call` requests for `tool`.
    pub(crate) fn tool_calls(&self, tool: &str) -> u64 {
        self.shared.calls.lock().get(tool).copied().unwrap_or(0)
    }

    /// `notifications/cancelled` received.
    pub(crate) fn cancellations(&self) -> u64 {
        self.shared.cancellations.load(Ordering::Relaxed)
    }

    /// The reason the last `notifications/cancelled` gave ("" before any, or without one).
    pub(crate) fn cancel_reason(&self) -> String {
        self.shared.cancel_reason.lock().clone()
    }

    /// The event stream's URL.
    pub(crate) fn url(&self) -> String {
        format!("http://{}/sse", self.addr)
    }

    /// A gateway in front of this server, ready once its first session is open; and a client.
    pub(crate) async fn gateway(&self) -> TestResult<(Gateway, Client)> {
        let (gateway, client) = self.gateway_unready().await?;
        eventually("the SSE upstream to answer initialize", || gateway.ready.is_ready()).await?;
        Ok((gateway, client))
    }

    /// A gateway in front of this server, not waiting for it to be ready.
    pub(crate) async fn gateway_unready(&self) -> TestResult<(Gateway, Client)> {
        self.gateway_timing_out_after(3000).await
    }

    /// A gateway in front of this server whose upstream requests time out after `ms`.
    pub(crate) async fn gateway_timing_out_after(&self, ms: u64) -> TestResult<(Gateway, Client)> {
        let setup = Setup::new().set("upstream", &format!("request_timeout_ms = {ms}"));
        let gateway = Gateway::start(Config::from_toml(&setup.toml_with("sse_url", &self.url()))?).await?;
        let client = Client::new(gateway.url("/mcp"));
        Ok((gateway, client))
    }
}

impl Drop for SseLegacy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn accept(listener: TcpListener, shared: Arc<Shared>) {
    while let Ok((stream, _)) = listener.accept().await {
        let shared = shared.clone();
        let service = service_fn(move |req| handle(req, shared.clone()));
        tokio::spawn(async move {
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn handle(req: Request<Incoming>, shared: Arc<Shared>) -> Result<Response<Body>, Infallible> {
    let session = req.uri().query().and_then(|q| q.strip_prefix("session=")).and_then(|n| n.parse().ok());
    Ok(match (req.method(), req.uri().path(), session) {
        (&Method::GET, "/sse", _) => open_stream(&shared),
        (&Method::POST, "/messages", Some(n)) => {
            let tx = shared.streams.lock().get(&n).cloned();
            match (tx, req.into_body().collect().await) {
                (Some(tx), Ok(body)) => {
                    let message: Value = serde_json::from_slice(&body.to_bytes()).unwrap_or_default();
                    if message["params"]["name"] == "hold_post" {
                        shared.held_posts.fetch_add(1, Ordering::SeqCst);
                        let _held = Held(shared.held_posts.clone());
                        std::future::pending::<()>().await;
                    }
                    on_message(&shared, n, &tx, &message).await;
                    status(StatusCode::ACCEPTED, "Accepted")
                }
                (None, _) => status(StatusCode::NOT_FOUND, "no such session"),
                (_, Err(_)) => status(StatusCode::BAD_REQUEST, ""),
            }
        }
        _ => status(StatusCode::NOT_FOUND, ""),
    })
}

/// A new stream, numbered, whose first events are a `ping` and the one naming its endpoint.
fn open_stream(shared: &Shared) -> Response<Body> {
    let n = shared.next_stream.fetch_add(1, Ordering::Relaxed);
    let (tx, rx) = mpsc::channel::<Bytes>(16);
    let endpoint = (shared.endpoint)(shared.addr, n);
    let _ = tx.try_send(Bytes::from_static(b"event: ping\ndata: /no-such-endpoint\n\n"));
    let _ = tx.try_send(Bytes::from(format!("event: endpoint\ndata: {endpoint}\n\n")));
    shared.streams.lock().insert(n, tx);
    let frames = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|chunk| (Ok::<_, Infallible>(Frame::data(chunk)), rx))
    });
    let mut response = Response::new(BodyExt::boxed(StreamBody::new(frames)));
    response
        .headers_mut()
        .insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("text/event-stream"));
    response
}

/// Acts on one client message; replies go out on the session's stream.
async fn on_message(shared: &Shared, n: u64, tx: &StreamTx, message: &Value) {
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    match message.get("method").and_then(Value::as_str) {
        Some("initialize") => {
            let result = json!({
                "protocolVersion": shared.version,
                "capabilities": {"tools": {}, "resources": {"subscribe": true}},
                "serverInfo": {"name": "sse-fixture", "version": "1"},
            });
            send(tx, json!({"jsonrpc": "2.0", "id": id, "result": result})).await;
        }
        Some("tools/list") => {
            let tools: Vec<Value> =
                ["echo", "stream", "greet", "drop", "meta", "place_order", "confirm_twice", "flaky_question"]
                    .iter()
                    .map(|name| json!({"name": name, "inputSchema": {"type": "object"}}))
                    .collect();
            send(tx, json!({"jsonrpc": "2.0", "id": id, "result": {"tools": tools}})).await;
        }
        Some("tools/call") => call_tool(shared, n, tx, id, &message["params"]).await,
        Some("resources/subscribe") => {
            let uri = message["params"]["uri"].as_str().unwrap_or_default().to_owned();
            let held = shared.subscribed.lock().get(&n).cloned().unwrap_or_default();
            for old in held {
                send(tx, json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": old}}))
                    .await;
            }
            shared.subscribed.lock().entry(n).or_default().push(uri);
            send(tx, json!({"jsonrpc": "2.0", "id": id, "result": {}})).await;
        }
        Some("resources/unsubscribe") => send(tx, json!({"jsonrpc": "2.0", "id": id, "result": {}})).await,
        Some("notifications/cancelled") => {
            shared.cancellations.fetch_add(1, Ordering::Relaxed);
            *shared.cancel_reason.lock() = message["params"]["reason"].as_str().unwrap_or("").to_owned();
            let call = message["params"]["requestId"].clone();
            shared.asked.lock().retain(|_, waiting| waiting.call != call);
        }
        Some(_) => {}
        None => answered(shared, n, tx, message).await,
    }
}

async fn call_tool(shared: &Shared, n: u64, tx: &StreamTx, id: Value, params: &Value) {
    let tool = params["name"].as_str().unwrap_or_default();
    *shared.calls.lock().entry(tool.to_owned()).or_default() += 1;
    let progress = params["_meta"].get("progressToken").cloned();
    let waiting = |step| Waiting { call: id.clone(), step, progress: progress.clone() };
    let text = match tool {
        "echo" => format!("Echo: {}", params["arguments"]["message"].as_str().unwrap_or_default()),
        "stream" => format!("stream {n}"),
        "meta" => params["_meta"].to_string(),
        "greet" => {
            return ask(shared, n, tx, waiting(Step::Greet), "What is your name?", "name", "string").await
        }
        "place_order" => {
            let order = shared.orders.fetch_add(1, Ordering::Relaxed) + 1;
            let message = "Order placed. Any delivery note?";
            return ask(shared, n, tx, waiting(Step::Order(order)), message, "note", "string").await;
        }
        "confirm_twice" => {
            return ask(shared, n, tx, waiting(Step::ConfirmName), "What is your name?", "name", "string")
                .await
        }
        "flaky_question" => {
            let roll = shared.rolls.fetch_add(1, Ordering::Relaxed) + 1;
            let message = format!("The server rolled {roll}. What do you say?");
            return ask(shared, n, tx, waiting(Step::Flaky(roll)), &message, "answer", "string").await;
        }
        "drop" => {
            shared.streams.lock().remove(&n);
            return;
        }
        other => format!("no tool {other}"),
    };
    if tool == "echo" {
        let decoy = tool_result(id.clone(), "an event that is not a message");
        let _ = tx.send(Bytes::from(format!("event: ping\ndata: {decoy}\n\n"))).await;
    }
    send(tx, tool_result(id, &text)).await;
}

/// Asks a one-field form on stream `n` for the waiting call.
async fn ask(
    shared: &Shared,
    n: u64,
    tx: &StreamTx,
    waiting: Waiting,
    message: &str,
    field: &str,
    kind: &str,
) {
    let ask = format!("ask-{n}-{}", shared.asks.fetch_add(1, Ordering::Relaxed));
    shared.asked.lock().insert(ask.clone(), waiting);
    let params = json!({
        "message": message,
        "requestedSchema": {"type": "object", "properties": {field: {"type": kind}}, "required": [field]},
    });
    send(tx, json!({"jsonrpc": "2.0", "id": ask, "method": "elicitation/create", "params": params})).await;
}

/// The client's answer to an elicitation: the waiting call goes on.
async fn answered(shared: &Shared, n: u64, tx: &StreamTx, message: &Value) {
    let id = message["id"].as_str().unwrap_or_default();
    let Some(waiting) = shared.asked.lock().remove(id) else { return };
    let action = message["result"]["action"].as_str().unwrap_or("?").to_owned();
    let content = &message["result"]["content"];
    let field = |name: &str| content[name].as_str().unwrap_or_default().to_owned();
    let text = match waiting.step.clone() {
        Step::Greet => format!("Hello, {}!", content["name"].as_str().unwrap_or("nobody")),
        Step::Order(order) => {
            if let Some(token) = &waiting.progress {
                let params =
                    json!({"progressToken": token, "progress": 1, "total": 1, "message": "step 1 of 1"});
                send(tx, json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": params}))
                    .await;
            }
            format!("Order #{order} placed ({action}) {}", field("note")).trim_end().to_owned()
        }
        Step::ConfirmName => {
            let name = field("name");
            let next = Waiting { step: Step::ConfirmOk(name.clone()), ..waiting };
            let message = format!("Please confirm: is your name {name}?");
            return ask(shared, n, tx, next, &message, "ok", "boolean").await;
        }
        Step::ConfirmOk(name) => format!("Confirmed {name}: {}", content["ok"].as_bool().unwrap_or(false)),
        Step::Flaky(roll) => format!("Roll {roll}: {action} {}", field("answer")).trim_end().to_owned(),
    };
    send(tx, tool_result(waiting.call, &text)).await;
}

fn tool_result(id: Value, text: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": text}]}})
}

async fn send(tx: &StreamTx, message: Value) {
    let _ = tx.send(Bytes::from(format!("event: message\ndata: {message}\n\n"))).await;
}

fn status(code: StatusCode, text: &'static str) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *response.status_mut() = code;
    response
}
