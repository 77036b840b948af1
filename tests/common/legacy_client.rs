//! A small 2025-11-25 Streamable HTTP client, as a legacy MCP client speaks it: `initialize`
//! (keeping the `Mcp-Session-Id` it is given), `MCP-Protocol-Version` and the session id on
//! every later request, server requests answered in-band (read from a POST's SSE stream or the
//! GET stream, answered with a POST), resumption with `GET` and `Last-Event-ID` when a stream
//! ends early, and `DELETE` to end the session.
//!
//! Server requests get the distinctive answers of [`super::answers`], so a test can find them in
//! the server's result.

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE};
use http::{HeaderMap, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::rt::TokioExecutor;
use mrtr_gateway::protocol::headers;
use mrtr_gateway::upstream::sse::SseParser;
use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio::task::JoinHandle;

use super::answers::answer;
use super::{bounded, HarnessError, TestResult};

/// The revision this client speaks.
pub(crate) const LEGACY_VERSION: &str = "2025-11-25";
const MAX_EVENT: usize = 1 << 20;

type Http = HyperClient<HttpConnector, Full<Bytes>>;

/// A legacy client of one endpoint; clones share the session.
#[derive(Clone)]
pub(crate) struct LegacyClient {
    http: Http,
    url: String,
    pub(crate) session: Option<String>,
    next_id: Arc<AtomicI64>,
    /// Server requests this client answered, on any stream.
    pub(crate) answered: Arc<AtomicUsize>,
    /// Sent as `Authorization: Bearer …` on every request.
    bearer: Option<String>,
    /// Further headers sent on every request (a `traceparent`, say).
    extra: Vec<(&'static str, String)>,
}

/// What a POST returned, read whole.
#[derive(Debug)]
pub(crate) struct Raw {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) messages: Vec<Value>,
}

/// Asserts that the last message of `stream` answers `call` with the relay's timeout error,
/// which names the timeout (`"500ms"`, say).
pub(crate) fn assert_ends_timed_out(stream: &Raw, call: &Value, timeout: &str) {
    let last = stream.messages.last().expect("the stream ended with no answer");
    assert_eq!((&last["id"], &last["error"]["code"]), (&call["id"], &json!(-32000)), "{last}");
    let message = last["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(&format!("did not answer within {timeout}")), "{message}");
}

/// The standalone GET stream, answering server requests until dropped.
pub(crate) struct GetStream {
    pub(crate) status: StatusCode,
    task: Option<JoinHandle<()>>,
}

// === impl LegacyClient ===

impl LegacyClient {
    pub(crate) fn new(url: String) -> Self {
        let http = HyperClient::builder(TokioExecutor::new()).build_http();
        Self {
            http,
            url,
            session: None,
            next_id: Arc::new(AtomicI64::new(1)),
            answered: Arc::default(),
            bearer: None,
            extra: Vec::new(),
        }
    }

    /// The same client sending `name: value` on every request.
    pub(crate) fn with_header(mut self, name: &'static str, value: &str) -> Self {
        self.extra.push((name, value.to_owned()));
        self
    }

    /// The same client sending `token` as its bearer.
    pub(crate) fn with_bearer(mut self, token: &str) -> Self {
        self.bearer = Some(token.to_owned());
        self
    }

    /// The same client speaking for another session id (another replica's URL, say).
    pub(crate) fn at(&self, url: String) -> Self {
        Self { url, ..self.clone() }
    }

    /// `initialize` declaring `capabilities`, then `notifications/initialized`. Returns the result.
    pub(crate) async fn initialize(&mut self, capabilities: Value) -> TestResult<Value> {
        let params = json!({"protocolVersion": LEGACY_VERSION, "capabilities": capabilities,
            "clientInfo": {"name": "legacy-test-client", "version": "1.0"}});
        let raw = self.post(&self.request_body("initialize", params)).await?;
        if raw.status != StatusCode::OK {
            return Err(unexpected(&format!("initialize answered {}: {:?}", raw.status, raw.messages)));
        }
        self.session = raw.headers.get(headers::SESSION_ID).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let result = raw.messages.last().map(|m| m["result"].clone()).unwrap_or(Value::Null);
        let status =
            self.post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await?.status;
        if status != StatusCode::ACCEPTED {
            return Err(unexpected(&format!("notifications/initialized answered {status}")));
        }
        Ok(result)
    }

    /// A JSON-RPC request body with a fresh id.
    pub(crate) fn request_body(&self, method: &str, params: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": self.next_id.fetch_add(1, Ordering::Relaxed), "method": method, "params": params})
    }

    /// Calls `method(params)`: answers every server request on the POST's stream, resumes the
    /// stream with `GET` + `Last-Event-ID` if it ends early, and returns the response message.
    pub(crate) async fn call(&self, method: &str, params: Value) -> TestResult<Value> {
        let body = self.request_body(method, params);
        let id = body["id"].clone();
        bounded("a legacy call", async {
            let resp = self.send(Method::POST, Some(&body), None).await?;
            if resp.status() != StatusCode::OK {
                return Err(unexpected(&format!("{method} answered {}", resp.status())));
            }
            let mut last_event = None;
            if let Some(done) = self.read_call(resp.into_body(), &id, &mut last_event).await? {
                return Ok(done);
            }
            let Some(event_id) = last_event.clone() else {
                return Err(unexpected("the stream ended without a response or an event id"));
            };
            let resumed = self.send(Method::GET, None, Some(&event_id)).await?;
            self.read_call(resumed.into_body(), &id, &mut last_event)
                .await?
                .ok_or_else(|| unexpected("the resumed stream ended without a response"))
        })
        .await?
    }

    /// `tools/call name(arguments)`; returns the response message.
    pub(crate) async fn call_tool(&self, name: &str, arguments: Value) -> TestResult<Value> {
        self.call("tools/call", json!({"name": name, "arguments": arguments})).await
    }

    /// Opens the GET stream; it answers server requests until dropped.
    pub(crate) async fn open_get(&self) -> TestResult<GetStream> {
        let resp = bounded("the GET stream", self.send(Method::GET, None, None)).await??;
        let status = resp.status();
        if status != StatusCode::OK {
            return Ok(GetStream { status, task: None });
        }
        let me = self.clone();
        let task = tokio::spawn(async move {
            let _ = me.read_call(resp.into_body(), &Value::Null, &mut None).await;
        });
        Ok(GetStream { status, task: Some(task) })
    }

    /// [`LegacyClient::open_get`], also keeping every message the stream carried.
    pub(crate) async fn open_get_recording(&self) -> TestResult<(GetStream, Arc<Mutex<Vec<Value>>>)> {
        let resp = bounded("the GET stream", self.send(Method::GET, None, None)).await??;
        let (status, seen) = (resp.status(), Arc::new(Mutex::new(Vec::new())));
        if status != StatusCode::OK {
            return Ok((GetStream { status, task: None }, seen));
        }
        let (me, record) = (self.clone(), seen.clone());
        let task = tokio::spawn(async move {
            let mut body = resp.into_body();
            let mut parser = SseParser::new(MAX_EVENT);
            while let Some(Ok(frame)) = body.frame().await {
                let Ok(data) = frame.into_data() else { continue };
                for event in parser.feed(&data).unwrap_or_default() {
                    let Ok(message) = serde_json::from_str::<Value>(&event.data) else { continue };
                    record.lock().push(message.clone());
                    if message.get("method").is_some() && message.get("id").is_some() {
                        let _ = me.answer(&message).await;
                    }
                }
            }
        });
        Ok((GetStream { status, task: Some(task) }, seen))
    }

    /// Opens the GET stream and never reads it; dropping the response leaves it.
    pub(crate) async fn open_get_unread(&self) -> TestResult<Response<Incoming>> {
        let resp = bounded("the GET stream", self.send(Method::GET, None, None)).await??;
        match resp.status() {
            StatusCode::OK => Ok(resp),
            other => Err(HarnessError::Unexpected(format!("the GET stream answered {other}"))),
        }
    }

    /// `DELETE` of the session; returns the status.
    pub(crate) async fn delete(&self) -> TestResult<StatusCode> {
        Ok(bounded("DELETE", self.send(Method::DELETE, None, None)).await??.status())
    }

    /// POSTs one message and reads the whole reply (JSON or SSE), answering nothing.
    pub(crate) async fn post(&self, body: &Value) -> TestResult<Raw> {
        bounded("a legacy POST", async {
            let resp = self.send(Method::POST, Some(body), None).await?;
            let (head, body) = resp.into_parts();
            let bytes = body.collect().await?.to_bytes();
            let messages = messages_of(&head.headers, &bytes)?;
            Ok(Raw { status: head.status, headers: head.headers, messages })
        })
        .await?
    }

    async fn send(
        &self,
        method: Method,
        body: Option<&Value>,
        last_event: Option<&str>,
    ) -> TestResult<http::Response<Incoming>> {
        let mut builder = Request::builder()
            .method(method)
            .uri(&self.url)
            .header(ACCEPT, "application/json, text/event-stream")
            .header(headers::PROTOCOL_VERSION, LEGACY_VERSION);
        if let Some(id) = &self.session {
            builder = builder.header(headers::SESSION_ID, id);
        }
        if let Some(id) = last_event {
            builder = builder.header(headers::LAST_EVENT_ID, id);
        }
        if let Some(token) = &self.bearer {
            builder = builder.header(http::header::AUTHORIZATION, format!("Bearer {token}"));
        }
        for (name, value) in &self.extra {
            builder = builder.header(*name, value);
        }
        let bytes = match body {
            Some(b) => {
                builder = builder.header(CONTENT_TYPE, "application/json");
                Bytes::from(serde_json::to_vec(b)?)
            }
            None => Bytes::new(),
        };
        Ok(self.http.request(builder.body(Full::new(bytes))?).await?)
    }

    /// Reads SSE events, answering server requests, until the response to `id` (returned).
    async fn read_call(
        &self,
        mut body: Incoming,
        id: &Value,
        last_event: &mut Option<String>,
    ) -> TestResult<Option<Value>> {
        let mut parser = SseParser::new(MAX_EVENT);
        while let Some(frame) = body.frame().await {
            let Ok(data) = frame?.into_data() else { continue };
            let events = parser.feed(&data).map_err(|e| unexpected(&e.to_string()))?;
            for event in events {
                if event.id.is_some() {
                    last_event.clone_from(&event.id);
                }
                if event.data.is_empty() {
                    continue;
                }
                let message: Value = serde_json::from_str(&event.data)?;
                if message.get("method").is_some() && message.get("id").is_some() {
                    self.answer(&message).await?;
                } else if message.get("method").is_none() && &message["id"] == id {
                    return Ok(Some(message));
                }
            }
        }
        Ok(None)
    }

    async fn answer(&self, request: &Value) -> TestResult {
        let result = answer(request);
        let reply = json!({"jsonrpc": "2.0", "id": request["id"], "result": result});
        let status = self.post(&reply).await?.status;
        if status != StatusCode::ACCEPTED {
            return Err(unexpected(&format!("an answer was refused with {status}")));
        }
        self.answered.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

impl Drop for GetStream {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// The JSON-RPC messages of a reply: one JSON body, or every SSE event with data.
fn messages_of(headers: &HeaderMap, bytes: &[u8]) -> TestResult<Vec<Value>> {
    let content_type = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    if content_type.starts_with("text/event-stream") {
        let events = SseParser::new(MAX_EVENT).feed(bytes).map_err(|e| unexpected(&e.to_string()))?;
        return events
            .iter()
            .filter(|e| !e.data.is_empty())
            .map(|e| Ok(serde_json::from_str(&e.data)?))
            .collect();
    }
    if bytes.is_empty() {
        return Ok(Vec::new());
    }
    Ok(vec![serde_json::from_slice(bytes)?])
}

fn unexpected(what: &str) -> HarnessError {
    HarnessError::Unexpected(what.to_owned())
}
