//! The upstream half of the fault matrix: one test per way a legacy server can fail the gateway
//! (connection refused, reset mid-stream, a stream closed after its priming event, an expired
//! session, malformed JSON, an oversized event, a response to an unknown id, a duplicate server
//! request id, a hang, a kill mid-call). Each checks what the client sees (the HTTP status and
//! JSON-RPC code, in bounded time, never the upstream's own text), that the session was evicted
//! (or, where the fault is survivable, kept), that nothing was left open on either side, and that
//! the next call succeeds.

use std::time::{Duration, Instant};

use http::StatusCode;
use serde_json::json;

use super::form_only;
use crate::common::answers::NAME;
use crate::common::faulty::{tools, UPSTREAM_SECRET};
use crate::common::rig::Rig;
use crate::common::{answer_all, bounded, eventually, Reply, Setup, TestResult};

/// How long a fault may take to reach the client, with the rig's timeouts.
const PROMPT: Duration = Duration::from_secs(3);

/// Fails unless `reply` is an error with `status` and `code` whose message keeps the upstream's
/// own text out.
fn assert_clear_error(reply: &Reply, status: StatusCode, code: i64) -> TestResult {
    let message = reply.expect_error(status, code)?;
    assert!(!message.is_empty(), "{reply:?}");
    assert!(!reply.body.to_string().contains(UPSTREAM_SECRET), "upstream text leaked: {reply:?}");
    Ok(())
}

/// Calls `tool` with no arguments, checking the reply came within [`PROMPT`].
async fn call_promptly(rig: &Rig, tool: &str) -> TestResult<Reply> {
    let started = Instant::now();
    let reply = rig.client.call_tool(tool, json!({})).send().await?;
    assert!(started.elapsed() < PROMPT, "{tool} took {:?}: {reply:?}", started.elapsed());
    Ok(reply)
}

/// The session that served `tool` was retired: the pool holds only the one the next call opens,
/// which is a new session, and the old one was DELETEd upstream.
async fn assert_evicted_and_replaced(rig: &Rig, tool: &str, next: &str) -> TestResult {
    let old = rig.upstream.stats().last_session_of(tool);
    assert_eq!(old.as_deref(), Some("s1"), "{tool} ran on the warm session");
    let stats = rig.upstream.stats();
    eventually("the evicted session to be deleted upstream", || stats.deletes() == 1).await?;
    rig.expect_ok(next).await?;
    assert_eq!(rig.pool_size().await?, 1.0, "the evicted session left the pool");
    Ok(())
}

#[tokio::test]
async fn a_refused_connection_is_a_clear_error_and_a_revived_upstream_serves_the_next_call() -> TestResult {
    let mut rig = Rig::start().await?;
    rig.upstream.kill();
    let reply = call_promptly(&rig, tools::OK).await?;
    assert_clear_error(&reply, StatusCode::BAD_GATEWAY, -32603)?;
    rig.upstream.revive().await?;
    // The pooled session died with the server: the next call initialises a new one.
    rig.expect_ok("s2").await?;
    assert_eq!(rig.upstream.stats().initializes(), 2);
    assert_eq!(rig.pool_size().await?, 1.0);
    rig.assert_at_rest().await?;
    rig.stop().await
}

#[tokio::test]
async fn a_connection_reset_mid_stream_is_a_clear_error_and_evicts_the_session() -> TestResult {
    let rig = Rig::start().await?;
    let reply = call_promptly(&rig, tools::RESET).await?;
    assert_clear_error(&reply, StatusCode::BAD_GATEWAY, -32603)?;
    assert_evicted_and_replaced(&rig, tools::RESET, "s2").await?;
    rig.assert_at_rest().await?;
    rig.stop().await
}

#[tokio::test]
async fn a_stream_closed_after_its_priming_event_is_resumed_and_finishes() -> TestResult {
    let rig = Rig::start().await?;
    let call = || rig.client.call_tool(tools::PRIME_THEN_ASK, json!({})).caps(form_only());
    let (requests, state) = call().send().await?.input_required()?;
    let question = requests.values().next().cloned().unwrap_or_default();
    assert_eq!(question["params"]["message"], "What is your name?", "{requests:?}");
    let done = call().state(&state).responses(answer_all(&requests)).send().await?;
    assert_eq!(done.text()?, format!("Hello, {NAME}"));
    // Both rounds' POST streams were primed and closed; each was resumed from its priming id.
    let resumes = rig.upstream.stats().resumes();
    assert_eq!(resumes.len(), 2, "{resumes:?}");
    assert!(resumes.iter().all(|id| id.starts_with("s2-") && id.ends_with("-0")), "{resumes:?}");
    assert_eq!(rig.upstream.stats().answers(), 1, "the replay answered the question once");
    // Round 1 refused the question it returned, after its reply (its lease wound down).
    let stats = rig.upstream.stats();
    eventually("round 1's question to be refused upstream", || stats.refusals() == 1).await?;
    // A resumed stream is no fault: the session stays pooled.
    assert_eq!(rig.upstream.stats().deletes(), 0);
    assert_eq!(rig.pool_size().await?, 2.0);
    rig.assert_at_rest().await?;
    rig.stop().await
}

