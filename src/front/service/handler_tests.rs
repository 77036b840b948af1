//! The handler driven whole, in process, against the demo upstream: what each method's answer
//! carries, so that a handler path that answers with nothing, or skips a rule, fails here and
//! not only in the integration suite.

use http_body_util::{BodyExt, Full};
use serde_json::json;

use super::*;
use crate::demo::{spawn_loopback, DemoHandle, DemoOptions};

/// A front state over a demo server, with `extra` TOML after its `[upstream]` table.
struct Front {
    state: Arc<FrontState>,
    _demo: DemoHandle,
}

fn front(extra: &str) -> Front {
    let demo = spawn_loopback(DemoOptions::default()).expect("demo");
    let toml = format!("[upstream]\nurl = \"{}\"\n{extra}", demo.url());
    let cfg = crate::config::Config::from_toml(&toml).expect("config");
    let metrics = Arc::new(Metrics::new().expect("metrics"));
    let pool = Arc::new(crate::upstream::Pool::new(crate::app::upstream_settings(&cfg, None)).expect("pool"));
    let state = Arc::new(crate::app::front_state(&cfg, &metrics, &pool).expect("front state"));
    Front { state, _demo: demo }
}

/// Sends one 2026-07-28 request of `method` (`name` mirrored in `Mcp-Name`); its status and body.
async fn send(front: &Front, method: &str, name: Option<&str>, mut params: Value) -> (StatusCode, Value) {
    params["_meta"] = serde_json::json!({
        crate::protocol::meta::PROTOCOL_VERSION: "2026-07-28",
        crate::protocol::meta::CLIENT_CAPABILITIES: {},
    });
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
    let mut request = Request::post("/mcp")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if let Some(name) = name {
        request = request.header("mcp-name", name);
    }
    let response = front.state.handle(request.body(Full::new(Bytes::from(body))).expect("request")).await;
    let status = response.status();
    let bytes = response.into_body().collect().await.expect("body").to_bytes();
    let body =
        serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&bytes)));
    (status, body)
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
