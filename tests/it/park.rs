//! Park mode on one replica, on every upstream transport (Streamable HTTP, stdio, HTTP+SSE): a
//! round ends with its upstream call still running, and the retry continues that same call, so
//! whatever the tool did before its question runs once. Also its bounds: the park timeout, the
//! registry's size, and the second retry of an answered state; and `auto` mode, which parks a
//! tool marked side-effecting or once its replay diverged.

use http::StatusCode;
use mrtr_gateway::app::Gateway;
use serde_json::json;

use super::form_only;
use crate::common::client::Call;
use crate::common::harness::metric;
use crate::common::transports::{on_every_transport, Transport, Upstream};
use crate::common::{answer_all, bounded, eventually, Client, Setup, TestResult};

on_every_transport!(
    a_side_effect_before_the_question_runs_once_in_park_mode,
    the_same_side_effect_runs_twice_in_replay_mode,
    two_rounds_continue_one_call,
    a_question_that_changes_every_run_completes_when_parked,
    a_second_retry_of_an_answered_parked_state_is_refused,
    invalid_answers_leave_the_call_parked_for_a_corrected_retry,
    a_parked_call_that_times_out_is_cancelled_upstream_and_its_retry_replays,
    a_parked_call_is_cancelled_upstream_when_the_gateway_shuts_down,
    a_full_registry_replays_the_round_instead,
    a_tool_override_parks_only_that_tool,
    auto_mode_parks_a_tool_once_its_replay_diverged,
    auto_mode_parks_side_effecting_tools_and_replays_the_others,
);

fn park_mode() -> Setup {
    Setup::new().set("mrtr", "mode = \"park\"")
}

fn order(client: &Client) -> Call<'_> {
    client.call_tool("place_order", json!({})).caps(form_only())
}

fn tool<'a>(client: &'a Client, name: &str) -> Call<'a> {
    client.call_tool(name, json!({})).caps(form_only())
}

fn outcome(gateway: &Gateway, label: &str) -> f64 {
    metric(gateway, &format!("mrtr_gateway_park_outcomes_total{{outcome=\"{label}\"}}"))
}

fn parked(gateway: &Gateway) -> f64 {
    metric(gateway, "mrtr_gateway_parked_calls")
}

/// A gateway set up as `setup` in front of a fresh scripted server on `transport`.
async fn start(transport: Transport, setup: Setup) -> TestResult<(Upstream, Gateway, Client)> {
    let upstream = Upstream::start(transport).await?;
    let (gateway, client) = upstream.gateway(setup).await?;
    Ok((upstream, gateway, client))
}

async fn stop(upstream: Upstream, gateway: Gateway) -> TestResult {
    bounded("the gateway to drain", gateway.shutdown()).await?;
    upstream.stop().await
}

async fn a_side_effect_before_the_question_runs_once_in_park_mode(t: Transport) -> TestResult {
    let (upstream, gateway, client) = start(t, park_mode()).await?;
    let (q1, s1) = order(&client).send().await?.input_required()?;
    assert_eq!(parked(&gateway), 1.0);
    let done = order(&client).state(&s1).responses(answer_all(&q1)).send().await?;
    assert!(done.text()?.starts_with("Order #1 placed (accept)"), "{}", done.text()?);
    assert_eq!(upstream.orders(), 1, "the call was continued, not replayed");
    assert_eq!(upstream.tool_calls("place_order"), 1);
    assert_eq!(upstream.cancellations(), 0);
    assert_eq!((outcome(&gateway, "parked"), outcome(&gateway, "resumed")), (1.0, 1.0));
    assert_eq!(parked(&gateway), 0.0);
    stop(upstream, gateway).await
}

async fn the_same_side_effect_runs_twice_in_replay_mode(t: Transport) -> TestResult {
    let (upstream, gateway, client) = start(t, Setup::new()).await?;
    let (q1, s1) = order(&client).send().await?.input_required()?;
    let done = order(&client).state(&s1).responses(answer_all(&q1)).send().await?;
    assert!(done.text()?.starts_with("Order #2 placed"), "{}", done.text()?);
    assert_eq!(upstream.orders(), 2, "replay runs the tool again from the top");
    eventually("the first run to be cancelled upstream", || upstream.cancellations() == 1).await?;
    assert_eq!(outcome(&gateway, "parked"), 0.0);
    stop(upstream, gateway).await
}