#[tokio::test]
async fn a_call_refused_for_an_expired_session_is_sent_again_on_a_new_one() -> TestResult {
    let rig = Rig::start().await?;
    rig.upstream.expire_sessions();
    // The 404 came to the call's first POST, before anything of the call happened: the gateway
    // opens a new session (a second initialize) and the call succeeds there.
    let reply = call_promptly(&rig, tools::OK).await?;
    assert_eq!(reply.text()?, "ok from s2", "{reply:?}");
    assert_eq!(rig.upstream.stats().initializes(), 2);
    // The warm-up call and this one: the refused POST ran nothing.
    assert_eq!(rig.upstream.stats().calls_of(tools::OK), 2);
    // The renewed session stays pooled and serves the next call as it is.
    rig.expect_ok("s2").await?;
    assert_eq!(rig.upstream.stats().initializes(), 2);
    assert_eq!(rig.pool_size().await?, 1.0);
    rig.assert_at_rest().await?;
    rig.stop().await
}

#[tokio::test]
async fn a_second_404_in_a_row_is_a_clear_error_and_the_session_is_replaced() -> TestResult {
    let rig = Rig::start().await?;
    rig.upstream.expire_sessions();
    rig.upstream.forget_next_sessions(1);
    // s1 is forgotten, and so is s2 as soon as it opens: the call is retried once, not again.
    let reply = call_promptly(&rig, tools::OK).await?;
    assert_clear_error(&reply, StatusCode::BAD_GATEWAY, -32603)?;
    assert!(reply.body.to_string().contains("session expired"), "{reply:?}");
    assert_eq!(rig.upstream.stats().initializes(), 2, "one renewal, no more");
    assert_eq!(rig.upstream.stats().calls_of(tools::OK), 1, "only the warm-up call ran");
    // The expired session was evicted; the next call opens a session that works.
    rig.expect_ok("s3").await?;
    assert_eq!(rig.upstream.stats().initializes(), 3);
    assert_eq!(rig.pool_size().await?, 1.0);
    rig.assert_at_rest().await?;
    rig.stop().await
}

#[tokio::test]
async fn a_404_to_a_resumption_fails_the_call_without_a_retry() -> TestResult {
    let rig = Rig::start().await?;
    // The call ran on s1 before the server forgot it: sending it again could run it twice.
    let reply = call_promptly(&rig, tools::PRIME_THEN_EXPIRE).await?;
    assert_clear_error(&reply, StatusCode::BAD_GATEWAY, -32603)?;
    assert_eq!(rig.upstream.stats().calls_of(tools::PRIME_THEN_EXPIRE), 1);
    assert_eq!(rig.upstream.stats().initializes(), 1, "no new session for a resumption");
    rig.expect_ok("s2").await?;
    assert_eq!(rig.pool_size().await?, 1.0);
    rig.assert_at_rest().await?;
    rig.stop().await
}

#[tokio::test]
async fn malformed_json_from_the_upstream_is_a_clear_error() -> TestResult {
    let rig = Rig::start().await?;
    let reply = call_promptly(&rig, tools::MALFORMED_SSE).await?;
    assert_clear_error(&reply, StatusCode::BAD_GATEWAY, -32603)?;
    assert_evicted_and_replaced(&rig, tools::MALFORMED_SSE, "s2").await?;
    let reply = call_promptly(&rig, tools::MALFORMED_JSON).await?;
    assert_clear_error(&reply, StatusCode::BAD_GATEWAY, -32603)?;
    let stats = rig.upstream.stats();
    eventually("the second bad session to be deleted", || stats.deletes() == 2).await?;
    rig.expect_ok("s3").await?;
    rig.assert_at_rest().await?;
    rig.stop().await
}

#[tokio::test]
async fn an_oversized_event_is_refused_without_reading_it_all() -> TestResult {
    let rig = Rig::start().await?;
    let reply = call_promptly(&rig, tools::OVERSIZED).await?;
    assert_clear_error(&reply, StatusCode::BAD_GATEWAY, -32603)?;
    assert_evicted_and_replaced(&rig, tools::OVERSIZED, "s2").await?;
    rig.assert_at_rest().await?;
    rig.stop().await
}

