//! Elicitation through MRTR: one question (`greet`), two sequential ones (`confirm_twice`), a
//! question that changes between runs (`flaky_question`), and what the gateway does with
//! missing, unsolicited, extra and malformed answers.

use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;
use mrtr_gateway::bridge::{Clock, ManualClock};
use mrtr_gateway::demo::{self, DemoOptions};
use serde_json::json;
use tokio::sync::Semaphore;

use super::form_only;
use crate::common::answers::NAME;
use crate::common::{answer_all, bounded, eventually, Harness, Setup, TestResult};

#[tokio::test]
async fn greet_round_trip_reaches_the_upstream() -> TestResult {
    let h = Harness::start().await?;
    let first = h.client.call_tool("greet", json!({})).caps(form_only()).send().await?;
    let (requests, state) = first.input_required()?;
    assert_eq!(requests.len(), 1, "{requests:?}");
    let (key, question) = requests.iter().next().map(|(k, q)| (k.clone(), q.clone())).unwrap_or_default();
    assert_eq!(question["method"], "elicitation/create");
    assert_eq!(question["params"]["message"], "What is your name?");
    assert!(state.starts_with("v1."), "{state}");

    let answers = json!({ key: {"action": "accept", "content": {"name": "Grace"}} });
    let done = h
        .client
        .call_tool("greet", json!({}))
        .caps(form_only())
        .state(&state)
        .responses(answers)
        .send()
        .await?;
    assert_eq!(done.status, StatusCode::OK);
    assert_eq!(done.text()?, "Hello, Grace!");
    // Two runs upstream: the first was cancelled when it asked, the replay got the answer.
    assert_eq!(h.demo.stats.tool_calls("greet"), 2);
    assert_eq!(h.demo.stats.answers(), 1);
    // The cancel goes out after the round's reply (its lease winds down).
    let stats = &h.demo.stats;
    eventually("the first run to be cancelled upstream", || stats.cancellations() >= 1).await?;
    h.stop().await
}

#[tokio::test]
async fn confirm_twice_takes_three_rounds_with_a_new_state_each_time() -> TestResult {
    let h = Harness::start().await?;
    let call = || h.client.call_tool("confirm_twice", json!({})).caps(form_only());
    let (q1, s1) = call().send().await?.input_required()?;
    assert_eq!(q1.values().next().map(|q| q["params"]["message"].clone()), Some(json!("What is your name?")));

    let (q2, s2) = call().state(&s1).responses(answer_all(&q1)).send().await?.input_required()?;
    assert_ne!(s1, s2, "each round seals a new state");
    let message = q2.values().next().map(|q| q["params"]["message"].clone()).unwrap_or_default();
    assert_eq!(message, json!(format!("Please confirm: is your name {NAME}?")));

    let done = call().state(&s2).responses(answer_all(&q2)).send().await?;
    assert_eq!(done.text()?, format!("Confirmed {NAME}: true"));
    // Round 3 replayed both answers from the journal; round 2 replayed the first one.
    assert_eq!(h.demo.stats.answers(), 3);
    assert_eq!(h.demo.stats.tool_calls("confirm_twice"), 3);
    h.stop().await
}

#[tokio::test]
async fn a_changed_question_is_asked_again_never_answered_stale() -> TestResult {
    let h = Harness::start().await?;
    let call = || h.client.call_tool("flaky_question", json!({})).caps(form_only());
    let (q1, s1) = call().send().await?.input_required()?;
    let retry = call().state(&s1).responses(answer_all(&q1)).send().await?;
    let (q2, _) = retry.input_required()?;
    let m1 = q1.values().next().map(|q| q["params"]["message"].clone()).unwrap_or_default();
    let m2 = q2.values().next().map(|q| q["params"]["message"].clone()).unwrap_or_default();
    assert_ne!(m1, m2, "the replay rolled a new question, which must reach the client");
    // The stale answer was never given to the new question.
    assert_eq!(h.demo.stats.answers(), 0);
    assert_eq!(h.metric("mrtr_gateway_replay_divergences_total{tool=\"flaky_question\"}"), 1.0);
    h.stop().await
}

#[tokio::test]
async fn missing_answers_are_asked_again_under_the_same_key() -> TestResult {
    let h = Harness::start().await?;
    let call = || h.client.call_tool("greet", json!({})).caps(form_only());
    let (q1, s1) = call().send().await?.input_required()?;
    let (q2, s2) = call().state(&s1).responses(json!({})).send().await?.input_required()?;
    assert_eq!(q1, q2, "same key, same question");
    let done = call().state(&s2).responses(answer_all(&q2)).send().await?;
    assert_eq!(done.text()?, format!("Hello, {NAME}!"));
    h.stop().await
}