async fn two_rounds_continue_one_call(t: Transport) -> TestResult {
    let (upstream, gateway, client) = start(t, park_mode()).await?;
    let (q1, s1) = tool(&client, "confirm_twice").send().await?.input_required()?;
    let (q2, s2) = tool(&client, "confirm_twice")
        .state(&s1)
        .responses(answer_all(&q1))
        .send()
        .await?
        .input_required()?;
    let done = tool(&client, "confirm_twice").state(&s2).responses(answer_all(&q2)).send().await?;
    assert!(done.text()?.starts_with("Confirmed"), "{}", done.text()?);
    assert_eq!(upstream.tool_calls("confirm_twice"), 1);
    assert_eq!((outcome(&gateway, "parked"), outcome(&gateway, "resumed")), (2.0, 2.0));
    stop(upstream, gateway).await
}

async fn a_question_that_changes_every_run_completes_when_parked(t: Transport) -> TestResult {
    let (upstream, gateway, client) = start(t, park_mode()).await?;
    let (q1, s1) = tool(&client, "flaky_question").send().await?.input_required()?;
    let done = tool(&client, "flaky_question").state(&s1).responses(answer_all(&q1)).send().await?;
    assert!(done.text()?.starts_with("Roll "), "{}", done.text()?);
    assert_eq!(upstream.tool_calls("flaky_question"), 1);
    stop(upstream, gateway).await
}

async fn a_second_retry_of_an_answered_parked_state_is_refused(t: Transport) -> TestResult {
    let (upstream, gateway, client) = start(t, park_mode()).await?;
    let (q1, s1) = order(&client).send().await?.input_required()?;
    order(&client).state(&s1).responses(answer_all(&q1)).send().await?.text()?;
    let again = order(&client).state(&s1).responses(answer_all(&q1)).send().await?;
    let message = again.expect_error(StatusCode::BAD_REQUEST, -32602)?;
    assert!(message.contains("already answered"), "{message}");
    assert_eq!(upstream.orders(), 1, "the refused retry ran nothing");
    assert_eq!(outcome(&gateway, "refused"), 1.0);
    stop(upstream, gateway).await
}

async fn invalid_answers_leave_the_call_parked_for_a_corrected_retry(t: Transport) -> TestResult {
    let (upstream, gateway, client) = start(t, park_mode()).await?;
    let (q1, s1) = order(&client).send().await?.input_required()?;
    let key = q1.keys().next().cloned().unwrap_or_default();
    let bad = order(&client).state(&s1).responses(json!({ key: {"action": "maybe"} })).send().await?;
    bad.expect_error(StatusCode::BAD_REQUEST, -32602)?;
    assert_eq!(parked(&gateway), 1.0);
    let done = order(&client).state(&s1).responses(answer_all(&q1)).send().await?;
    assert!(done.text()?.starts_with("Order #1 placed"), "{}", done.text()?);
    assert_eq!(upstream.orders(), 1);
    stop(upstream, gateway).await
}

async fn a_parked_call_that_times_out_is_cancelled_upstream_and_its_retry_replays(
    t: Transport,
) -> TestResult {
    let (upstream, gateway, client) = start(t, park_mode().set("mrtr", "park_timeout_ms = 50")).await?;
    let (q1, s1) = order(&client).send().await?.input_required()?;
    eventually("the parked call to time out", || outcome(&gateway, "timed_out") == 1.0).await?;
    eventually("the upstream to see the cancellation", || upstream.cancellations() == 1).await?;
    assert_eq!(parked(&gateway), 0.0);
    // The state still carries the journal: the retry replays the call (placing a second order).
    let done = order(&client).state(&s1).responses(answer_all(&q1)).send().await?;
    assert!(done.text()?.starts_with("Order #2 placed"), "{}", done.text()?);
    assert_eq!(outcome(&gateway, "fallback"), 1.0);
    stop(upstream, gateway).await
}

