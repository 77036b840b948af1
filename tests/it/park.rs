//! Park mode on one replica: a round ends with its upstream call still running, and the retry
//! continues that same call, so whatever the tool did before its question runs once. Also its
//! bounds: the park timeout, the registry's size, and the second retry of an answered state.

use http::StatusCode;
use serde_json::json;

use super::form_only;
use crate::common::client::Call;
use crate::common::{answer_all, eventually, Harness, Setup, TestResult};

fn park_mode() -> Setup {
    Setup::new().set("mrtr", "mode = \"park\"")
}

fn order(h: &Harness) -> Call<'_> {
    h.client.call_tool("place_order", json!({})).caps(form_only())
}

fn outcome(h: &Harness, label: &str) -> f64 {
    h.metric(&format!("mrtr_gateway_park_outcomes_total{{outcome=\"{label}\"}}"))
}

#[tokio::test]
async fn a_side_effect_before_the_question_runs_once_in_park_mode() -> TestResult {
    let h = park_mode().start().await?;
    let (q1, s1) = order(&h).send().await?.input_required()?;
    assert_eq!(h.metric("mrtr_gateway_parked_calls"), 1.0);
    let done = order(&h).state(&s1).responses(answer_all(&q1)).send().await?;
    assert!(done.text()?.starts_with("Order #1 placed (accept)"), "{}", done.text()?);
    assert_eq!(h.demo.stats.orders(), 1, "the call was continued, not replayed");
    assert_eq!(h.demo.stats.tool_calls("place_order"), 1);
    assert_eq!(h.demo.stats.cancellations(), 0);
    assert_eq!((outcome(&h, "parked"), outcome(&h, "resumed")), (1.0, 1.0));
    assert_eq!(h.metric("mrtr_gateway_parked_calls"), 0.0);
    h.stop().await
}

#[tokio::test]
async fn the_same_side_effect_runs_twice_in_replay_mode() -> TestResult {
    let h = Harness::start().await?;
    let (q1, s1) = order(&h).send().await?.input_required()?;
    let done = order(&h).state(&s1).responses(answer_all(&q1)).send().await?;
    assert!(done.text()?.starts_with("Order #2 placed"), "{}", done.text()?);
    assert_eq!(h.demo.stats.orders(), 2, "replay runs the tool again from the top");
    assert_eq!(outcome(&h, "parked"), 0.0);
    h.stop().await
}

#[tokio::test]
async fn two_rounds_continue_one_call() -> TestResult {
    let h = park_mode().start().await?;
    let call = || h.client.call_tool("confirm_twice", json!({})).caps(form_only());
    let (q1, s1) = call().send().await?.input_required()?;
    let (q2, s2) = call().state(&s1).responses(answer_all(&q1)).send().await?.input_required()?;
    let done = call().state(&s2).responses(answer_all(&q2)).send().await?;
    assert!(done.text()?.starts_with("Confirmed"), "{}", done.text()?);
    assert_eq!(h.demo.stats.tool_calls("confirm_twice"), 1);
    assert_eq!((outcome(&h, "parked"), outcome(&h, "resumed")), (2.0, 2.0));
    h.stop().await
}

#[tokio::test]
async fn a_question_that_changes_every_run_completes_when_parked() -> TestResult {
    let h = park_mode().start().await?;
    let call = || h.client.call_tool("flaky_question", json!({})).caps(form_only());
    let (q1, s1) = call().send().await?.input_required()?;
    let done = call().state(&s1).responses(answer_all(&q1)).send().await?;
    assert!(done.text()?.starts_with("Roll "), "{}", done.text()?);
    assert_eq!(h.demo.stats.tool_calls("flaky_question"), 1);
    h.stop().await
}

#[tokio::test]
async fn a_second_retry_of_an_answered_parked_state_is_refused() -> TestResult {
    let h = park_mode().start().await?;
    let (q1, s1) = order(&h).send().await?.input_required()?;
    order(&h).state(&s1).responses(answer_all(&q1)).send().await?.text()?;
    let again = order(&h).state(&s1).responses(answer_all(&q1)).send().await?;
    let message = again.expect_error(StatusCode::BAD_REQUEST, -32602)?;
    assert!(message.contains("already answered"), "{message}");
    assert_eq!(h.demo.stats.orders(), 1, "the refused retry ran nothing");
    assert_eq!(outcome(&h, "refused"), 1.0);
    h.stop().await
}

#[tokio::test]
async fn invalid_answers_leave_the_call_parked_for_a_corrected_retry() -> TestResult {
    let h = park_mode().start().await?;
    let (q1, s1) = order(&h).send().await?.input_required()?;
    let key = q1.keys().next().cloned().unwrap_or_default();
    let bad = order(&h).state(&s1).responses(json!({ key: {"action": "maybe"} })).send().await?;
    bad.expect_error(StatusCode::BAD_REQUEST, -32602)?;
    assert_eq!(h.metric("mrtr_gateway_parked_calls"), 1.0);
    let done = order(&h).state(&s1).responses(answer_all(&q1)).send().await?;
    assert!(done.text()?.starts_with("Order #1 placed"), "{}", done.text()?);
    h.stop().await
}

