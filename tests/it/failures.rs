//! Upstream failures: a server that drops its stream mid-call and one that never answers. The
//! client gets a clear JSON-RPC error in bounded time, the hung call is cancelled upstream, and
//! the gateway keeps serving afterwards.

use std::time::{Duration, Instant};

use http::StatusCode;
use serde_json::json;

use crate::common::{eventually, Harness, Setup, TestResult};

#[tokio::test]
async fn an_upstream_that_dies_mid_call_is_a_clear_error() -> TestResult {
    let h = Harness::start().await?;
    let reply = h.client.call_tool("die", json!({})).send().await?;
    let message = reply.expect_error(StatusCode::BAD_GATEWAY, -32603)?;
    assert!(message.contains("upstream"), "{message}");
    assert_eq!(h.demo.stats.tool_calls("die"), 1);
    let after = h.client.call_tool("echo", json!({"message": "still here"})).send().await?;
    assert_eq!(after.text()?, "Echo: still here");
    h.stop().await
}

#[tokio::test]
async fn an_upstream_that_hangs_times_out_and_is_cancelled() -> TestResult {
    let h = Setup::new().set("mrtr", "round_timeout_ms = 400").start().await?;
    let started = Instant::now();
    let reply = h.client.call_tool("hang", json!({})).send().await?;
    let message = reply.expect_error(StatusCode::GATEWAY_TIMEOUT, -32603)?;
    assert!(message.contains("timed out"), "{message}");
    assert!(started.elapsed() < Duration::from_secs(3), "took {:?}", started.elapsed());
    let stats = h.demo.stats.clone();
    eventually("the demo to see the cancel", || stats.calls_stopped() >= 1).await?;
    assert_eq!(
        h.metric("mrtr_gateway_requests_total{method=\"tools/call\",outcome=\"upstream_timeout\"}"),
        1.0
    );
    let after = h.client.call_tool("echo", json!({"message": "next"})).send().await?;
    assert_eq!(after.text()?, "Echo: next");
    h.stop().await
}