#[tokio::test]
async fn a_response_to_an_unknown_id_is_ignored() -> TestResult {
    let rig = Rig::start().await?;
    let reply = call_promptly(&rig, tools::UNKNOWN_ID).await?;
    assert_eq!(reply.text()?, "ok from s1");
    assert!(!reply.body.to_string().contains(UPSTREAM_SECRET), "{reply:?}");
    // Survivable: the session is kept.
    rig.expect_ok("s1").await?;
    // With nothing but the stray response, the call has no answer at all.
    let reply = call_promptly(&rig, tools::ONLY_UNKNOWN_ID).await?;
    assert_clear_error(&reply, StatusCode::BAD_GATEWAY, -32603)?;
    assert_evicted_and_replaced(&rig, tools::ONLY_UNKNOWN_ID, "s2").await?;
    rig.assert_at_rest().await?;
    rig.stop().await
}

#[tokio::test]
async fn two_server_requests_with_one_id_are_a_clear_error() -> TestResult {
    let rig = Rig::start().await?;
    let call = || rig.client.call_tool(tools::DUPLICATE_ID, json!({})).caps(form_only());
    // Turned into two questions, their answers would go back under one id and one of them to
    // the wrong question upstream: the call must end instead.
    let started = Instant::now();
    let reply = call().send().await?;
    assert!(started.elapsed() < PROMPT, "took {:?}", started.elapsed());
    assert_clear_error(&reply, StatusCode::BAD_GATEWAY, -32603)?;
    let stats = rig.upstream.stats();
    eventually("the call to be cancelled upstream", || stats.cancellations() == 1).await?;
    assert_eq!(stats.answers(), 0, "no answer was sent for an ambiguous id");
    // The call was cancelled cleanly: its session (s2, for these capabilities) stays usable.
    let again = call().send().await?;
    assert_clear_error(&again, StatusCode::BAD_GATEWAY, -32603)?;
    assert_eq!(stats.last_session_of(tools::DUPLICATE_ID).as_deref(), Some("s2"));
    assert_eq!(stats.initializes(), 2);
    rig.expect_ok("s1").await?;
    rig.assert_at_rest().await?;
    rig.stop().await
}

#[tokio::test]
async fn an_http_error_page_is_a_clear_error_that_does_not_quote_it() -> TestResult {
    let rig = Rig::start().await?;
    let reply = call_promptly(&rig, tools::HTTP_500).await?;
    assert_clear_error(&reply, StatusCode::BAD_GATEWAY, -32603)?;
    assert_evicted_and_replaced(&rig, tools::HTTP_500, "s2").await?;
    rig.assert_at_rest().await?;
    rig.stop().await
}

#[tokio::test]
async fn an_upstream_that_hangs_times_out_is_cancelled_and_evicted() -> TestResult {
    let rig = Rig::with(Setup::faulty().set("mrtr", "round_timeout_ms = 300")).await?;
    let reply = call_promptly(&rig, tools::HANG).await?;
    assert_clear_error(&reply, StatusCode::GATEWAY_TIMEOUT, -32603)?;
    let stats = rig.upstream.stats();
    eventually("the hung call to be cancelled upstream", || stats.cancellations() == 1).await?;
    assert_evicted_and_replaced(&rig, tools::HANG, "s2").await?;
    // The hung request's connection was closed by the gateway, not left to the server.
    rig.assert_at_rest().await?;
    rig.stop().await
}

#[tokio::test]
async fn an_upstream_killed_mid_call_is_a_clear_error() -> TestResult {
    let mut rig = Rig::start().await?;
    let client = rig.client.clone();
    let pending = tokio::spawn(async move { client.call_tool(tools::WAIT, json!({})).send().await });
    let stats = rig.upstream.stats();
    eventually("the call to be running upstream", || stats.open_streams() == 1).await?;
    let started = Instant::now();
    rig.upstream.kill();
    let reply = bounded("the killed call's reply", pending)
        .await?
        .map_err(|e| crate::common::HarnessError::Unexpected(format!("the call task failed: {e}")))??;
    assert!(started.elapsed() < PROMPT, "took {:?}", started.elapsed());
    assert_clear_error(&reply, StatusCode::BAD_GATEWAY, -32603)?;
    rig.upstream.revive().await?;
    rig.expect_ok("s2").await?;
    assert_eq!(rig.pool_size().await?, 1.0);
    rig.assert_at_rest().await?;
    rig.stop().await
}
