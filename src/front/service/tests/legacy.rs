//! A legacy (2025-era) client's session through the handler, in process, against the demo: the
//! relay's answers and what it counts for each kind of request, so that a relay path that
//! answers wrongly or counts under another name fails here and not only in the integration
//! suite.

use http::{HeaderMap, Method, StatusCode};

use super::*;

const LEGACY_VERSION: &str = "2025-06-18";

/// One legacy request through the handler: its status, headers and body (the body only when
/// `read`, since a GET stream stays open).
async fn legacy(
    front: &Front,
    method: Method,
    session: Option<&str>,
    body: Option<Value>,
    read: bool,
) -> (StatusCode, HeaderMap, String) {
    let bytes = body.map(|b| Bytes::from(b.to_string())).unwrap_or_default();
    legacy_bytes(front, method, session, bytes, read).await
}

/// [`legacy`] with a body of any bytes, JSON or not.
async fn legacy_bytes(
    front: &Front,
    method: Method,
    session: Option<&str>,
    bytes: Bytes,
    read: bool,
) -> (StatusCode, HeaderMap, String) {
    let mut request = Request::builder()
        .method(method)
        .uri("/mcp")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    if let Some(session) = session {
        request = request.header("mcp-session-id", session).header("mcp-protocol-version", LEGACY_VERSION);
    }
    let response = front.state.handle(request.body(Full::new(bytes)).expect("request")).await;
    let (parts, body) = response.into_parts();
    let text = match read {
        true => String::from_utf8_lossy(&body.collect().await.expect("body").to_bytes()).into_owned(),
        false => String::new(),
    };
    (parts.status, parts.headers, text)
}

fn relayed(front: &Front, kind: &str) -> u64 {
    front.state.metrics.legacy.relayed.with_label_values(&[kind]).get()
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": LEGACY_VERSION, "capabilities": {},
        "clientInfo": {"name": "legacy-test", "version": "1"}}})
}

/// Opens a session: its sealed id.
async fn open(front: &Front) -> String {
    let (status, headers, body) = legacy(front, Method::POST, None, Some(initialize()), true).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.contains("\"protocolVersion\""), "the upstream's initialize result: {body}");
    let id = headers.get("mcp-session-id").expect("a session id").to_str().expect("ascii").to_owned();
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (status, _, _) = legacy(front, Method::POST, Some(&id), Some(note), true).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    id
}

/// Each kind of request is relayed and counted under its own name: the `initialize` that opens
/// a session, a POST in it, its GET stream and the DELETE that ends it.
#[tokio::test]
async fn a_legacy_session_is_relayed_and_counted_by_kind() {
    let front = front("");
    let id = open(&front).await;
    assert_eq!((relayed(&front, "initialize"), relayed(&front, "post")), (1, 1));

    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let (status, _, body) = legacy(&front, Method::POST, Some(&id), Some(list), true).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("\"echo\""), "the demo's tools: {body}");
    assert_eq!(relayed(&front, "post"), 2);

    let (status, headers, _) = legacy(&front, Method::GET, Some(&id), None, false).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["content-type"], "text/event-stream");
    assert_eq!(relayed(&front, "get"), 1);

    let (status, _, _) = legacy(&front, Method::DELETE, Some(&id), None, true).await;
    assert!(status.is_success(), "{status}");
    assert_eq!(relayed(&front, "delete"), 1);
    let list = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"});
    let (status, _, _) = legacy(&front, Method::POST, Some(&id), Some(list), true).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "a deleted session is gone");
    assert_eq!(relayed(&front, "post"), 2, "nothing else was counted as a POST");
}

/// The session id the relay hands out is sealed: never the upstream's, and refused once
/// altered.
#[tokio::test]
async fn an_altered_session_id_is_refused() {
    let front = front("");
    let id = open(&front).await;
    let mut altered = id.clone().into_bytes();
    let last = altered.len() - 2;
    altered[last] = if altered[last] == b'A' { b'B' } else { b'A' };
    let altered = String::from_utf8(altered).expect("ascii");
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let (status, _, body) = legacy(&front, Method::POST, Some(&altered), Some(list), true).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let error: Value = serde_json::from_str(&body).expect("a JSON-RPC error");
    assert_eq!(error["error"]["code"], -32001, "session not found, as 2025-era servers answer: {body}");
    assert_eq!(relayed(&front, "post"), 1, "only the notification was relayed");
}

/// A legacy client meets the same rate limits as a 2026-07-28 one, with no authorization rules:
/// each request in its body takes its tokens, and its notifications none.
#[tokio::test]
async fn a_legacy_session_takes_its_tools_rate_limit() {
    let front = front("[limits.tools]\necho = { rate_per_sec = 0.001, burst = 2 }\n");
    let id = open(&front).await;
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"message": "hi"}}});
    for n in 1..=2 {
        let (status, _, body) = legacy(&front, Method::POST, Some(&id), Some(call.clone()), true).await;
        assert_eq!(status, StatusCode::OK, "call {n} is within the burst: {body}");
    }
    let (status, _, body) = legacy(&front, Method::POST, Some(&id), Some(call), true).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
}

/// An upstream's refusal reaches the client in the gateway's words, with the upstream's own
/// JSON-RPC code: a body the demo cannot parse is its -32700.
#[tokio::test]
async fn an_upstream_refusal_keeps_its_code_in_the_gateways_words() {
    let front = front("");
    let id = open(&front).await;
    let not_json = Bytes::from_static(b"{not json");
    let (status, _, body) = legacy_bytes(&front, Method::POST, Some(&id), not_json, true).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let error: Value = serde_json::from_str(&body).expect("a JSON-RPC error");
    assert_eq!(error["error"]["code"], -32700, "{error}");
    let message = error["error"]["message"].as_str().unwrap_or_default();
    assert_eq!(message, "the upstream server refused the request (HTTP 400 Bad Request)", "{error}");
}
