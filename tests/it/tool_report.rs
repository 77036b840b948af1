//! The per-tool migration report: real rounds through the gateway in front of the embedded demo
//! (`greet`, `confirm_twice`, `flaky_question`, `echo`), then `GET /admin/tools` and `/metrics`
//! read on the admin port, with exact counts per tool; and a client that goes away mid-call.

use http::StatusCode;
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::form_only;
use crate::common::client::admin_get;
use crate::common::faulty::tools;
use crate::common::harness::metric_in;
use crate::common::rig::Rig;
use crate::common::{answer_all, eventually, Harness, HarnessError, Setup, TestResult};

/// Rounds a chain may take in these tests: `flaky_question` hits it after three.
const MAX_ROUNDS: u32 = 3;

/// Runs one call of `tool` to its end, answering every question; returns the runs it took.
async fn call_to_the_end(h: &Harness, tool: &str) -> TestResult<u32> {
    let call = || h.client.call_tool(tool, json!({})).caps(form_only());
    let mut reply = call().send().await?;
    let mut runs = 1;
    while let Ok((requests, state)) = reply.input_required() {
        reply = call().state(&state).responses(answer_all(&requests)).send().await?;
        runs += 1;
    }
    Ok(runs)
}

/// `GET /admin/tools`, parsed.
async fn report(h: &Harness) -> TestResult<Value> {
    let admin = h.gateway.admin_addr.ok_or_else(|| HarnessError::Unexpected("no admin listener".into()))?;
    let (status, text) = admin_get(&h.client, admin, "/admin/tools").await?;
    assert_eq!(status, StatusCode::OK, "{text}");
    Ok(serde_json::from_str(&text)?)
}

fn entry<'a>(report: &'a Value, tool: &str) -> &'a Value {
    let tools = report["tools"].as_array().map(Vec::as_slice).unwrap_or_default();
    tools.iter().find(|t| t["tool"] == tool).unwrap_or_else(|| panic!("no entry for {tool} in {report}"))
}

/// `[completed, failed, abandoned]`, `runs`, `[direct, replay, park, forwarded, fallback]`.
fn calls_and_runs(e: &Value) -> (Value, Value, Value) {
    let c = &e["calls"];
    let s = &e["served"];
    (
        json!([c["completed"], c["failed"], c["abandoned"]]),
        e["runs"].clone(),
        json!([s["direct"], s["replay"], s["park"], s["forwarded"], s["fallback"]]),
    )
}

/// `[count, sum, max]` of `rounds_per_call` or `questions_per_round`.
fn counts(e: &Value, field: &str) -> Value {
    json!([e[field]["count"], e[field]["sum"], e[field]["max"]])
}