#[tokio::test]
async fn answers_without_a_state_are_not_trusted() -> TestResult {
    let h = Harness::start().await?;
    let call = || h.client.call_tool("greet", json!({})).caps(form_only());
    let (q1, _) = call().send().await?.input_required()?;
    let unsolicited = call().responses(answer_all(&q1)).send().await?;
    let (q2, _) = unsolicited.input_required()?;
    assert_eq!(q1, q2, "the question is asked again");
    assert_eq!(h.demo.stats.answers(), 0, "the upstream never saw the unsolicited answer");
    h.stop().await
}

#[tokio::test]
async fn unknown_answer_keys_are_ignored() -> TestResult {
    let h = Harness::start().await?;
    let call = || h.client.call_tool("greet", json!({})).caps(form_only());
    let (q1, s1) = call().send().await?.input_required()?;
    let mut answers = answer_all(&q1);
    answers["not-a-key"] = json!({"action": "accept", "content": {"name": "Mallory"}});
    let done = call().state(&s1).responses(answers).send().await?;
    assert_eq!(done.text()?, format!("Hello, {NAME}!"));
    h.stop().await
}

#[tokio::test]
async fn a_malformed_answer_is_invalid_params() -> TestResult {
    let h = Harness::start().await?;
    let call = || h.client.call_tool("greet", json!({})).caps(form_only());
    let (q1, s1) = call().send().await?.input_required()?;
    let answers: serde_json::Map<String, serde_json::Value> =
        q1.keys().map(|k| (k.clone(), json!({"action": "maybe"}))).collect();
    let refused = call().state(&s1).responses(answers.into()).send().await?;
    let message = refused.expect_error(StatusCode::BAD_REQUEST, -32602)?;
    assert!(message.contains("action"), "{message}");
    assert_eq!(h.demo.stats.answers(), 0);
    h.stop().await
}

#[tokio::test]
async fn rounds_are_bounded() -> TestResult {
    let h = Setup::new().set("mrtr", "max_rounds = 1").start().await?;
    let call = || h.client.call_tool("confirm_twice", json!({})).caps(form_only());
    let (q1, s1) = call().send().await?.input_required()?;
    let refused = call().state(&s1).responses(answer_all(&q1)).send().await?;
    let message = refused.expect_error(StatusCode::BAD_REQUEST, -32602)?;
    assert!(message.contains("too many input rounds"), "{message}");
    h.stop().await
}

/// Steps of the manual clock, and the real pause between them (to let the gateway run).
const STEP: Duration = Duration::from_millis(5);
/// A window no scheduling delay comes near, on the manual clock.
const LONG_WINDOW_MS: u64 = 60_000;
/// Most turns of the loop below, whatever happens (ten minutes of steps).
const MAX_TURNS: u32 = 120_000;

/// Calls `greet` on a gateway timed by a manual clock with a `window_ms` gather window; the
/// clock moves by [`STEP`] each turn once the demo has sent its question. Returns how far it
/// moved before the round ended.
async fn manual_round(window_ms: u64, mrtr: &[&str]) -> TestResult<Duration> {
    let (h, clock) = manual_gateway(window_ms, mrtr).await?;
    let moved = timed_greet(&h, &clock).await?;
    h.stop().await?;
    Ok(moved)
}

async fn manual_gateway(window_ms: u64, mrtr: &[&str]) -> TestResult<(Harness, ManualClock)> {
    let clock = ManualClock::new();
    let mut setup = Setup::new()
        .set("mrtr", &format!("gather_window_ms = {window_ms}"))
        .set("mrtr", "round_timeout_ms = 600000")
        .set("mrtr", "total_timeout_ms = 600000");
    for line in mrtr {
        setup = setup.set("mrtr", line);
    }
    let h = setup.start_with_clock(Clock::Manual(clock.clone())).await?;
    Ok((h, clock))
}

/// One `greet` round on `h`; returns how far the clock moved before it ended. The clock moves
/// only once the demo has sent a question (this call's, or an earlier call's).
async fn timed_greet(h: &Harness, clock: &ManualClock) -> TestResult<Duration> {
    let mut moved = Duration::ZERO;
    let reply = {
        let call = h.client.call_tool("greet", json!({})).caps(form_only()).send();
        tokio::pin!(call);
        let mut turns = 0;
        loop {
            tokio::select! {
                biased;
                reply = &mut call => break reply?,
                () = tokio::time::sleep(STEP) => {
                    turns += 1;
                    assert!(turns < MAX_TURNS, "the round never ended");
                    if h.demo.stats.requests_sent() >= 1 {
                        clock.advance(STEP);
                        moved += STEP;
                    }
                }
            }
        }
    };
    let (requests, _) = reply.input_required()?;
    assert_eq!(requests.len(), 1, "{requests:?}");
    Ok(moved)
}

