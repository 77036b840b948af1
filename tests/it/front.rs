//! The 2026-07-28 surface itself: mirrored headers (-32020), the `_meta` envelope (-32602), the
//! version (-32022), removed methods (404, -32601), HTTP methods, `Origin`, the body limit, and
//! ids echoed exactly.

use http::{Method, StatusCode};
use serde_json::json;

use crate::common::{Harness, Setup, TestResult};

#[tokio::test]
async fn mirrored_headers_must_match_the_body() -> TestResult {
    let h = Harness::start().await?;
    let echo = || h.client.call_tool("echo", json!({"message": "hi"}));
    let broken = [
        echo().without_header("mcp-protocol-version"),
        echo().header("mcp-protocol-version", "2025-11-25"),
        echo().without_header("mcp-method"),
        echo().header("mcp-method", "tools/list"),
        echo().without_header("mcp-name"),
        echo().header("mcp-name", "greet"),
    ];
    for call in broken {
        let message = call.send().await?.expect_error(StatusCode::BAD_REQUEST, -32020)?;
        assert!(message.contains("header"), "{message}");
    }
    assert_eq!(h.demo.stats.tool_calls("echo"), 0);
    // The base64 form of a header value is decoded before comparing.
    let encoded = echo().header("mcp-name", "=?base64?ZWNobw==?=").send().await?;
    assert_eq!(encoded.text()?, "Echo: hi");
    h.stop().await
}

#[tokio::test]
async fn missing_meta_fields_are_invalid_params() -> TestResult {
    let h = Harness::start().await?;
    for field in ["io.modelcontextprotocol/protocolVersion", "io.modelcontextprotocol/clientCapabilities"] {
        let reply = h.client.call_tool("echo", json!({"message": "hi"})).without_meta(field).send().await?;
        let message = reply.expect_error(StatusCode::BAD_REQUEST, -32602)?;
        assert!(message.contains(field), "{message}");
    }
    h.stop().await
}

#[tokio::test]
async fn an_unsupported_version_names_the_supported_ones() -> TestResult {
    let h = Harness::start().await?;
    let reply = h
        .client
        .call_tool("echo", json!({"message": "hi"}))
        .meta("io.modelcontextprotocol/protocolVersion", json!("2025-11-25"))
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await?;
    reply.expect_error(StatusCode::BAD_REQUEST, -32022)?;
    let data = &reply.error()?["data"];
    assert_eq!(data["supported"], json!(["2026-07-28"]));
    assert_eq!(data["requested"], "2025-11-25");
    h.stop().await
}

#[tokio::test]
async fn removed_methods_are_not_found() -> TestResult {
    let h = Harness::start().await?;
    for method in ["initialize", "ping", "logging/setLevel", "resources/subscribe"] {
        let reply = h.client.request(method).send().await?;
        reply.expect_error(StatusCode::NOT_FOUND, -32601)?;
    }
    h.stop().await
}

#[tokio::test]
async fn only_post_is_allowed() -> TestResult {
    let h = Harness::start().await?;
    for method in [Method::GET, Method::DELETE] {
        let reply = h.client.bare(method.clone()).await?;
        assert_eq!(reply.status, StatusCode::METHOD_NOT_ALLOWED, "{method}");
    }
    h.stop().await
}

#[tokio::test]
async fn a_foreign_origin_is_forbidden() -> TestResult {
    let h = Harness::start().await?;
    let echo = || h.client.call_tool("echo", json!({"message": "hi"}));
    let foreign = echo().header("origin", "https://evil.example").send().await?;
    assert_eq!(foreign.status, StatusCode::FORBIDDEN);
    let local = echo().header("origin", "http://localhost:3000").send().await?;
    assert_eq!(local.text()?, "Echo: hi");
    h.stop().await
}

#[tokio::test]
async fn a_body_over_the_limit_is_refused() -> TestResult {
    let h = Setup::new().set("front", "max_body_bytes = 4096").start().await?;
    let call = h.client.call_tool("echo", json!({"message": "x".repeat(16 * 1024)}));
    let reply = h.client.post_bytes("tools/call", serde_json::to_vec(&call.body())?).await?;
    assert_eq!(reply.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(h.demo.stats.tool_calls("echo"), 0);
    h.stop().await
}

#[tokio::test]
async fn ids_are_echoed_exactly() -> TestResult {
    let h = Harness::start().await?;
    for id in [json!(0), json!("req-ü-1"), json!(9_007_199_254_740_991_i64)] {
        let reply = h.client.call_tool("echo", json!({"message": "id"})).id(id.clone()).send().await?;
        assert_eq!(reply.body["id"], id);
        assert_eq!(reply.text()?, "Echo: id");
    }
    let error = h.client.request("ping").id(json!(0)).send().await?;
    assert_eq!(error.body["id"], 0);
    h.stop().await
}

#[tokio::test]
async fn notifications_are_accepted_and_garbage_is_a_parse_error() -> TestResult {
    let h = Harness::start().await?;
    let note = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}});
    let accepted = h.client.post_bytes("notifications/cancelled", serde_json::to_vec(&note)?).await?;
    assert_eq!(accepted.status, StatusCode::ACCEPTED);
    let garbage = h.client.post_bytes("tools/call", b"{\"jsonrpc\": \"2.0\", ".to_vec()).await?;
    garbage.expect_error(StatusCode::BAD_REQUEST, -32700)?;
    h.stop().await
}