#[tokio::test]
async fn a_parked_call_that_times_out_is_cancelled_upstream_and_its_retry_replays() -> TestResult {
    let h = park_mode().set("mrtr", "park_timeout_ms = 50").start().await?;
    let (q1, s1) = order(&h).send().await?.input_required()?;
    eventually("the parked call to time out", || outcome(&h, "timed_out") == 1.0).await?;
    eventually("the upstream to see the cancellation", || h.demo.stats.cancellations() == 1).await?;
    assert_eq!(h.metric("mrtr_gateway_parked_calls"), 0.0);
    // The state still carries the journal: the retry replays the call (placing a second order).
    let done = order(&h).state(&s1).responses(answer_all(&q1)).send().await?;
    assert!(done.text()?.starts_with("Order #2 placed"), "{}", done.text()?);
    assert_eq!(outcome(&h, "fallback"), 1.0);
    h.stop().await
}

#[tokio::test]
async fn a_full_registry_replays_the_round_instead() -> TestResult {
    let h = park_mode().set("mrtr", "max_parked = 1").start().await?;
    let (qa, sa) = order(&h).send().await?.input_required()?;
    let (qb, sb) = order(&h).send().await?.input_required()?;
    assert_eq!((outcome(&h, "parked"), outcome(&h, "full")), (1.0, 1.0));
    assert_eq!(h.demo.stats.cancellations(), 1, "the round that could not park was cancelled");
    order(&h).state(&sa).responses(answer_all(&qa)).send().await?.text()?;
    order(&h).state(&sb).responses(answer_all(&qb)).send().await?.text()?;
    assert_eq!(h.demo.stats.orders(), 3, "the parked call ran once, the replayed one twice");
    h.stop().await
}

#[tokio::test]
async fn a_tool_override_parks_only_that_tool() -> TestResult {
    let h = Setup::new().set("mrtr", "tool_modes = { place_order = \"park\" }").start().await?;
    let (q1, s1) = order(&h).send().await?.input_required()?;
    order(&h).state(&s1).responses(answer_all(&q1)).send().await?.text()?;
    assert_eq!(h.demo.stats.orders(), 1);
    let greet = || h.client.call_tool("greet", json!({})).caps(form_only());
    let (q2, s2) = greet().send().await?.input_required()?;
    greet().state(&s2).responses(answer_all(&q2)).send().await?.text()?;
    assert_eq!(h.demo.stats.tool_calls("greet"), 2, "greet is still replayed");
    h.stop().await
}

#[tokio::test]
async fn auto_mode_parks_a_tool_once_its_replay_diverged() -> TestResult {
    let h = Setup::new().set("mrtr", "mode = \"auto\"").start().await?;
    let call = || h.client.call_tool("flaky_question", json!({})).caps(form_only());
    let (q1, s1) = call().send().await?.input_required()?;
    assert_eq!(outcome(&h, "parked"), 0.0, "nothing is known of the tool yet: replayed");
    // The replay asks a new question while the answer goes unused: a divergence, so auto parks.
    let (q2, s2) = call().state(&s1).responses(answer_all(&q1)).send().await?.input_required()?;
    assert_eq!(h.metric("mrtr_gateway_replay_divergences_total{tool=\"flaky_question\"}"), 1.0);
    assert_eq!(outcome(&h, "parked"), 1.0);
    let done = call().state(&s2).responses(answer_all(&q2)).send().await?;
    assert!(done.text()?.starts_with("Roll "), "{}", done.text()?);
    assert_eq!(h.demo.stats.tool_calls("flaky_question"), 2);
    h.stop().await
}

#[tokio::test]
async fn auto_mode_parks_side_effecting_tools_and_replays_the_others() -> TestResult {
    let setup = Setup::new().set("mrtr", "mode = \"auto\"").set("mrtr", "side_effecting = [\"place_order\"]");
    let h = setup.start().await?;
    let (q1, s1) = order(&h).send().await?.input_required()?;
    order(&h).state(&s1).responses(answer_all(&q1)).send().await?.text()?;
    assert_eq!(h.demo.stats.orders(), 1, "marked side-effecting: parked from its first round");
    let greet = || h.client.call_tool("greet", json!({})).caps(form_only());
    let (q2, s2) = greet().send().await?.input_required()?;
    greet().state(&s2).responses(answer_all(&q2)).send().await?.text()?;
    assert_eq!(h.demo.stats.tool_calls("greet"), 2, "deterministic and unmarked: replayed");
    h.stop().await
}
