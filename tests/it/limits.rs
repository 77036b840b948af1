//! `[limits]` through a running gateway: a principal over its limit gets 429 with `Retry-After`
//! and an error naming the limit, a per-tool limit refuses only that tool, and every round of
//! an MRTR chain (a replay of one sealed state too) takes a token.

use http::StatusCode;
use serde_json::json;

use super::form_only;
use crate::common::answers::NAME;
use crate::common::{answer_all, Harness, HarnessError, Reply, Setup, TestResult};

/// A bucket that refills one token in about 17 minutes: what a test spends stays spent.
const SLOW: &str = "rate_per_sec = 0.001";

fn retry_after(reply: &Reply) -> Option<u64> {
    reply.headers.get(http::header::RETRY_AFTER)?.to_str().ok()?.parse().ok()
}

async fn echo(h: &Harness) -> TestResult<Reply> {
    h.client.call_tool("echo", json!({"message": "m"})).send().await
}

#[tokio::test]
async fn a_principal_over_its_limit_gets_429_with_retry_after_naming_the_limit() -> TestResult {
    let h = Setup::new().set("limits", &format!("principal = {{ {SLOW}, burst = 2 }}")).start().await?;
    assert_eq!(echo(&h).await?.text()?, "Echo: m");
    // Any method takes a token of the principal's bucket, not only calls.
    h.client.request("tools/list").send().await?.result()?;
    let refused = echo(&h).await?;
    let message = refused.expect_error(StatusCode::TOO_MANY_REQUESTS, -32000)?;
    assert_eq!(message, "rate limit exceeded: principal");
    assert_eq!(refused.error()?["data"]["limit"], "principal");
    // 1000 s until the next token, rounded up; a slow machine may have spent a few of them.
    let secs = retry_after(&refused).unwrap_or_default();
    assert!((990..=1000).contains(&secs), "Retry-After {secs}");
    assert_eq!(refused.error()?["data"]["retryAfterSeconds"], json!(secs));
    assert_eq!(h.metric(r#"mrtr_gateway_rate_limited_total{limit="principal"}"#), 1.0);
    assert_eq!(h.metric(r#"mrtr_gateway_requests_total{method="tools/call",outcome="rate_limited"}"#), 1.0);
    assert_eq!(h.demo.stats.tool_calls("echo"), 1, "a refused call never reaches the upstream");
    h.stop().await
}

#[tokio::test]
async fn a_tool_limit_refuses_that_tool_only() -> TestResult {
    let h =
        Setup::new().set("limits", "tools = { echo = { rate_per_sec = 0.001, burst = 1 } }").start().await?;
    assert_eq!(echo(&h).await?.text()?, "Echo: m");
    let refused = echo(&h).await?;
    let message = refused.expect_error(StatusCode::TOO_MANY_REQUESTS, -32000)?;
    assert_eq!(message, r#"rate limit exceeded: tool "echo""#);
    assert_eq!(
        refused.error()?["data"],
        json!({"limit": "tool", "tool": "echo", "retryAfterSeconds": retry_after(&refused)})
    );
    // Other tools and other methods are not limited.
    h.client.call_tool("greet", json!({})).caps(form_only()).send().await?.input_required()?;
    h.client.request("tools/list").send().await?.result()?;
    assert_eq!(h.metric(r#"mrtr_gateway_rate_limited_total{limit="tool:echo"}"#), 1.0);
    assert_eq!(h.metric(r#"mrtr_gateway_rate_limited_total{limit="principal"}"#), 0.0);
    h.stop().await
}

/// The default burst holds one whole chain (a first call and a retry per round): with
/// `mrtr.max_rounds = 2` it is 3, so a chain of two rounds completes and the next call is refused.
#[tokio::test]
async fn every_round_of_a_chain_takes_a_token_and_the_default_burst_holds_one_chain() -> TestResult {
    let limits = format!("principal = {{ {SLOW} }}\ntools = {{ confirm_twice = {{ {SLOW} }} }}");
    let h = Setup::new().set("mrtr", "max_rounds = 2").set("limits", &limits).start().await?;
    let call = || h.client.call_tool("confirm_twice", json!({})).caps(form_only());
    // Three requests: the first round, and two retries carrying requestState.
    let (q1, s1) = call().send().await?.input_required()?;
    let (q2, s2) = call().state(&s1).responses(answer_all(&q1)).send().await?.input_required()?;
    let done = call().state(&s2).responses(answer_all(&q2)).send().await?;
    assert_eq!(done.text()?, format!("Confirmed {NAME}: true"));
    let refused = echo(&h).await?;
    assert_eq!(
        refused.expect_error(StatusCode::TOO_MANY_REQUESTS, -32000)?,
        "rate limit exceeded: principal"
    );
    h.stop().await
}

/// A sealed state can be retried until it expires, and each retry runs the upstream call again:
/// retries take tokens like any request, so replaying one state is limited like plain calls.
#[tokio::test]
async fn replaying_one_sealed_state_is_rate_limited() -> TestResult {
    const BURST: usize = 4;
    let limits = format!("principal = {{ {SLOW}, burst = {BURST} }}");
    let h = Setup::new().set("limits", &limits).start().await?;
    let call = || h.client.call_tool("confirm_twice", json!({})).caps(form_only());
    let (q1, s1) = call().send().await?.input_required()?;
    let mut served = 1;
    let mut refused = None;
    // Bounded: on a gateway whose retries took no token every replay would be served.
    for _ in 0..3 * BURST {
        let reply = call().state(&s1).responses(answer_all(&q1)).send().await?;
        if reply.status == StatusCode::TOO_MANY_REQUESTS {
            refused = Some(reply);
            break;
        }
        reply.input_required()?;
        served += 1;
    }
    let refused =
        refused.ok_or_else(|| HarnessError::Unexpected("replays of one state were never limited".into()))?;
    assert_eq!(served, BURST, "each replay took one token of the principal's bucket");
    assert_eq!(
        refused.expect_error(StatusCode::TOO_MANY_REQUESTS, -32000)?,
        "rate limit exceeded: principal"
    );
    assert_eq!(
        h.demo.stats.tool_calls("confirm_twice"),
        BURST as u64,
        "a refused replay never reaches the upstream"
    );
    h.stop().await
}

/// A tool's limit counts that tool's retries too.
#[tokio::test]
async fn a_tool_limit_counts_retries_of_that_tool() -> TestResult {
    let limits = format!("tools = {{ confirm_twice = {{ {SLOW}, burst = 2 }} }}");
    let h = Setup::new().set("limits", &limits).start().await?;
    let call = || h.client.call_tool("confirm_twice", json!({})).caps(form_only());
    let (q1, s1) = call().send().await?.input_required()?;
    call().state(&s1).responses(answer_all(&q1)).send().await?.input_required()?;
    let refused = call().state(&s1).responses(answer_all(&q1)).send().await?;
    let message = refused.expect_error(StatusCode::TOO_MANY_REQUESTS, -32000)?;
    assert_eq!(message, r#"rate limit exceeded: tool "confirm_twice""#);
    assert_eq!(echo(&h).await?.text()?, "Echo: m", "other tools are not limited");
    h.stop().await
}
