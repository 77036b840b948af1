//! A scripted legacy server on the deprecated HTTP+SSE transport, as 2024-11-05 servers speak
//! it: `GET /sse` opens a stream whose first event is `endpoint` (`/messages?session=N`), and
//! every `POST /messages?session=N` is answered 202 while its reply goes out on stream N.
//!
//! Its tools: `echo`; `stream` (names the stream that served it); `greet` (asks an elicitation,
//! then greets with the answer); `drop` (ends its stream instead of answering); `meta` (the
//! call's `params._meta` as JSON text). It declares `resources.subscribe`, and answers each
//! `resources/subscribe` of a session after sending it `notifications/resources/updated` for
//! every URI that session held before. Which protocol
//! version it answers, and where its endpoint points, are the test's choice.

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
    task: JoinHandle<()>,
}

struct Shared {
    addr: SocketAddr,
    version: &'static str,
    endpoint: EndpointFn,
    next_stream: AtomicU64,
    streams: Mutex<HashMap<u64, StreamTx>>,
    /// Elicitations asked and not answered: their id and the call waiting for them.
    asked: Mutex<HashMap<String, Value>>,
    /// Resource URIs each session subscribed to.
    subscribed: Mutex<HashMap<u64, Vec<String>>>,
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
        });
        let task = tokio::spawn(accept(listener, shared));
        Ok(Self { addr, task })
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
        let setup = Setup::new().set("upstream", "request_timeout_ms = 3000");
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

/// A new stream, numbered, whose first event names its endpoint.
fn open_stream(shared: &Shared) -> Response<Body> {
    let n = shared.next_stream.fetch_add(1, Ordering::Relaxed);
    let (tx, rx) = mpsc::channel::<Bytes>(16);
    let endpoint = (shared.endpoint)(shared.addr, n);
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
            let tools: Vec<Value> = ["echo", "stream", "greet", "drop", "meta"]
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
        Some(_) => {}
        None => answered(shared, tx, message).await,
    }
}

async fn call_tool(shared: &Shared, n: u64, tx: &StreamTx, id: Value, params: &Value) {
    let text = match params["name"].as_str().unwrap_or_default() {
        "echo" => format!("Echo: {}", params["arguments"]["message"].as_str().unwrap_or_default()),
        "stream" => format!("stream {n}"),
        "meta" => params["_meta"].to_string(),
        "greet" => {
            let ask = format!("ask-{n}-{id}");
            shared.asked.lock().insert(ask.clone(), id);
            let params = json!({
                "message": "What is your name?",
                "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
            });
            send(tx, json!({"jsonrpc": "2.0", "id": ask, "method": "elicitation/create", "params": params}))
                .await;
            return;
        }
        "drop" => {
            shared.streams.lock().remove(&n);
            return;
        }
        other => format!("no tool {other}"),
    };
    send(tx, tool_result(id, &text)).await;
}

/// The client's answer to an elicitation: the waiting call gets its greeting.
async fn answered(shared: &Shared, tx: &StreamTx, message: &Value) {
    let ask = message["id"].as_str().unwrap_or_default();
    let Some(call) = shared.asked.lock().remove(ask) else { return };
    let name = message["result"]["content"]["name"].as_str().unwrap_or("nobody");
    send(tx, tool_result(call, &format!("Hello, {name}!"))).await;
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