#[tokio::test]
async fn a_round_ends_on_the_idle_gap_long_before_the_window() -> TestResult {
    // On the manual clock the gap can only pass by the test's steps: a round that ends before the
    // clock moved IDLE did not wait for it, one that ends near the window waited for that.
    const IDLE: Duration = Duration::from_millis(1_000);
    let idle = format!("gather_idle_ms = {}", IDLE.as_millis());
    let moved = manual_round(LONG_WINDOW_MS, &[&idle]).await?;
    assert!(moved >= IDLE, "the round ended before its idle gap passed: after {moved:?}");
    // The steps between the gap's end and the reply (real time on a loaded machine) stay far
    // below the window.
    assert!(moved < 10 * IDLE, "ended after {moved:?}, not on the idle gap");
    Ok(())
}

#[tokio::test]
async fn a_round_waits_out_the_window_for_an_expected_second_question() -> TestResult {
    // greet asks one question; configured to expect two, its round can only end on the window.
    let window = 500;
    let moved = manual_round(window, &["gather_idle_ms = 5", "gather_expect = { greet = 2 }"]).await?;
    assert!(moved >= Duration::from_millis(window), "ended after {moved:?}");
    Ok(())
}

#[tokio::test]
async fn a_remembered_count_ends_the_round_without_the_idle_gap_but_a_recheck_waits_it() -> TestResult {
    // On the manual clock a gap of IDLE can only pass by the steps below, so a round that ends
    // before the clock has moved that far did not wait for it.
    const IDLE: Duration = Duration::from_millis(1_000);
    let idle = format!("gather_idle_ms = {}", IDLE.as_millis());
    let (h, clock) = manual_gateway(LONG_WINDOW_MS, &[&idle, "gather_recheck_every = 2"]).await?;
    let first = timed_greet(&h, &clock).await?;
    assert!(first >= IDLE, "a tool never seen waits the idle gap: ended after {first:?}");
    let second = timed_greet(&h, &clock).await?;
    assert!(second < IDLE, "greet asked one question before: ended after {second:?}");
    let third = timed_greet(&h, &clock).await?;
    assert!(third >= IDLE, "one round in two is a recheck: ended after {third:?}");
    h.stop().await
}

#[tokio::test]
async fn a_cancelled_round_leaves_its_upstream_connection_reusable() -> TestResult {
    // Each replayed round cancels its upstream call. Its response stream is read to its end
    // rather than cut, so its connection goes back to the client's pool: sequential calls need
    // a fixed handful of connections, never one more per round.
    const CALLS: u64 = 8;
    let h = Harness::start().await?;
    let call = || h.client.call_tool("confirm_twice", json!({})).caps(form_only());
    for _ in 0..CALLS {
        let (q1, s1) = call().send().await?.input_required()?;
        let (q2, s2) = call().state(&s1).responses(answer_all(&q1)).send().await?.input_required()?;
        call().state(&s2).responses(answer_all(&q2)).send().await?.text()?;
    }
    // 8 calls, 16 cancelled rounds; a stream, an answer and a cancel at most at once.
    let stats = &h.demo.stats;
    eventually("every round's call to be cancelled upstream", || stats.cancellations() == 2 * CALLS).await?;
    let connections = h.demo.stats.connections();
    assert!(connections <= 6, "{connections} upstream connections for {CALLS} calls");
    h.stop().await
}

#[tokio::test]
async fn a_replayed_round_is_answered_before_its_cancel_and_its_retry_waits_for_that_session() -> TestResult {
    // The upstream holds every cancel until the test lets it through, as a busy server would.
    let gate = Arc::new(Semaphore::new(0));
    let demo =
        demo::spawn_loopback(DemoOptions { cancel_gate: Some(gate.clone()), ..DemoOptions::default() })?;
    let (gateway, client) = Setup::new().attach(&demo).await?;
    let h = Harness { demo, gateway, client };
    let call = || h.client.call_tool("greet", json!({})).caps(form_only());
    let (q, s) =
        bounded("the round's reply while its cancel is held", call().send()).await??.input_required()?;
    assert_eq!(h.demo.stats.cancellations(), 0, "the reply came before the upstream took the cancel");
    let opened = h.demo.stats.initializes();
    // The retry arrives while the round's session is still winding down: it waits for that
    // session instead of opening a second one for the key.
    let retry = call().state(&s).responses(answer_all(&q)).send();
    let release = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        gate.add_permits(1);
    };
    let (done, ()) = tokio::join!(retry, release);
    assert_eq!(done?.text()?, format!("Hello, {NAME}!"));
    assert_eq!(h.demo.stats.cancellations(), 1, "the first run was cancelled before the replay");
    assert_eq!(h.demo.stats.initializes(), opened, "the retry reused the wound-down session");
    assert_eq!(h.demo.stats.tool_calls("greet"), 2);
    h.stop().await
}
