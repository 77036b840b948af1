//! `[limits]` through a running gateway: a principal over its limit gets 429 with `Retry-After`
//! and an error naming the limit, a per-tool limit refuses only that tool, and an MRTR chain of
//! several rounds takes one token.

use http::StatusCode;
use serde_json::{json, Value};

use super::form_only;
use crate::common::answers::NAME;
use crate::common::{answer_all, Harness, Reply, Setup, TestResult};

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

#[tokio::test]
async fn an_mrtr_chain_takes_one_token_however_many_rounds_it_has() -> TestResult {
    let limits =
        format!("principal = {{ {SLOW}, burst = 3 }}\ntools = {{ confirm_twice = {{ {SLOW}, burst = 1 }} }}");
    let h = Setup::new().set("limits", &limits).start().await?;
    let call = || h.client.call_tool("confirm_twice", json!({})).caps(form_only());
    // Three requests: the first round, and two retries carrying requestState.
    let (q1, s1) = call().send().await?.input_required()?;
    let (q2, s2) = call().state(&s1).responses(answer_all(&q1)).send().await?.input_required()?;
    let done = call().state(&s2).responses(answer_all(&q2)).send().await?;
    assert_eq!(done.text()?, format!("Confirmed {NAME}: true"));
    // The chain took one token of each bucket: the tool's only one, and one of the principal's
    // three, so the principal's bucket still pays for a refused call of the tool (the principal
    // is checked first) and one echo, and refuses the next.
    let again: Value = call().send().await?.error()?.clone();
    assert_eq!(again["data"]["tool"], "confirm_twice", "{again}");
    assert_eq!(echo(&h).await?.text()?, "Echo: m");
    let refused = echo(&h).await?;
    assert_eq!(
        refused.expect_error(StatusCode::TOO_MANY_REQUESTS, -32000)?,
        "rate limit exceeded: principal"
    );
    h.stop().await
}