async fn a_parked_call_is_cancelled_upstream_when_the_gateway_shuts_down(t: Transport) -> TestResult {
    let (upstream, gateway, client) = start(t, park_mode()).await?;
    order(&client).send().await?.input_required()?;
    assert_eq!(parked(&gateway), 1.0);
    assert_eq!(upstream.cancellations(), 0);
    // Cancelled during the shutdown, not left to a guard dropped after it: over HTTP the
    // server has counted the cancellation by the time the shutdown returns. A stdio server
    // logs it once it has read it.
    bounded("the gateway to drain", gateway.shutdown()).await?;
    match t {
        Transport::Http | Transport::Sse => assert_eq!(upstream.cancellations(), 1),
        Transport::Stdio => {
            eventually("the upstream to see the cancellation", || upstream.cancellations() == 1).await?
        }
    }
    // By the registry, which says why; a parked call's guard dropped with the gateway would
    // cancel it too, as a client gone away.
    assert_eq!(upstream.cancel_reason(), "mrtr-gateway is shutting down");
    upstream.stop().await
}

async fn a_full_registry_replays_the_round_instead(t: Transport) -> TestResult {
    let (upstream, gateway, client) = start(t, park_mode().set("mrtr", "max_parked = 1")).await?;
    let (qa, sa) = order(&client).send().await?.input_required()?;
    let (qb, sb) = order(&client).send().await?.input_required()?;
    assert_eq!((outcome(&gateway, "parked"), outcome(&gateway, "full")), (1.0, 1.0));
    eventually("the round that could not park to be cancelled", || upstream.cancellations() == 1).await?;
    order(&client).state(&sa).responses(answer_all(&qa)).send().await?.text()?;
    order(&client).state(&sb).responses(answer_all(&qb)).send().await?.text()?;
    assert_eq!(upstream.orders(), 3, "the parked call ran once, the replayed one twice");
    stop(upstream, gateway).await
}

async fn a_tool_override_parks_only_that_tool(t: Transport) -> TestResult {
    let setup = Setup::new().set("mrtr", "tool_modes = { place_order = \"park\" }");
    let (upstream, gateway, client) = start(t, setup).await?;
    let (q1, s1) = order(&client).send().await?.input_required()?;
    order(&client).state(&s1).responses(answer_all(&q1)).send().await?.text()?;
    assert_eq!(upstream.orders(), 1);
    let (q2, s2) = tool(&client, "greet").send().await?.input_required()?;
    tool(&client, "greet").state(&s2).responses(answer_all(&q2)).send().await?.text()?;
    assert_eq!(upstream.tool_calls("greet"), 2, "greet is still replayed");
    stop(upstream, gateway).await
}

async fn auto_mode_parks_a_tool_once_its_replay_diverged(t: Transport) -> TestResult {
    let (upstream, gateway, client) = start(t, Setup::new().set("mrtr", "mode = \"auto\"")).await?;
    let call = || tool(&client, "flaky_question");
    let (q1, s1) = call().send().await?.input_required()?;
    assert_eq!(outcome(&gateway, "parked"), 0.0, "nothing is known of the tool yet: replayed");
    // The replay asks a new question while the answer goes unused: a divergence, so auto parks.
    let (q2, s2) = call().state(&s1).responses(answer_all(&q1)).send().await?.input_required()?;
    let diverged = metric(&gateway, "mrtr_gateway_replay_divergences_total{tool=\"flaky_question\"}");
    assert_eq!(diverged, 1.0);
    assert_eq!(outcome(&gateway, "parked"), 1.0);
    let done = call().state(&s2).responses(answer_all(&q2)).send().await?;
    assert!(done.text()?.starts_with("Roll "), "{}", done.text()?);
    assert_eq!(upstream.tool_calls("flaky_question"), 2);
    stop(upstream, gateway).await
}

async fn auto_mode_parks_side_effecting_tools_and_replays_the_others(t: Transport) -> TestResult {
    let setup = Setup::new().set("mrtr", "mode = \"auto\"").set("mrtr", "side_effecting = [\"place_order\"]");
    let (upstream, gateway, client) = start(t, setup).await?;
    let (q1, s1) = order(&client).send().await?.input_required()?;
    order(&client).state(&s1).responses(answer_all(&q1)).send().await?.text()?;
    assert_eq!(upstream.orders(), 1, "marked side-effecting: parked from its first round");
    let (q2, s2) = tool(&client, "greet").send().await?.input_required()?;
    tool(&client, "greet").state(&s2).responses(answer_all(&q2)).send().await?.text()?;
    assert_eq!(upstream.tool_calls("greet"), 2, "deterministic and unmarked: replayed");
    stop(upstream, gateway).await
}
