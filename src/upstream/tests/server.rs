//! A scripted legacy Streamable HTTP server on 127.0.0.1 for the upstream client's tests.
//!
//! Each test decides the exact wire behaviour of the methods it exercises (JSON or SSE bodies,
//! priming events, early closes, 404, broken streams); the lifecycle (`initialize`,
//! notifications, POSTed responses, DELETE) has a default answer. Every request the server sees
//! is recorded and also sent to a channel so a test can wait for, say, the client's response.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

pub(super) const SESSION: &str = "sess-1";

type Body = BoxBody<Bytes, std::io::Error>;
/// A chunk of an SSE body; an `Err` breaks the connection mid-stream.
pub(super) type Chunk = Result<String, std::io::Error>;

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub(super) struct Seen {
    pub(super) method: Method,
    pub(super) headers: HeaderMap,
    pub(super) body: Value,
}

/// A scripted answer.
pub(super) enum Reply {
    Json(Value),
    Sse(mpsc::Receiver<Chunk>),
    Status(u16),
    /// A status with a text body.
    StatusText(u16, &'static str),
    /// Never answer (a hung server).
    Hang,
}

pub(super) type Script = Arc<dyn Fn(&Seen) -> Option<Reply> + Send + Sync>;

pub(super) struct TestServer {
    pub(super) addr: SocketAddr,
    pub(super) seen: Arc<Mutex<Vec<Seen>>>,
    pub(super) seen_rx: mpsc::UnboundedReceiver<Seen>,
    task: tokio::task::JoinHandle<()>,
}

// === impl Seen ===

impl Seen {
    pub(super) fn rpc_method(&self) -> Option<&str> {
        self.body.get("method").and_then(Value::as_str)
    }

    pub(super) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// True for a POSTed JSON-RPC response (result or error) to server request `id`.
    pub(super) fn is_response_to(&self, id: &Value) -> bool {
        self.rpc_method().is_none() && self.body.get("id") == Some(id)
    }
}

// === impl TestServer ===

impl TestServer {
    pub(super) async fn start(script: Script) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (tx, seen_rx) = mpsc::unbounded_channel();
        let state = (script, seen.clone(), tx);
        let task = tokio::spawn(accept(listener, state));
        Self { addr, seen, seen_rx, task }
    }

    pub(super) fn url(&self) -> http::Uri {
        format!("http://{}/mcp", self.addr).parse().unwrap()
    }

    /// Stops accepting and drops every open connection (the process died).
    pub(super) fn kill(&self) {
        self.task.abort();
    }

    /// Waits (bounded) for a seen request matching `pred`.
    pub(super) async fn wait_for(&mut self, pred: impl Fn(&Seen) -> bool) -> Seen {
        let wait = async {
            loop {
                let seen = self.seen_rx.recv().await.expect("server gone");
                if pred(&seen) {
                    return seen;
                }
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(5), wait)
            .await
            .expect("expected request never arrived")
    }

    pub(super) fn count(&self, pred: impl Fn(&Seen) -> bool) -> usize {
        self.seen.lock().iter().filter(|s| pred(s)).count()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

type State = (Script, Arc<Mutex<Vec<Seen>>>, mpsc::UnboundedSender<Seen>);

async fn accept(listener: TcpListener, state: State) {
    // Connections live in this set, so aborting the accept task kills them all.
    let mut conns = JoinSet::new();
    loop {
        let Ok((io, _)) = listener.accept().await else {
            return;
        };
        let state = state.clone();
        let svc = hyper::service::service_fn(move |req| handle(req, state.clone()));
        conns.spawn(async move {
            let io = hyper_util::rt::TokioIo::new(io);
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, svc).await;
        });
    }
}

async fn handle(req: Request<Incoming>, state: State) -> Result<Response<Body>, Infallible> {
    let (parts, body) = req.into_parts();
    let bytes = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let seen = Seen {
        method: parts.method,
        headers: parts.headers,
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    };
    state.1.lock().push(seen.clone());
    let _ = state.2.send(seen.clone());
    let reply = (state.0)(&seen).unwrap_or_else(|| lifecycle(&seen));
    Ok(match reply {
        Reply::Hang => std::future::pending().await,
        reply => render(reply),
    })
}

/// The default answers: initialize, notifications and responses, DELETE; GET → 405.
fn lifecycle(seen: &Seen) -> Reply {
    match (seen.method.clone(), seen.rpc_method()) {
        (Method::POST, Some("initialize")) => Reply::Json(init_result(&seen.body, "2025-11-25")),
        (Method::POST, _) if seen.body.get("id").is_none() || seen.rpc_method().is_none() => {
            Reply::Status(202)
        }
        (Method::DELETE, _) => Reply::Status(200),
        (Method::GET, _) => Reply::Status(405),
        _ => Reply::Status(500),
    }
}

pub(super) fn init_result(request: &Value, version: &str) -> Value {
    json!({"jsonrpc":"2.0","id":request["id"],"result":{
        "protocolVersion": version,
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "scripted", "version": "1"},
    }})
}

fn render(reply: Reply) -> Response<Body> {
    let mut resp = match reply {
        Reply::Json(v) => {
            let mut r = Response::new(full(v.to_string()));
            r.headers_mut().insert("content-type", "application/json".parse().unwrap());
            r
        }
        Reply::Sse(rx) => sse_response(rx),
        Reply::Status(code) => render(Reply::StatusText(code, "")),
        Reply::StatusText(code, text) => {
            let mut r = Response::new(full(text.to_owned()));
            *r.status_mut() = StatusCode::from_u16(code).unwrap();
            r
        }
        Reply::Hang => unreachable!("handled by the caller"),
    };
    resp.headers_mut().insert("mcp-session-id", SESSION.parse().unwrap());
    resp
}

fn full(text: String) -> Body {
    Full::new(Bytes::from(text)).map_err(|never| match never {}).boxed()
}

fn sse_response(rx: mpsc::Receiver<Chunk>) -> Response<Body> {
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        let chunk = rx.recv().await?;
        Some((chunk.map(|s| Frame::data(Bytes::from(s))), rx))
    });
    let mut r = Response::new(BodyExt::boxed(StreamBody::new(stream)));
    r.headers_mut().insert("content-type", "text/event-stream".parse().unwrap());
    r
}

/// An SSE `message` event carrying `value`, with an optional event id.
pub(super) fn event(id: Option<&str>, value: &Value) -> Chunk {
    let id = id.map(|i| format!("id: {i}\n")).unwrap_or_default();
    Ok(format!("event: message\n{id}data: {value}\n\n"))
}

/// A sender/receiver pair for one scripted SSE body.
pub(super) fn sse_channel() -> (mpsc::Sender<Chunk>, mpsc::Receiver<Chunk>) {
    mpsc::channel(16)
}
