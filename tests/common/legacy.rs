//! A scripted legacy server that ignores the capabilities its client declared: it offers every
//! tool to every session and asks what it likes. Real servers do this (not every server gates
//! its tools the way the demo and the reference servers do), and it is the only way to make the
//! gateway meet a request its client cannot serve. It speaks just enough Streamable HTTP
//! (2025-11-25): `initialize` with a session id, JSON answers, one SSE stream per call, no GET
//! stream (405). It counts the cancellations and answers it receives. Its `burst_progress` tool
//! writes its progress notifications and its result in one chunk, so they reach the gateway
//! together: the case where the end of a run races its queued progress.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body::Frame;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use mrtr_gateway::protocol::jsonrpc::{request_bytes, Request as RpcRequest};
use mrtr_gateway::protocol::{Envelope, RequestId};
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, Notify};
use tokio::task::JoinHandle;

use super::TestResult;

/// Longest a call's stream stays open waiting for a cancel, so a broken test cannot leak it.
const CALL_LIFETIME: Duration = Duration::from_secs(10);

type Body = BoxBody<Bytes, Infallible>;

/// What the server saw.
#[derive(Debug, Default)]
pub(crate) struct LegacyStats {
    cancellations: AtomicU64,
    answers: AtomicU64,
    cancelled: Notify,
}

/// A running scripted server; stopped on drop.
pub(crate) struct ScriptedLegacy {
    pub(crate) addr: SocketAddr,
    pub(crate) stats: Arc<LegacyStats>,
    task: JoinHandle<()>,
}

// === impl LegacyStats ===

impl LegacyStats {
    /// `notifications/cancelled` received.
    pub(crate) fn cancellations(&self) -> u64 {
        self.cancellations.load(Ordering::Relaxed)
    }

    /// Responses to its own requests received (results or errors).
    pub(crate) fn answers(&self) -> u64 {
        self.answers.load(Ordering::Relaxed)
    }
}

// === impl ScriptedLegacy ===

impl ScriptedLegacy {
    /// Binds `127.0.0.1:0` and serves until dropped.
    pub(crate) async fn spawn() -> TestResult<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let stats = Arc::new(LegacyStats::default());
        let task = tokio::spawn(accept(listener, stats.clone()));
        Ok(Self { addr, stats, task })
    }

    /// The MCP endpoint.
    pub(crate) fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }
}

impl Drop for ScriptedLegacy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn accept(listener: TcpListener, stats: Arc<LegacyStats>) {
    while let Ok((stream, _)) = listener.accept().await {
        let stats = stats.clone();
        let service = service_fn(move |req| handle(req, stats.clone()));
        tokio::spawn(async move {
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn handle(req: Request<Incoming>, stats: Arc<LegacyStats>) -> Result<Response<Body>, Infallible> {
    if req.method() != Method::POST {
        return Ok(empty(StatusCode::METHOD_NOT_ALLOWED));
    }
    let bytes = match req.into_body().collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => return Ok(empty(StatusCode::BAD_REQUEST)),
    };
    Ok(match Envelope::parse(&bytes) {
        Ok(Envelope::Request(r)) => request(r, &stats),
        Ok(Envelope::Notification(n)) => {
            if n.method == "notifications/cancelled" {
                stats.cancellations.fetch_add(1, Ordering::Relaxed);
                stats.cancelled.notify_waiters();
            }
            empty(StatusCode::ACCEPTED)
        }
        Ok(Envelope::Response(_)) => {
            stats.answers.fetch_add(1, Ordering::Relaxed);
            empty(StatusCode::ACCEPTED)
        }
        Err(_) => empty(StatusCode::BAD_REQUEST),
    })
}

fn request(r: RpcRequest, stats: &Arc<LegacyStats>) -> Response<Body> {
    let result = match r.method.as_str() {
        "initialize" => json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "scripted-legacy", "version": "1.0.0"},
        }),
        "tools/list" => json!({"tools": []}),
        "tools/call" => return call(&r, stats.clone()),
        other => {
            return json_message(
                json!({"jsonrpc": "2.0", "id": r.id, "error": {"code": -32601, "message": other}}),
            )
        }
    };
    let mut response = json_message(json!({"jsonrpc": "2.0", "id": r.id, "result": result}));
    response.headers_mut().insert("mcp-session-id", http::HeaderValue::from_static("scripted-session"));
    response
}

