//! Claims of the configuration reference (docs/src/configuration.md) about the bounds of a request
//! chain and of a request, each set to a non-default value and met through a running gateway:
//! `mrtr.max_questions_per_round`, `mrtr.max_answer_bytes`, `state.max_token_bytes` and
//! `mrtr.total_timeout_ms` (for a plain JSON answer and for a streamed run).

use http::StatusCode;
use serde_json::json;

use super::{everything, form_only};
use crate::common::answers::NAME;
use crate::common::{answer_all, eventually, Setup, TestResult};

#[tokio::test]
async fn more_questions_than_max_questions_per_round_is_an_error_and_cancels_the_call() -> TestResult {
    let h = Setup::new().set("mrtr", "max_questions_per_round = 1").start().await?;
    // One question is within the bound; asking it ends (cancels) that upstream call.
    h.client.call_tool("greet", json!({})).caps(form_only()).send().await?.input_required()?;
    let stats = h.demo.stats.clone();
    eventually("the round's upstream call to be cancelled", || stats.calls_stopped() == 1).await?;
    // `ask_three` sends two questions on its POST stream at once, and a third on the GET stream.
    let reply = h.client.call_tool("ask_three", json!({})).caps(everything()).send().await?;
    let message = reply.expect_error(StatusCode::BAD_REQUEST, -32602)?;
    assert_eq!(message, "too many questions in one round (the limit is 1)");
    eventually("the refused call to be cancelled upstream", || stats.calls_stopped() == 2).await?;
    let series = r#"mrtr_gateway_requests_total{method="tools/call",outcome="too_many_questions"}"#;
    assert_eq!(h.metric(series), 1.0);
    h.stop().await
}

#[tokio::test]
async fn an_answer_over_max_answer_bytes_is_refused_and_a_smaller_one_accepted() -> TestResult {
    let h = Setup::new().set("mrtr", "max_answer_bytes = 128").start().await?;
    let call = || h.client.call_tool("greet", json!({})).caps(form_only());
    let (requests, state) = call().send().await?.input_required()?;
    let key = requests.keys().next().cloned().unwrap_or_default();
    let long = "x".repeat(200);
    let big = json!({ key.clone(): {"action": "accept", "content": {"name": long}} });
    let reply = call().state(&state).responses(big).send().await?;
    let message = reply.expect_error(StatusCode::BAD_REQUEST, -32602)?;
    assert!(message.contains("at most 128 are accepted"), "{message}");
    assert_eq!(h.demo.stats.tool_calls("greet"), 1, "a refused answer never reaches the upstream");
    let done = call().state(&state).responses(answer_all(&requests)).send().await?;
    assert_eq!(done.text()?, format!("Hello, {NAME}!"));
    h.stop().await
}