#[tokio::test]
async fn the_report_counts_every_tool_of_the_demo_exactly() -> TestResult {
    let h = Setup::new().set("mrtr", &format!("max_rounds = {MAX_ROUNDS}")).start().await?;
    assert_eq!(call_to_the_end(&h, "greet").await?, 2);
    assert_eq!(call_to_the_end(&h, "confirm_twice").await?, 3);
    // Each replay rolls a new question: it is asked again until the round cap fails the call.
    assert_eq!(call_to_the_end(&h, "flaky_question").await?, MAX_ROUNDS + 1);
    for _ in 0..2 {
        h.client.call_tool("echo", json!({"message": "m"})).send().await?.text()?;
    }
    // The demo answers a tool it does not have with a tool error: that name gets no entry.
    h.client.call_tool("no_such_tool", json!({})).send().await?;

    let r = report(&h).await?;
    let names: Vec<&str> =
        r["tools"].as_array().into_iter().flatten().filter_map(|t| t["tool"].as_str()).collect();
    assert_eq!(names, ["confirm_twice", "echo", "flaky_question", "greet", "(other)"], "{r}");

    let greet = entry(&r, "greet");
    assert_eq!(calls_and_runs(greet), (json!([1, 0, 0]), json!(2), json!([1, 1, 0, 0, 0])));
    assert_eq!(counts(greet, "rounds_per_call"), json!([1, 1, 1]));
    assert_eq!(counts(greet, "questions_per_round"), json!([1, 1, 1]));
    assert_eq!((&greet["verdict"], &greet["divergences"]), (&json!("in-band friendly"), &json!(0)));

    let confirm = entry(&r, "confirm_twice");
    assert_eq!(calls_and_runs(confirm), (json!([1, 0, 0]), json!(3), json!([1, 2, 0, 0, 0])));
    assert_eq!(counts(confirm, "rounds_per_call"), json!([1, 2, 2]));
    assert_eq!(confirm["rounds_per_call"]["mean"], 2.0);
    assert_eq!(confirm["rounds_per_call"]["histogram"]["2"], 1);
    assert_eq!(counts(confirm, "questions_per_round"), json!([2, 2, 1]));
    assert_eq!((&confirm["divergence_rate"], &confirm["verdict"]), (&json!(0.0), &json!("in-band friendly")));

    let flaky = entry(&r, "flaky_question");
    assert_eq!(calls_and_runs(flaky), (json!([0, 1, 0]), json!(4), json!([1, 3, 0, 0, 0])));
    assert_eq!(counts(flaky, "questions_per_round"), json!([3, 3, 1]));
    assert_eq!(flaky["rounds_per_call"]["count"], 0, "no call of it completed");
    assert_eq!((&flaky["divergences"], &flaky["divergence_rate"]), (&json!(3), &json!(1.0)));
    assert_eq!(flaky["verdict"], "diverges");

    let echo = entry(&r, "echo");
    assert_eq!(calls_and_runs(echo), (json!([2, 0, 0]), json!(2), json!([2, 0, 0, 0, 0])));
    assert_eq!(counts(echo, "rounds_per_call"), json!([2, 0, 0]));
    assert_eq!(counts(echo, "questions_per_round"), json!([0, 0, null]));
    assert_eq!((&echo["verdict"], &echo["divergence_rate"]), (&json!("plain"), &Value::Null));

    let other = entry(&r, "(other)");
    assert_eq!(calls_and_runs(other), (json!([1, 0, 0]), json!(1), json!([1, 0, 0, 0, 0])));
    assert_eq!((&other["folded"], &other["verdict"]), (&json!(true), &json!("folded")));

    for tool in ["greet", "confirm_twice", "flaky_question", "echo"] {
        let latency = &entry(&r, tool)["latency_ms"];
        let (p50, p99, max) = (latency["p50"].as_f64(), latency["p99"].as_f64(), latency["max"].as_f64());
        assert!(p50.is_some() && p50 <= p99 && p99 <= max, "{tool}: {latency}");
    }

    let admin = h.gateway.admin_addr.ok_or_else(|| HarnessError::Unexpected("no admin listener".into()))?;
    let (_, text) = admin_get(&h.client, admin, "/metrics").await?;
    let series = |s: &str| metric_in(&text, &format!("mrtr_gateway_{s}"));
    assert_eq!(series(r#"tool_calls_total{result="completed",tool="greet"}"#), 1.0);
    assert_eq!(series(r#"tool_calls_total{result="failed",tool="flaky_question"}"#), 1.0);
    assert_eq!(series(r#"tool_calls_total{result="completed",tool="(other)"}"#), 1.0);
    assert_eq!(series(r#"tool_runs_total{served="replay",tool="confirm_twice"}"#), 2.0);
    assert_eq!(series(r#"tool_runs_total{served="direct",tool="echo"}"#), 2.0);
    assert_eq!(series(r#"tool_runs_total{served="park",tool="greet"}"#), 0.0);
    assert_eq!(series(r#"tool_call_rounds_sum{tool="confirm_twice"}"#), 2.0);
    assert_eq!(series(r#"tool_call_rounds_count{tool="echo"}"#), 2.0);
    assert_eq!(series(r#"tool_round_questions_count{tool="flaky_question"}"#), 3.0);
    assert_eq!(series(r#"tool_divergences_total{tool="flaky_question"}"#), 3.0);
    assert_eq!(series(r#"tool_run_duration_seconds_count{tool="flaky_question"}"#), 4.0);
    assert!(!text.contains("no_such_tool"), "a name without an entry never becomes a label");
    h.stop().await
}

#[tokio::test]
async fn a_run_whose_client_goes_away_counts_as_abandoned() -> TestResult {
    let rig = Rig::start().await?;
    let bytes = rig.client.call_tool(tools::WAIT, json!({})).http1_bytes()?;
    let mut tcp = TcpStream::connect(rig.gateway.front_addr).await?;
    tcp.write_all(&bytes).await?;
    let stats = rig.upstream.stats();
    eventually("the call to run upstream", || stats.open_streams() == 1).await?;
    drop(tcp);
    let report = &rig.gateway.metrics.tools;
    let abandoned = || report.snapshot().tools.iter().any(|t| t.calls.abandoned == 1);
    eventually("the run to be recorded as abandoned", abandoned).await?;
    let snapshot = report.snapshot();
    let other = snapshot.tools.last().filter(|t| t.folded);
    // It never completed or asked, so it has no entry of its own yet: it counts under (other).
    let other = other.ok_or_else(|| HarnessError::Unexpected(format!("no (other) entry: {snapshot:?}")))?;
    assert_eq!((other.calls.abandoned, other.calls.completed, other.served.direct), (1, 0, 1));
    assert_eq!(other.latency_ms.max, None, "an abandoned run has no reply to time");
    let ok = snapshot.tools.iter().find(|t| t.tool == tools::OK).map(|t| t.calls.completed);
    assert_eq!(ok, Some(1), "the rig's first call");
    rig.stop().await
}
