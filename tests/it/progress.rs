//! Progress: a request with a `progressToken` that accepts SSE gets the upstream's progress
//! notifications, carrying the client's own token, and the result as the last event.

use http::StatusCode;
use serde_json::json;

use http_body_util::BodyExt;

use crate::common::legacy::{ScriptedLegacy, BURST_STEPS};
use crate::common::{bounded, eventually, Harness, Setup, TestResult};

/// Calls of the burst test: the race it pins down lost progress in about one call in ten.
const BURST_CALLS: usize = 200;

#[tokio::test]
async fn count_down_streams_progress_then_the_result() -> TestResult {
    let h = Harness::start().await?;
    let reply = h
        .client
        .call_tool("count_down", json!({"steps": 3, "delay_ms": 20}))
        .progress(json!("progress-token-9"))
        .id(json!(77))
        .send()
        .await?;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.content_type, "text/event-stream");
    let (last, notes) = reply
        .events
        .split_last()
        .ok_or_else(|| crate::common::HarnessError::Unexpected("no events".into()))?;
    assert_eq!(notes.len(), 3, "{:?}", reply.events);
    for (step, note) in notes.iter().enumerate() {
        assert_eq!(note["method"], "notifications/progress");
        assert_eq!(note["params"]["progressToken"], "progress-token-9");
        assert_eq!(note["params"]["progress"], json!(step + 1));
        assert_eq!(note["params"]["total"], 3);
    }
    assert_eq!(last["id"], 77);
    assert_eq!(last["result"]["resultType"], "complete");
    assert_eq!(reply.text()?, "Done after 3 steps");
    // The stream's real outcome is what the request counter records.
    let complete = r#"mrtr_gateway_requests_total{method="tools/call",outcome="complete"}"#;
    eventually("the streamed request to be counted as complete", || h.metric(complete) == 1.0).await?;
    assert_eq!(h.metric(r#"mrtr_gateway_requests_total{method="tools/call",outcome="streamed"}"#), 0.0);
    h.stop().await
}

#[tokio::test]
async fn without_a_token_the_reply_is_plain_json() -> TestResult {
    let h = Harness::start().await?;
    let reply = h.client.call_tool("count_down", json!({"steps": 2, "delay_ms": 1})).send().await?;
    assert_eq!(reply.content_type, "application/json");
    assert_eq!(reply.text()?, "Done after 2 steps");
    h.stop().await
}

#[tokio::test]
async fn closing_the_stream_cancels_the_upstream_call() -> TestResult {
    let h = Harness::start().await?;
    let call = h.client.call_tool("count_down", json!({"steps": 50, "delay_ms": 50})).progress(json!(1));
    let response = call.open().await?;
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut body = response.into_body();
    let first = bounded("the first progress event", body.frame()).await?;
    assert!(first.is_some_and(|frame| frame.is_ok()), "a first event arrived");
    // Walking away from the stream is how a 2026-07-28 client cancels.
    drop(body);
    let stats = h.demo.stats.clone();
    eventually("the demo to stop the call", || stats.calls_stopped() >= 1).await?;
    h.stop().await
}

#[tokio::test]
async fn progress_sent_with_the_result_in_one_write_is_never_lost() -> TestResult {
    let upstream = ScriptedLegacy::spawn().await?;
    let (gateway, client) = Setup::new().attach_url(&upstream.url()).await?;
    for call in 0..BURST_CALLS {
        let reply = client.call_tool("burst_progress", json!({})).progress(json!(call)).send().await?;
        assert_eq!(reply.content_type, "text/event-stream", "call {call}: {:?}", reply.events);
        let (last, notes) = reply
            .events
            .split_last()
            .ok_or_else(|| crate::common::HarnessError::Unexpected("no events".into()))?;
        let steps: Vec<_> = notes.iter().map(|n| n["params"]["progress"].clone()).collect();
        assert_eq!(steps, (1..=BURST_STEPS).map(|s| json!(s)).collect::<Vec<_>>(), "call {call}");
        assert!(notes.iter().all(|n| n["params"]["progressToken"] == json!(call)), "call {call}");
        assert_eq!(last["result"]["resultType"], "complete", "call {call}");
        assert_eq!(reply.text()?, format!("burst of {BURST_STEPS}"));
    }
    gateway.shutdown().await;
    Ok(())
}
