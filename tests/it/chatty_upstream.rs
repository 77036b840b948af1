//! A scripted legacy server (2025-11-25 Streamable HTTP, JSON answers, SSE for calls that
//! notify, no GET stream) for the logging and URL elicitation tests. It records every
//! `logging/setLevel` it is sent, with the session it came on, and:
//! - `log_burst` writes, in one SSE chunk: a progress note, one `notifications/message` per level
//!   (`debug` … `emergency`, data `<level> message`), a `notifications/elicitation/complete`,
//!   a second progress note, then the result `burst done`;
//! - `url_required` fails with `-32042` listing one URL elicitation (a fresh `elicitationId`
//!   per call, and [`UPSTREAM_WORDS`] in the message) until the test marks the out-of-band
//!   interaction done ([`Chatty::complete`]), then answers `signed in`;
//! - `url_required_unlisted` fails with a `-32042` that lists nothing;
//! - `url_required_script` and `url_required_http` fail with a `-32042` listing one URL
//!   elicitation whose URL is a `javascript:` one and a plain `http:` one;
//! - `touch` changes every resource its own session subscribed to (`resources/subscribe`) and
//!   tells only that session, in its SSE answer: a `notifications/resources/updated` per URI,
//!   then the result `touched <n>`. That is how many per-session servers notify (as
//!   `server-everything`'s simulated updates do);
//! - `flood {uri, count}` sends `count` updates of `uri` the same way, in one SSE chunk, then
//!   the result `flooded <count>`: more than a listen stream whose client reads nothing holds.

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use mrtr_gateway::protocol::jsonrpc::Request as RpcRequest;
use mrtr_gateway::protocol::{Envelope, RequestId};
use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::common::TestResult;

/// Upstream text that must never reach a client.
pub(crate) const UPSTREAM_WORDS: &str = "upstream-says-7c1e";
/// The levels `log_burst` logs at, least severe first.
pub(crate) const LEVELS: [&str; 8] =
    ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"];

type Body = BoxBody<Bytes, Infallible>;

/// What the server saw and what the test told it.
#[derive(Default)]
pub(crate) struct Seen {
    sessions: AtomicU64,
    /// `(session, level)` of every `logging/setLevel`, in order.
    set_levels: Mutex<Vec<(String, String)>>,
    /// Tool calls, by name, in order, with the session each came on.
    calls: Mutex<Vec<(String, String)>>,
    /// `(session, uri)` of every subscription held now.
    subscribed: Mutex<Vec<(String, String)>>,
    completed: AtomicBool,
}

/// A running server; stopped on drop.
pub(crate) struct Chatty {
    addr: std::net::SocketAddr,
    pub(crate) seen: Arc<Seen>,
    task: JoinHandle<()>,
}

// === impl Seen ===

impl Seen {
    pub(crate) fn set_levels(&self) -> Vec<(String, String)> {
        self.set_levels.lock().clone()
    }

    pub(crate) fn calls_of(&self, tool: &str) -> usize {
        self.calls.lock().iter().filter(|(c, _)| c == tool).count()
    }

    /// The sessions `tool`'s calls came on, in order.
    pub(crate) fn sessions_of(&self, tool: &str) -> Vec<String> {
        self.calls.lock().iter().filter(|(c, _)| c == tool).map(|(_, s)| s.clone()).collect()
    }

    /// The URIs `session` is subscribed to now.
    fn subscriptions_of(&self, session: &str) -> Vec<String> {
        self.subscribed.lock().iter().filter(|(s, _)| s == session).map(|(_, u)| u.clone()).collect()
    }

    /// The sessions subscribed to `uri` now.
    pub(crate) fn subscribers(&self, uri: &str) -> Vec<String> {
        self.subscribed.lock().iter().filter(|(_, u)| u == uri).map(|(s, _)| s.clone()).collect()
    }
}

// === impl Chatty ===

