//! A small Streamable HTTP test client: plain hyper requests and an incremental SSE reader.

use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};

use crate::demo::{spawn_loopback, DemoHandle, DemoOptions};

/// Every wait in these tests is bounded by this.
pub(super) const WAIT: Duration = Duration::from_secs(5);

pub(super) struct TestClient {
    pub(super) url: String,
    http: Client<HttpConnector, Full<Bytes>>,
    pub(super) session: Option<String>,
    pub(super) version: String,
    next_id: i64,
}

/// One parsed SSE event.
#[derive(Debug)]
pub(super) struct Event {
    pub(super) id: Option<String>,
    pub(super) retry: Option<String>,
    pub(super) data: String,
}

impl Event {
    pub(super) fn json(&self) -> Value {
        serde_json::from_str(&self.data).unwrap()
    }
}

/// Reads events from a streaming body as they arrive.
pub(super) struct Events {
    body: Incoming,
    buffer: Vec<u8>,
}

pub(super) fn start(options: DemoOptions) -> DemoHandle {
    spawn_loopback(options).unwrap()
}

pub(super) fn full_caps() -> Value {
    json!({"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {"listChanged": true}})
}

impl TestClient {
    pub(super) fn new(url: String) -> Self {
        Self {
            url,
            http: Client::builder(TokioExecutor::new()).build_http(),
            session: None,
            version: String::new(),
            next_id: 100,
        }
    }

    /// Initializes a session with these capabilities and version, then sends `initialized`.
    pub(super) async fn connect(url: String, caps: Value, version: &str) -> (Self, Value) {
        let mut client = Self::new(url);
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": caps,
            "clientInfo": {"name": "test", "version": "0"}}});
        let response = client.post(&body).await;
        assert_eq!(response.status(), StatusCode::OK);
        let session = response.headers()["mcp-session-id"].to_str().unwrap().to_owned();
        let result = read_json(response).await;
        client.session = Some(session);
        client.version = result["result"]["protocolVersion"].as_str().unwrap().to_owned();
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        assert_eq!(client.post(&initialized).await.status(), StatusCode::ACCEPTED);
        (client, result)
    }

    fn request(&self, method: &str) -> http::request::Builder {
        let mut builder = Request::builder()
            .method(method)
            .uri(&self.url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json");
        if let Some(session) = &self.session {
            builder = builder.header("mcp-session-id", session);
        }
        if !self.version.is_empty() {
            builder = builder.header("mcp-protocol-version", &self.version);
        }
        builder
    }

    pub(super) async fn send(&self, request: Request<Full<Bytes>>) -> Response<Incoming> {
        tokio::time::timeout(WAIT, self.http.request(request)).await.unwrap().unwrap()
    }

    pub(super) async fn post(&self, body: &Value) -> Response<Incoming> {
        let bytes = Bytes::from(serde_json::to_vec(body).unwrap());
        self.send(self.request("POST").body(Full::new(bytes)).unwrap()).await
    }

    pub(super) async fn get_stream(&self) -> Response<Incoming> {
        let request = self.request("GET").header("accept", "text/event-stream");
        self.send(request.body(Full::default()).unwrap()).await
    }

    /// Resumes a stream after the event `last`.
    pub(super) async fn resume(&self, last: &str) -> Response<Incoming> {
        let request = self.request("GET").header("accept", "text/event-stream");
        let request = request.header("last-event-id", last);
        self.send(request.body(Full::default()).unwrap()).await
    }

    pub(super) async fn delete(&self) -> Response<Incoming> {
        self.send(self.request("DELETE").body(Full::default()).unwrap()).await
    }

    /// Sends a request and returns the raw response.
    pub(super) async fn call(&mut self, method: &str, params: Value) -> (i64, Response<Incoming>) {
        self.next_id += 1;
        let id = self.next_id;
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        (id, self.post(&body).await)
    }

    /// Starts `tools/call` and returns its event stream.
    pub(super) async fn call_tool(&mut self, name: &str, arguments: Value) -> (i64, Events) {
        let (id, response) = self.call("tools/call", json!({"name": name, "arguments": arguments})).await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        (id, Events::new(response))
    }

    /// POSTs a result answering the server request `id`.
    pub(super) async fn answer(&self, id: &Value, result: Value) {
        let body = json!({"jsonrpc": "2.0", "id": id, "result": result});
        assert_eq!(self.post(&body).await.status(), StatusCode::ACCEPTED);
    }
}

pub(super) async fn read_json(response: Response<Incoming>) -> Value {
    let bytes = tokio::time::timeout(WAIT, response.into_body().collect()).await.unwrap().unwrap().to_bytes();
    serde_json::from_slice(&bytes).unwrap()
}

impl Events {
    pub(super) fn new(response: Response<Incoming>) -> Self {
        Self { body: response.into_body(), buffer: Vec::new() }
    }

    /// The next event; `Ok(None)` when the stream ended cleanly, `Err` when it broke.
    pub(super) async fn next(&mut self) -> Result<Option<Event>, hyper::Error> {
        loop {
            if let Some(end) = self.buffer.windows(2).position(|w| w == b"\n\n") {
                let raw: Vec<u8> = self.buffer.drain(..end + 2).collect();
                return Ok(Some(parse_event(&String::from_utf8(raw).unwrap())));
            }
            let frame = tokio::time::timeout(WAIT, self.body.frame()).await.unwrap();
            match frame {
                None => return Ok(None),
                Some(frame) => {
                    if let Ok(data) = frame?.into_data() {
                        self.buffer.extend_from_slice(&data);
                    }
                }
            }
        }
    }

    /// The next event, which must exist.
    pub(super) async fn event(&mut self) -> Event {
        self.next().await.unwrap().expect("the stream ended early")
    }

    /// The next JSON-RPC message, skipping priming events.
    pub(super) async fn message(&mut self) -> Value {
        loop {
            let event = self.event().await;
            if !event.data.is_empty() {
                return event.json();
            }
        }
    }
}

fn parse_event(raw: &str) -> Event {
    let mut event = Event { id: None, retry: None, data: String::new() };
    for line in raw.lines() {
        if let Some(id) = line.strip_prefix("id: ") {
            event.id = Some(id.to_owned());
        } else if let Some(retry) = line.strip_prefix("retry: ") {
            event.retry = Some(retry.to_owned());
        } else if let Some(data) = line.strip_prefix("data:") {
            event.data.push_str(data.trim_start());
        }
    }
    event
}

/// The text of a tool result message.
pub(super) fn tool_text(message: &Value) -> &str {
    message["result"]["content"][0]["text"].as_str().unwrap()
}