/// The question each tool asks, whatever the client declared: `url_login` a URL elicitation,
/// `form_ask` a form one, `roots_ask` the roots, `sample_with_tools` a sampling request that
/// offers tools, `sample_with_context` one that asks for the server's context, any other a
/// plain sampling request.
fn question(tool: &str) -> (&'static str, Value) {
    let messages = json!([{"role": "user", "content": {"type": "text", "text": "hi"}}]);
    match tool {
        "url_login" => (
            "elicitation/create",
            json!({"mode": "url", "message": "Sign in", "url": "https://login.example.com/x", "elicitationId": "e-1"}),
        ),
        "form_ask" => (
            "elicitation/create",
            json!({"message": "Your name?", "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}}),
        ),
        "roots_ask" => ("roots/list", json!({})),
        "sample_with_tools" => (
            "sampling/createMessage",
            json!({"messages": messages, "maxTokens": 10,
                   "tools": [{"name": "lookup", "inputSchema": {"type": "object"}}], "toolChoice": {"mode": "auto"}}),
        ),
        "sample_with_context" => (
            "sampling/createMessage",
            json!({"messages": messages, "maxTokens": 10, "includeContext": "thisServer"}),
        ),
        _ => (
            "sampling/createMessage",
            json!({"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 10}),
        ),
    }
}

/// Progress notifications `burst_progress` sends before its result.
pub(crate) const BURST_STEPS: u64 = 3;

/// One SSE stream carrying every progress notification and the result in a single write.
fn burst(r: &RpcRequest) -> Response<Body> {
    let token = r.params.as_ref().and_then(|p| p["_meta"]["progressToken"].as_i64()).unwrap_or(0);
    let mut chunk = Vec::new();
    let mut event = |message: Value| {
        chunk.extend_from_slice(b"event: message\ndata: ");
        chunk.extend_from_slice(message.to_string().as_bytes());
        chunk.extend_from_slice(b"\n\n");
    };
    for step in 1..=BURST_STEPS {
        let params = json!({"progressToken": token, "progress": step, "total": BURST_STEPS});
        event(json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": params}));
    }
    let text = format!("burst of {BURST_STEPS}");
    event(json!({"jsonrpc": "2.0", "id": r.id, "result": {"content": [{"type": "text", "text": text}]}}));
    let mut response = Response::new(Full::new(Bytes::from(chunk)).boxed());
    response
        .headers_mut()
        .insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("text/event-stream"));
    response
}

/// Opens the call's SSE stream, asks one question on it and keeps it open until a cancel.
fn call(r: &RpcRequest, stats: Arc<LegacyStats>) -> Response<Body> {
    let tool = r.params.as_ref().and_then(|p| p["name"].as_str()).unwrap_or_default();
    if tool == "burst_progress" {
        return burst(r);
    }
    let (method, params) = question(tool);
    let ask = request_bytes(&RequestId::Number(1000), method, Some(&params));
    let (tx, rx) = mpsc::channel::<Bytes>(4);
    tokio::spawn(async move {
        let mut event = b"event: message\ndata: ".to_vec();
        event.extend_from_slice(&ask);
        event.extend_from_slice(b"\n\n");
        if tx.send(Bytes::from(event)).await.is_ok() {
            let _ = tokio::time::timeout(CALL_LIFETIME, stats.cancelled.notified()).await;
        }
    });
    let frames = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|chunk| (Ok::<_, Infallible>(Frame::data(chunk)), rx))
    });
    let mut response = Response::new(BodyExt::boxed(StreamBody::new(frames)));
    response
        .headers_mut()
        .insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("text/event-stream"));
    response
}

fn json_message(message: Value) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(message.to_string())).boxed());
    response
        .headers_mut()
        .insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    response
}

fn empty(status: StatusCode) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::new()).boxed());
    *response.status_mut() = status;
    response
}