impl Chatty {
    /// Binds `127.0.0.1:0`; `logging` says whether `initialize` declares the capability.
    pub(crate) async fn spawn(logging: bool) -> TestResult<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let seen = Arc::new(Seen::default());
        let task = tokio::spawn(accept(listener, seen.clone(), logging));
        Ok(Self { addr, seen, task })
    }

    pub(crate) fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// The user finished the URL flow out of band: `url_required` succeeds from now on.
    pub(crate) fn complete(&self) {
        self.seen.completed.store(true, Ordering::Relaxed);
    }
}

impl Drop for Chatty {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn accept(listener: TcpListener, seen: Arc<Seen>, logging: bool) {
    while let Ok((stream, _)) = listener.accept().await {
        let seen = seen.clone();
        let service = service_fn(move |req| handle(req, seen.clone(), logging));
        tokio::spawn(async move {
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn handle(
    req: Request<Incoming>,
    seen: Arc<Seen>,
    logging: bool,
) -> Result<Response<Body>, Infallible> {
    if req.method() != Method::POST {
        return Ok(empty(StatusCode::METHOD_NOT_ALLOWED));
    }
    let session = req.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    let Ok(collected) = req.into_body().collect().await else { return Ok(empty(StatusCode::BAD_REQUEST)) };
    Ok(match Envelope::parse(&collected.to_bytes()) {
        Ok(Envelope::Request(r)) => request(&r, &seen, &session, logging),
        Ok(_) => empty(StatusCode::ACCEPTED),
        Err(_) => empty(StatusCode::BAD_REQUEST),
    })
}

fn request(r: &RpcRequest, seen: &Seen, session: &str, logging: bool) -> Response<Body> {
    match r.method.as_str() {
        "initialize" => {
            let n = seen.sessions.fetch_add(1, Ordering::Relaxed) + 1;
            let mut capabilities = json!({"tools": {}, "resources": {"subscribe": true}});
            if logging {
                capabilities["logging"] = json!({});
            }
            let result = json!({"protocolVersion": "2025-11-25", "capabilities": capabilities,
                                "serverInfo": {"name": "chatty", "version": "1.0.0"}});
            let mut response = json_message(&json!({"jsonrpc": "2.0", "id": r.id, "result": result}));
            let id = HeaderValue::from_str(&format!("s{n}")).unwrap_or(HeaderValue::from_static("s"));
            response.headers_mut().insert("mcp-session-id", id);
            response
        }
        "logging/setLevel" => {
            let level = r.params.as_ref().and_then(|p| p["level"].as_str()).unwrap_or("").to_owned();
            seen.set_levels.lock().push((session.to_owned(), level));
            json_message(&json!({"jsonrpc": "2.0", "id": r.id, "result": {}}))
        }
        "tools/list" => json_message(&json!({"jsonrpc": "2.0", "id": r.id, "result": {"tools": []}})),
        "tools/call" => call(r, seen, session),
        "resources/subscribe" | "resources/unsubscribe" => {
            let uri = r.params.as_ref().and_then(|p| p["uri"].as_str()).unwrap_or("").to_owned();
            let mut subscribed = seen.subscribed.lock();
            subscribed.retain(|(s, u)| (s.as_str(), u.as_str()) != (session, uri.as_str()));
            if r.method == "resources/subscribe" {
                subscribed.push((session.to_owned(), uri));
            }
            json_message(&json!({"jsonrpc": "2.0", "id": r.id, "result": {}}))
        }
        other => {
            json_message(&json!({"jsonrpc": "2.0", "id": r.id, "error": {"code": -32601, "message": other}}))
        }
    }
}

fn call(r: &RpcRequest, seen: &Seen, session: &str) -> Response<Body> {
    let tool = r.params.as_ref().and_then(|p| p["name"].as_str()).unwrap_or_default().to_owned();
    let number = {
        let mut calls = seen.calls.lock();
        calls.push((tool.clone(), session.to_owned()));
        calls.len()
    };
    match tool.as_str() {
        "log_burst" => burst(r),
        "touch" => touch(r, &seen.subscriptions_of(session)),
        "flood" => flood(r),
        "url_required" if seen.completed.load(Ordering::Relaxed) => json_message(&result(&r.id, "signed in")),
        "url_required" => url_listing(&r.id, number, "https://login.example.com/start"),
        "url_required_unlisted" => url_error(&r.id, json!({})),
        "url_required_script" => url_listing(&r.id, number, "javascript:alert(1)"),
        "url_required_http" => url_listing(&r.id, number, "http://login.example.com/start"),
        _ => json_message(
            &json!({"jsonrpc": "2.0", "id": r.id, "error": {"code": -32602, "message": "no tool"}}),
        ),
    }
}

/// A `-32042` listing one URL elicitation of `url`, with an `elicitationId` fresh per call.
fn url_listing(id: &RequestId, number: usize, url: &str) -> Response<Body> {
    let elicitation = json!({"mode": "url", "elicitationId": format!("e-{number}"),
                             "url": url, "message": "Sign in to continue"});
    url_error(id, json!({"elicitations": [elicitation]}))
}

fn url_error(id: &RequestId, data: Value) -> Response<Body> {
    let message = format!("authorization needed ({UPSTREAM_WORDS})");
    json_message(
        &json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32042, "message": message, "data": data}}),
    )
}

fn result(id: &RequestId, text: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": text}]}})
}

/// One SSE body holding `messages`, written at once.
fn sse(messages: impl IntoIterator<Item = Value>) -> Response<Body> {
    let mut chunk = Vec::new();
    for message in messages {
        chunk.extend_from_slice(b"event: message\ndata: ");
        chunk.extend_from_slice(message.to_string().as_bytes());
        chunk.extend_from_slice(b"\n\n");
    }
    let mut response = Response::new(Full::new(Bytes::from(chunk)).boxed());
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    response
}

/// An update of each of `uris`, on the call's own stream, then the result.
fn touch(r: &RpcRequest, uris: &[String]) -> Response<Body> {
    let updates = uris.iter().map(
        |uri| json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}}),
    );
    let done = result(&r.id, &format!("touched {}", uris.len()));
    sse(updates.chain(std::iter::once(done)))
}