#[tokio::test]
async fn a_state_over_max_token_bytes_is_refused_as_too_large() -> TestResult {
    const LIMIT: usize = 2048;
    let h = Setup::new().set("state", &format!("max_token_bytes = {LIMIT}")).start().await?;
    let call = || h.client.call_tool("greet", json!({})).caps(form_only());
    let (requests, state) = call().send().await?.input_required()?;
    assert!(state.len() <= LIMIT, "the gateway sealed a token of {} bytes", state.len());
    // Garbage under the limit is refused as malformed, garbage over it as too large: the bound
    // is checked first, and it is the configured one.
    for (len, reason) in [(LIMIT - 8, "malformed"), (LIMIT + 1, "too_large")] {
        let token = format!("v1.{}", "!".repeat(len - 3));
        let reply = call().state(&token).responses(answer_all(&requests)).send().await?;
        let message = reply.expect_error(StatusCode::BAD_REQUEST, -32602)?;
        assert_eq!(message, "Invalid or expired requestState");
        let series = format!(r#"mrtr_gateway_state_rejections_total{{reason="{reason}"}}"#);
        assert_eq!(h.metric(&series), 1.0, "{len} bytes");
    }
    let done = call().state(&state).responses(answer_all(&requests)).send().await?;
    assert_eq!(done.text()?, format!("Hello, {NAME}!"));
    h.stop().await
}

/// Answers that would make the next round's state larger than `state.max_token_bytes` end the
/// chain with their own message, and are not counted as a client's bad state.
#[tokio::test]
async fn answers_too_large_to_seal_end_the_chain_with_their_own_error() -> TestResult {
    const LIMIT: usize = 2048;
    let h = Setup::new().set("state", &format!("max_token_bytes = {LIMIT}")).start().await?;
    let call = || h.client.call_tool("confirm_twice", json!({})).caps(form_only());
    let (requests, state) = call().send().await?.input_required()?;
    let key = requests.keys().next().cloned().unwrap_or_default();
    // Well under `max_answer_bytes`, but the journal that carries it cannot fit in the state.
    let long_name = "n".repeat(LIMIT);
    let answers = json!({ key: {"action": "accept", "content": {"name": long_name}} });
    let reply = call().state(&state).responses(answers).send().await?;
    let message = reply.expect_error(StatusCode::BAD_REQUEST, -32602)?;
    assert_eq!(
        message,
        format!("the conversation's state would exceed the gateway's limit of {LIMIT} bytes")
    );
    let series = r#"mrtr_gateway_requests_total{method="tools/call",outcome="state_too_large"}"#;
    assert_eq!(h.metric(series), 1.0);
    for reason in ["too_large", "seal_too_large"] {
        let series = format!(r#"mrtr_gateway_state_rejections_total{{reason="{reason}"}}"#);
        assert_eq!(h.metric(&series), 0.0, "{reason}");
    }
    h.stop().await
}

/// A total bound far below the round bound (60 s) and the front's backstop (over 2 minutes), so
/// only `total_timeout_ms` can end these calls within the suite's wait.
fn total_timeout() -> Setup {
    Setup::new().set("mrtr", "total_timeout_ms = 500")
}

#[tokio::test]
async fn total_timeout_ms_ends_a_call_the_upstream_never_answers() -> TestResult {
    let h = total_timeout().start().await?;
    let reply = h.client.call_tool("hang", json!({})).send().await?;
    let message = reply.expect_error(StatusCode::GATEWAY_TIMEOUT, -32603)?;
    assert_eq!(message, "upstream server timed out");
    let stats = h.demo.stats.clone();
    eventually("the hung call to be cancelled upstream", || stats.calls_stopped() >= 1).await?;
    // The upstream is told which bound ended its call: the total one, not the round's silence.
    let reason = stats.last_cancel_reason();
    assert!(reason.contains("the request took longer than 500ms"), "{reason}");
    let series = r#"mrtr_gateway_requests_total{method="tools/call",outcome="upstream_timeout"}"#;
    assert_eq!(h.metric(series), 1.0);
    h.stop().await
}

#[tokio::test]
async fn total_timeout_ms_ends_a_streamed_run() -> TestResult {
    const STEPS: usize = 100;
    let h = total_timeout().start().await?;
    let call = h.client.call_tool("count_down", json!({"steps": STEPS, "delay_ms": 50})).progress(json!(3));
    let reply = call.send().await?;
    assert_eq!((reply.status, reply.content_type.as_str()), (StatusCode::OK, "text/event-stream"));
    let (last, notes) = reply.events.split_last().unwrap_or((&serde_json::Value::Null, &[]));
    assert!(!notes.is_empty() && notes.len() < STEPS, "{} progress events", notes.len());
    assert_eq!(last["error"]["code"], -32603, "{last}");
    assert_eq!(last["error"]["message"], "upstream server timed out", "{last}");
    let stats = h.demo.stats.clone();
    eventually("the streamed call to be cancelled upstream", || stats.calls_stopped() >= 1).await?;
    h.stop().await
}
