//! The handler's tests. Most drive it whole, in process, against the demo upstream: what each
//! method's answer carries, so that a handler path that answers with nothing, or skips a rule,
//! fails here and not only in the integration suite.

use http_body_util::{BodyExt, Full};
use serde_json::{json, Value};

use super::*;
use crate::demo::{spawn_loopback, DemoHandle, DemoOptions};

mod legacy;

/// Most bytes the future of one front request may take (as this test's build lays it out).
/// hyper holds one per busy connection for as long as the request runs, so 1,000 calls in
/// flight hold 1,000 of them: a rare path awaited inline (ending a refused call upstream did,
/// +3.6 KB) sizes every request. Box such paths where they are awaited, as the call and the
/// round's live state are (10,448 bytes before, 7,952 after).
const MAX_REQUEST_FUTURE: usize = 8704;

#[tokio::test]
async fn a_requests_future_stays_small() {
    let state = state_of("[upstream]\nurl = \"http://127.0.0.1:9/mcp\"\n");
    let request = Request::post("/mcp").body(http_body_util::Full::new(Bytes::new())).expect("request");
    let size = std::mem::size_of_val(&state.handle(request));
    assert!(
        size <= MAX_REQUEST_FUTURE,
        "a front request's future is {size} bytes, over {MAX_REQUEST_FUTURE}"
    );
}

#[tokio::test]
async fn a_body_past_the_limit_is_too_large_by_name() {
    let body = http_body_util::Limited::new(http_body_util::Full::new(Bytes::from_static(b"12345")), 4);
    assert!(matches!(read_body(body, 4).await, Err(FrontError::PayloadTooLarge { limit: 4 })));
    let within = http_body_util::Limited::new(http_body_util::Full::new(Bytes::from_static(b"1234")), 4);
    assert_eq!(read_body(within, 4).await.unwrap(), Bytes::from_static(b"1234"));
}

/// A body that breaks while it is read is the client's bad request, not an oversized one.
#[tokio::test]
async fn a_body_that_fails_to_read_is_an_invalid_request() {
    let broken = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset");
    let frames = futures_util::stream::iter([Err::<http_body::Frame<Bytes>, _>(broken)]);
    let e = read_body(http_body_util::StreamBody::new(frames), 4).await.unwrap_err();
    assert!(matches!(&e, FrontError::InvalidRequest(m) if m.contains("reset")), "{e:?}");
}

#[test]
fn retry_fields_are_read_from_the_params_text() {
    let p =
        Params::of_value(&json!({"inputResponses": {"a": 1}, "requestState": "s", "name": "echo"})).unwrap();
    assert_eq!(input_responses(&p).unwrap(), Some(json!({"a": 1}).as_object().cloned().unwrap()));
    assert_eq!(request_state(&p).unwrap().as_deref(), Some("s"));
    let none = Params::of_value(&json!({"inputResponses": null, "requestState": null})).unwrap();
    assert_eq!((input_responses(&none).unwrap(), request_state(&none).unwrap()), (None, None));
    let wrong = Params::of_value(&json!({"inputResponses": [1], "requestState": 3})).unwrap();
    // Refused as the front answers them: invalid params.
    assert!(matches!(input_responses(&wrong).map_err(FrontError::from), Err(FrontError::InvalidParams(_))));
    assert!(matches!(request_state(&wrong).map_err(FrontError::from), Err(FrontError::InvalidParams(_))));
}