/// `count` updates of `uri`, on the call's own stream, then the result.
fn flood(r: &RpcRequest) -> Response<Body> {
    let arguments = r.params.as_ref().map(|p| p["arguments"].clone()).unwrap_or(Value::Null);
    let uri = arguments["uri"].as_str().unwrap_or_default().to_owned();
    let count = arguments["count"].as_u64().unwrap_or(0);
    let update =
        json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}});
    let done = result(&r.id, &format!("flooded {count}"));
    sse((0..count).map(|_| update.clone()).chain(std::iter::once(done)))
}

/// Every notification and the result in one SSE write, so they reach the gateway together.
fn burst(r: &RpcRequest) -> Response<Body> {
    let token = r.params.as_ref().map(|p| p["_meta"]["progressToken"].clone()).unwrap_or(Value::Null);
    let mut messages = Vec::new();
    let mut event = |message: Value| messages.push(message);
    let progress = |n: u64| {
        json!({"jsonrpc": "2.0", "method": "notifications/progress",
                                   "params": {"progressToken": token, "progress": n, "total": 2}})
    };
    event(progress(1));
    for level in LEVELS {
        let params = json!({"level": level, "logger": "chatty", "data": format!("{level} message")});
        event(json!({"jsonrpc": "2.0", "method": "notifications/message", "params": params}));
    }
    let complete = json!({"elicitationId": "e-done"});
    event(json!({"jsonrpc": "2.0", "method": "notifications/elicitation/complete", "params": complete}));
    event(progress(2));
    event(result(&r.id, "burst done"));
    sse(messages)
}

fn json_message(message: &Value) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(message.to_string())).boxed());
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

fn empty(status: StatusCode) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::new()).boxed());
    *response.status_mut() = status;
    response
}
