//! What a client sends comes back bounded, through a running gateway: a huge `Mcp-Name` is
//! quoted cut short in the `-32020` message, a huge or unsafe `x-request-id` is replaced by
//! one of the gateway's, and a JSON-RPC batch is refused in the client's terms, not serde's.

use http::StatusCode;
use mrtr_gateway::defaults::{MAX_CLIENT_REQUEST_ID_BYTES, MAX_QUOTED_CHARS};
use serde_json::json;

use crate::common::{Harness, Reply, TestResult};

fn request_id(reply: &Reply) -> String {
    reply.headers.get("x-request-id").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned()
}

#[tokio::test]
async fn a_300_kb_mcp_name_is_quoted_cut_short() -> TestResult {
    let h = Harness::start().await?;
    let huge = "n".repeat(300 * 1024);
    let reply = h.client.call_tool("echo", json!({"message": "m"})).header("mcp-name", &huge).send().await?;
    let message = reply.expect_error(StatusCode::BAD_REQUEST, -32020)?;
    assert!(message.len() < 2 * MAX_QUOTED_CHARS + 100, "{} bytes", message.len());
    assert!(message.starts_with("header mismatch: Mcp-Name header \"nnn"), "{message}");
    assert!(message.ends_with("…\" does not match params.name \"echo\""), "{message}");
    assert_eq!(h.demo.stats.tool_calls("echo"), 0);
    h.stop().await
}

#[tokio::test]
async fn a_huge_or_unsafe_request_id_is_replaced_and_a_plain_one_kept() -> TestResult {
    let h = Harness::start().await?;
    let echo = || h.client.call_tool("echo", json!({"message": "m"}));
    let kept = echo().header("x-request-id", "trace-4f1c.7").send().await?;
    assert_eq!(request_id(&kept), "trace-4f1c.7");
    let huge = "r".repeat(60 * 1024);
    for sent in [huge.as_str(), "with space", "deadbeef-42"] {
        let reply = echo().header("x-request-id", sent).send().await?;
        assert_eq!(reply.text()?, "Echo: m", "the request itself is served");
        let id = request_id(&reply);
        assert!(!id.is_empty() && id != sent && id.len() <= MAX_CLIENT_REQUEST_ID_BYTES, "{id:?}");
    }
    h.stop().await
}

#[tokio::test]
async fn a_batch_is_refused_naming_the_cause() -> TestResult {
    let h = Harness::start().await?;
    let batch = json!([{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}]);
    let reply = h.client.post_bytes("tools/list", serde_json::to_vec(&batch)?).await?;
    let message = reply.expect_error(StatusCode::BAD_REQUEST, -32600)?;
    assert_eq!(message, "invalid request: JSON-RPC batches are not supported: send one message per POST");
    let typed = json!({"jsonrpc": "2.0", "id": 1, "method": 7});
    let reply = h.client.post_bytes("tools/list", serde_json::to_vec(&typed)?).await?;
    assert_eq!(
        reply.expect_error(StatusCode::BAD_REQUEST, -32600)?,
        "invalid request: `method` must be a string"
    );
    h.stop().await
}
