//! The other kinds of embedded request: sampling (`summarize`), roots sent on the legacy GET
//! stream (`list_roots`), and three concurrent questions gathered into one round (`ask_three`).

use std::time::Duration;

use mrtr_gateway::demo::{self, DemoOptions};
use serde_json::json;

use super::everything;
use crate::common::answers::{MODEL, NAME, ROOT, SUMMARY};
use crate::common::{answer_all, bounded, eventually, Harness, HarnessError, Setup, TestResult};

#[tokio::test]
async fn sampling_round_trip() -> TestResult {
    let h = Harness::start().await?;
    let call =
        || h.client.call_tool("summarize", json!({"text": "a long story"})).caps(json!({"sampling": {}}));
    let (requests, state) = call().send().await?.input_required()?;
    let question = requests.values().next().cloned().unwrap_or_default();
    assert_eq!(question["method"], "sampling/createMessage");
    assert_eq!(question["params"]["messages"][0]["content"]["text"], "Please summarize: a long story");
    let done = call().state(&state).responses(answer_all(&requests)).send().await?;
    assert_eq!(done.text()?, format!("Summary: {SUMMARY} (model {MODEL})"));
    assert_eq!(h.demo.stats.answers(), 1);
    h.stop().await
}

#[tokio::test]
async fn roots_asked_on_the_get_stream_become_input_requests() -> TestResult {
    roots_round_trip(Setup::new()).await
}

#[tokio::test]
async fn a_parked_call_that_learned_the_roots_retires_its_session_too() -> TestResult {
    // Parked, the call's session is the one the answer reaches: it learned the roots as well.
    roots_round_trip(Setup::new().set("mrtr", "mode = \"park\"")).await
}

async fn roots_round_trip(setup: Setup) -> TestResult {
    let h = setup.start().await?;
    let call = || h.client.call_tool("list_roots", json!({})).caps(json!({"roots": {}}));
    let (requests, state) = call().send().await?.input_required()?;
    let question = requests.values().next().cloned().unwrap_or_default();
    assert_eq!(question["method"], "roots/list");
    let done = call().state(&state).responses(answer_all(&requests)).send().await?;
    assert_eq!(done.text()?, format!("Roots: {ROOT}"));
    assert_eq!(h.demo.stats.answers(), 1);
    // The session that learned these roots is not handed to the next request: legacy servers
    // cache roots per session, and the next request may declare other roots. The demo caches
    // none, so only the upstream's own count of sessions can tell a new session from a reused one.
    eventually("the session that learned the roots is deleted", || h.demo.stats.deletes() >= 1).await?;
    let opened = h.demo.stats.initializes();
    let again = call().send().await?;
    assert!(again.input_required().is_ok(), "the next request must be asked for its own roots");
    assert_eq!(h.demo.stats.initializes(), opened + 1, "the next request must open a new session");
    h.stop().await
}

#[tokio::test]
async fn three_concurrent_questions_arrive_in_one_round() -> TestResult {
    // The questions come on two upstream streams, as far apart as the machine's load makes
    // them. With the count configured the round waits for all three, whatever the gaps; the
    // window (the only bound left) is far longer than any scheduling delay.
    let h = Setup::new()
        .set("mrtr", "gather_window_ms = 20000")
        .set("mrtr", "gather_expect = { ask_three = 3 }")
        .start()
        .await?;
    let call = || h.client.call_tool("ask_three", json!({})).caps(everything());
    let (requests, state) = call().send().await?.input_required()?;
    let mut methods: Vec<&str> = requests.values().filter_map(|q| q["method"].as_str()).collect();
    methods.sort_unstable();
    assert_eq!(methods, ["elicitation/create", "roots/list", "sampling/createMessage"]);
    let done = call().state(&state).responses(answer_all(&requests)).send().await?;
    assert_eq!(done.text()?, format!("Name: {NAME}; Summary: {SUMMARY} (model {MODEL}); Roots: {ROOT}"));
    assert_eq!(h.demo.stats.answers(), 3);
    assert_eq!(h.demo.stats.tool_calls("ask_three"), 2);
    h.stop().await
}

#[tokio::test]
async fn a_new_session_is_used_only_once_its_get_stream_is_answered() -> TestResult {
    // A server such as the Python SDK's drops a request meant for the GET stream while none is
    // connected, so a call POSTed on a fresh session before its GET was answered could wait for
    // ever on a question never delivered. With the GET's answer held back, the call must still
    // arrive after it, on every session the gateway opens.
    const DELAY: Duration = Duration::from_millis(300);
    let options = DemoOptions { get_stream_delay: Some(DELAY), ..DemoOptions::default() };
    let demo = demo::spawn_loopback(options)?;
    let (gateway, client) = Setup::new().attach(&demo).await?;
    let call = || client.call_tool("list_roots", json!({})).caps(json!({"roots": {}}));
    let (requests, state) = call().send().await?.input_required()?;
    let done = call().state(&state).responses(answer_all(&requests)).send().await?;
    assert_eq!(done.text()?, format!("Roots: {ROOT}"));
    // The roots session is retired; the retry and the readiness probe opened sessions of their own.
    assert!(demo.stats.initializes() >= 2, "{}", demo.stats.initializes());
    assert_eq!(
        demo.stats.calls_before_get_stream(),
        0,
        "a call reached a session before its GET was answered"
    );
    gateway.shutdown().await;
    demo.shutdown().await?;
    Ok(())
}

#[tokio::test]
async fn a_parked_call_asks_again_what_its_retry_left_unanswered_and_gathers_it_into_one_round() -> TestResult
{
    // The retry answers one of the three questions: the parked call takes that answer, asks
    // the other two again, and gathers them into one round. The configured count stands for
    // that round too, so it ends on its window (3 s) with the two; a round that did not gather
    // would wait out its timeout (15 s) and fail the call instead.
    let h = Setup::new()
        .set("mrtr", "mode = \"park\"")
        .set("mrtr", "gather_window_ms = 3000")
        .set("mrtr", "gather_expect = { ask_three = 3 }")
        .set("mrtr", "round_timeout_ms = 15000")
        .start()
        .await?;
    let call = || h.client.call_tool("ask_three", json!({})).caps(everything());
    let (requests, state) = call().send().await?.input_required()?;
    assert_eq!(requests.len(), 3, "{requests:?}");
    let all = answer_all(&requests);
    let (key, answer) = requests
        .iter()
        .find(|(_, q)| q["method"] == "elicitation/create")
        .map(|(k, _)| (k.clone(), all[k].clone()))
        .ok_or_else(|| HarnessError::Unexpected("no elicitation among the questions".into()))?;
    let partial =
        bounded("the partly answered retry", call().state(&state).responses(json!({ key: answer })).send())
            .await??;
    let (again, state) = partial.input_required()?;
    let mut methods: Vec<&str> = again.values().filter_map(|q| q["method"].as_str()).collect();
    methods.sort_unstable();
    assert_eq!(methods, ["roots/list", "sampling/createMessage"]);
    let done = call().state(&state).responses(answer_all(&again)).send().await?;
    assert_eq!(done.text()?, format!("Name: {NAME}; Summary: {SUMMARY} (model {MODEL}); Roots: {ROOT}"));
    assert_eq!(h.demo.stats.tool_calls("ask_three"), 1, "the call was parked and continued, never replayed");
    h.stop().await
}