#[test]
fn an_encoded_tool_name_becomes_the_upstreams_and_a_plain_one_stays() {
    let upstream = "files.read/v2";
    let mut encoded = Params::of_value(&json!({"name": crate::schema::name::encode(upstream)})).unwrap();
    upstream_tool_name(&mut encoded);
    assert_eq!(encoded.tree().unwrap()["name"], upstream);
    assert_eq!(upstream_raw(&encoded).as_str(), r#"{"name":"files.read/v2"}"#);
    let mut plain = Params::of_value(&json!({"name": "echo"})).unwrap();
    upstream_tool_name(&mut plain);
    assert_eq!(plain.tree().unwrap()["name"], "echo");
}

/// A front state over a demo server, with `extra` TOML after its `[upstream]` table.
struct Front {
    state: Arc<FrontState>,
    _demo: DemoHandle,
}

fn front(extra: &str) -> Front {
    let demo = spawn_loopback(DemoOptions::default()).expect("demo");
    let state = state_of(&format!("[upstream]\nurl = \"{}\"\n{extra}", demo.url()));
    Front { state, _demo: demo }
}

/// The front state the gateway builds from this configuration.
fn state_of(toml: &str) -> Arc<FrontState> {
    let cfg = crate::config::Config::from_toml(toml).expect("config");
    let metrics = Arc::new(Metrics::new().expect("metrics"));
    let pool = Arc::new(crate::upstream::Pool::new(crate::app::upstream_settings(&cfg, None)).expect("pool"));
    Arc::new(crate::app::front_state(&cfg, &metrics, &pool).expect("front state"))
}

/// Sends one 2026-07-28 request of `method` (`name` mirrored in `Mcp-Name`); its status and body.
async fn send(front: &Front, method: &str, name: Option<&str>, params: Value) -> (StatusCode, Value) {
    let (status, _, body) = send_as(front, BOTH, method, name, params).await;
    (status, body)
}

const BOTH: &str = "application/json, text/event-stream";

/// [`send`] with this `Accept`; also the response's content type. A `_meta` in `params` is
/// kept beside the envelope's fields, and a stream's body is its last event.
async fn send_as(
    front: &Front,
    accept: &str,
    method: &str,
    name: Option<&str>,
    mut params: Value,
) -> (StatusCode, String, Value) {
    let mut meta = serde_json::Map::new();
    meta.insert(crate::protocol::meta::PROTOCOL_VERSION.to_owned(), json!("2026-07-28"));
    meta.insert(crate::protocol::meta::CLIENT_CAPABILITIES.to_owned(), json!({}));
    if let Some(Value::Object(extra)) = params.get_mut("_meta").map(Value::take) {
        meta.extend(extra);
    }
    params["_meta"] = Value::Object(meta);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
    send_text(front, accept, method, name, body).await
}

/// Posts `body` as it is, as a 2026-07-28 request of `method` (`name` in `Mcp-Name`); its
/// status, content type and JSON body (a stream's: its last event).
async fn send_text(
    front: &Front,
    accept: &str,
    method: &str,
    name: Option<&str>,
    body: String,
) -> (StatusCode, String, Value) {
    let mut request = Request::post("/mcp")
        .header("content-type", "application/json")
        .header("accept", accept)
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if let Some(name) = name {
        request = request.header("mcp-name", name);
    }
    let response = front.state.handle(request.body(Full::new(Bytes::from(body))).expect("request")).await;
    let status = response.status();
    let content_type =
        response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    let bytes = response.into_body().collect().await.expect("body").to_bytes();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let json =
        text.lines().filter_map(|l| l.strip_prefix("data: ")).next_back().map_or(text.clone(), str::to_owned);
    let body = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"));
    (status, content_type, body)
}

#[tokio::test]
async fn discover_answers_with_the_fronts_versions_and_the_servers_capabilities() {
    let front = front("");
    let (status, body) = send(&front, "server/discover", None, json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let result = &body["result"];
    assert_eq!(result["supportedVersions"], json!(crate::protocol::FRONT_SUPPORTED_VERSIONS));
    assert!(result["capabilities"]["tools"].is_object(), "{body}");
}

#[tokio::test]
async fn a_list_is_relayed_with_the_upstreams_items() {
    let front = front("");
    let (status, body) = send(&front, "tools/list", None, json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let names: Vec<&str> = body["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("a tools list: {body}"))
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"echo"), "{names:?}");
    assert_eq!(body["result"]["resultType"], "complete");
}

#[tokio::test]
async fn a_tools_limit_counts_that_tools_calls_only() {
    let front = front("[limits.tools]\necho = { rate_per_sec = 0.001, burst = 9 }\n");
    let call = json!({"name": "echo", "arguments": {"message": "hi"}});
    for n in 1..=9 {
        let (status, body) = send(&front, "tools/call", Some("echo"), call.clone()).await;
        assert_eq!(status, StatusCode::OK, "call {n} is within the burst: {body}");
    }
    let (status, body) = send(&front, "tools/call", Some("echo"), call.clone()).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    let other = json!({"name": "bump_counter", "arguments": {}});
    let (status, body) = send(&front, "tools/call", Some("bump_counter"), other).await;
    assert_eq!(status, StatusCode::OK, "another tool has no limit: {body}");
}

#[tokio::test]
async fn only_a_first_read_of_a_resource_carries_the_cache_hints() {
    let front = front("[front]\ncache_ttl_ms = 1234\n");
    let uri = "demo://counter";
    let (status, read) = send(&front, "resources/read", Some(uri), json!({"uri": uri})).await;
    assert_eq!(status, StatusCode::OK, "{read}");
    assert_eq!(read["result"]["ttlMs"], 1234, "{read}");
    let call = json!({"name": "echo", "arguments": {"message": "hi"}});
    let (_, called) = send(&front, "tools/call", Some("echo"), call).await;
    assert_eq!(called["result"]["resultType"], "complete", "{called}");
    assert!(called["result"].get("ttlMs").is_none(), "a tool's result is not cacheable: {called}");
}

#[tokio::test]
async fn progress_streams_only_to_a_client_that_accepts_a_stream() {
    let front = front("");
    let call = || json!({"name": "count_down", "arguments": {"steps": 2}, "_meta": {"progressToken": 7}});
    let (status, content_type, body) =
        send_as(&front, "application/json", "tools/call", Some("count_down"), call()).await;
    assert_eq!((status, content_type.as_str()), (StatusCode::OK, "application/json"), "{body}");
    assert_eq!(body["result"]["resultType"], "complete", "{body}");
    let (status, content_type, body) = send_as(&front, BOTH, "tools/call", Some("count_down"), call()).await;
    assert_eq!((status, content_type.as_str()), (StatusCode::OK, "text/event-stream"), "{body}");
    assert_eq!(body["result"]["resultType"], "complete", "{body}");
}

#[tokio::test]
async fn a_call_of_an_unseen_tool_lists_the_upstreams_tools_first() {
    let front = front("");
    assert!(front.state.tool_headers().is_empty());
    let call = json!({"name": "echo", "arguments": {"message": "hi"}});
    let (status, body) = send(&front, "tools/call", Some("echo"), call).await;
    assert_eq!((status, &body["result"]["resultType"]), (StatusCode::OK, &json!("complete")), "{body}");
    assert!(!front.state.tool_headers().is_empty(), "the catalogue learnt the upstream's tools");
}

#[tokio::test]
async fn a_retry_carrying_a_task_id_needs_the_tasks_extension() {
    let front = front("[tasks]\nenabled = true\n");
    let state = format!("{}unknown", crate::mrtr::task_id::TASK_ID_PREFIX);
    let retry =
        json!({"name": "echo", "arguments": {"message": "hi"}, "requestState": state, "inputResponses": {}});
    let (_, body) = send(&front, "tools/call", Some("echo"), retry).await;
    assert_eq!(body["error"]["code"], json!(crate::protocol::codes::MISSING_CLIENT_CAPABILITY), "{body}");
}

/// Posts `body` as a 2026-07-28 `tools/call` of `echo`; its status and JSON body.
async fn post_raw(front: &Front, body: &str) -> (StatusCode, Value) {
    post_raw_as(front, "tools/call", Some("echo"), body).await
}

/// Posts `body` as a 2026-07-28 request of `method` (`name` in `Mcp-Name`).
async fn post_raw_as(front: &Front, method: &str, name: Option<&str>, body: &str) -> (StatusCode, Value) {
    let (status, _, body) = send_text(front, BOTH, method, name, body.to_owned()).await;
    (status, body)
}

#[tokio::test]
async fn params_naming_a_member_twice_are_refused_and_others_go_as_written() {
    let front = front("");
    let meta = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;
    let call =
        |params: &str| format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{{params}}}}}"#);
    for twice in [
        format!(r#""name":"echo","name":"other","arguments":{{}},{meta}"#),
        format!(r#""name":"echo","arguments":{{}},{meta},"_meta":{{}}"#),
        r#""name":"echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#.to_owned(),
    ] {
        let (status, body) = post_raw(&front, &call(&twice)).await;
        assert_eq!((status, body["error"]["code"].as_i64()), (StatusCode::BAD_REQUEST, Some(-32602)), "{body}");
        assert!(body["error"]["message"].as_str().unwrap().contains("more than once"), "{body}");
    }
    // An escaped spelling of the message is the client's text, read by the server as it is.
    let (status, body) =
        post_raw(&front, &call(&format!(r#""name":"ec\u0068o","arguments":{{"message":"h\u0069"}},{meta}"#)))
            .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["result"]["content"][0]["text"], "Echo: hi", "{body}");
}

#[tokio::test]
async fn params_no_tree_can_hold_are_invalid_where_a_tree_is_read() {
    let front = front("");
    let meta = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;
    let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
    for member in [deep.as_str(), "1e400"] {
        let body =
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{"x":{member},{meta}}}}}"#);
        let (status, body) = post_raw_as(&front, "tools/list", None, &body).await;
        assert_eq!(
            (status, body["error"]["code"].as_i64()),
            (StatusCode::BAD_REQUEST, Some(-32602)),
            "{body}"
        );
        assert!(body["error"]["message"].as_str().unwrap().contains("cannot be read"), "{body}");
    }
}
