//! Each tool's tasks in the migration report: the tasks a legacy task tool ran as through the
//! task bridge, counted per tool in `GET /admin/tools` and `mrtr_gateway_tool_tasks_total`
//! (created, completed, failed, cancelled, input rounds), and in `mrtr-gateway check`, which
//! calls such a tool as a legacy task directly and follows it as a task of the extension through
//! its embedded gateway, against the scripted task server (`tests/fixtures/task_server.py`).

use std::process::Output;

use http::StatusCode;
use mrtr_gateway::check;
use serde_json::{json, Value};

use super::tasks::TaskGateway;
use crate::common::client::admin_get;
use crate::common::harness::metric;
use crate::common::stdio::serial;
use crate::common::{bounded_for, eventually, HarnessError, TestResult, PROCESS_START_WAIT};

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/task_server.py");

async fn admin_tools(gw: &TaskGateway) -> TestResult<Value> {
    let admin = gw.gateway.admin_addr.ok_or_else(|| HarnessError::Unexpected("no admin port".into()))?;
    let (status, text) = admin_get(&gw.client, admin, "/admin/tools").await?;
    assert_eq!(status, StatusCode::OK, "{text}");
    Ok(serde_json::from_str(&text)?)
}

fn tasks_of(report: &Value, tool: &str) -> Value {
    let tools = report["tools"].as_array().cloned().unwrap_or_default();
    tools.into_iter().find(|t| t["tool"] == tool).map(|t| t["tasks"].clone()).unwrap_or(Value::Null)
}

fn tasks(created: u64, completed: u64, failed: u64, cancelled: u64, input_rounds: u64) -> Value {
    json!({"created": created, "completed": completed, "failed": failed, "cancelled": cancelled,
           "input_rounds": input_rounds})
}

#[tokio::test]
async fn each_tools_tasks_are_counted_in_the_migration_report() -> TestResult {
    let _serial = serial().await;
    let gw = TaskGateway::start(&[]).await?;
    let asking = gw.start_task("ask_job", json!({})).await?;
    let waiting = gw.until(&asking, "input_required").await?;
    let key = waiting["inputRequests"].as_object().and_then(|r| r.keys().next().cloned()).unwrap_or_default();
    let answer = json!({key: {"action": "accept", "content": {"name": "Ada"}}});
    gw.task("tasks/update", &asking, Some(("inputResponses", answer))).await?.result()?;
    gw.until(&asking, "completed").await?;
    let slow = gw.start_task("slow_job", json!({})).await?;
    gw.task("tasks/cancel", &slow, None).await?.result()?;
    let broken = gw.start_task("broken_job", json!({})).await?;
    gw.until(&broken, "failed").await?;
    eventually("every task's end to be counted", || {
        metric(&gw.gateway, "mrtr_gateway_tasks_total{outcome=\"cancelled\"}") == 1.0
            && metric(&gw.gateway, "mrtr_gateway_tasks_total{outcome=\"failed\"}") == 1.0
    })
    .await?;

    let report = admin_tools(&gw).await?;
    assert_eq!(tasks_of(&report, "ask_job"), tasks(1, 1, 0, 0, 1), "{report}");
    assert_eq!(tasks_of(&report, "slow_job"), tasks(1, 0, 0, 1, 0), "{report}");
    assert_eq!(tasks_of(&report, "broken_job"), tasks(1, 0, 1, 0, 0), "{report}");
    let ask = report["tools"].as_array().into_iter().flatten().find(|t| t["tool"] == "ask_job");
    assert_eq!(ask.map(|t| (&t["verdict"], &t["runs"])), Some((&json!("task"), &json!(0))), "{report}");
    let series = "mrtr_gateway_tool_tasks_total{event=\"input_rounds\",tool=\"ask_job\"}";
    assert_eq!(metric(&gw.gateway, series), 1.0);
    gw.stop().await
}

async fn run_check(args: &[&str]) -> TestResult<Output> {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_mrtr-gateway"));
    command.arg("check").args(args).kill_on_drop(true).env("NO_COLOR", "1");
    Ok(bounded_for(PROCESS_START_WAIT, "the check to finish", command.output()).await??)
}

#[tokio::test]
async fn the_check_follows_task_tools_and_counts_their_tasks() -> TestResult {
    let _serial = serial().await;
    let dir = tempfile::tempdir()?;
    let (calls_path, json_path) = (dir.path().join("calls.json"), dir.path().join("report.json"));
    let calls = json!({"answers": {"form": {"action": "accept", "content": {"name": "Ada"}}},
        "calls": [{"tool": "ask_job"}, {"tool": "progress_job"}, {"tool": "count_job"}]});
    std::fs::write(&calls_path, calls.to_string())?;
    let (calls_arg, json_arg) = (calls_path.display().to_string(), json_path.display().to_string());
    let out = run_check(&["--calls", &calls_arg, "--json", &json_arg, "--", "python3", FIXTURE]).await?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(check::exit::OK), "{stdout}");
    let r: Value = serde_json::from_slice(&std::fs::read(&json_path)?)?;
    let calls = r["calls"].as_array().cloned().unwrap_or_default();
    let call = |tool: &str| calls.iter().find(|c| c["tool"] == tool).cloned().unwrap_or(Value::Null);

    // ask_job: one question directly (on its tasks/result), one round per task through the gateway.
    let ask = call("ask_job");
    let question = json!({"method": "elicitation/create", "summary": "form: Your name?"});
    assert_eq!(
        ask["direct"],
        json!({"outcome": "complete", "questions": [question], "error": null}),
        "{ask}"
    );
    let run = json!({"outcome": "complete", "rounds": [[question]], "error": null, "task": true});
    assert_eq!(ask["gateway"], json!([run, run]), "{ask}");
    assert_eq!(ask["tasks"], tasks(2, 2, 0, 0, 2));
    assert_eq!((&ask["verdict"], &ask["stable"]), (&json!("task"), &json!(true)));
    // progress_job asks three times in each task; count_job never.
    assert_eq!(call("progress_job")["tasks"], tasks(2, 2, 0, 0, 6));
    assert_eq!(call("progress_job")["gateway"][1]["rounds"].as_array().map(Vec::len), Some(3));
    assert_eq!(call("count_job")["tasks"], tasks(2, 2, 0, 0, 0));
    assert_eq!(call("count_job")["direct"]["outcome"], "complete");
    let about_calls = r["differences"].as_array().into_iter().flatten().filter(|d| d["kind"] != "capability");
    assert_eq!(about_calls.count(), 0, "both sides agree: {}", r["differences"]);

    assert!(stdout.contains("through the gateway, run 1: complete as a task after 1 round(s)"), "{stdout}");
    let counted = "tasks in the gateway: 2 created, 2 completed, 0 failed, 0 cancelled, 2 input round(s)";
    assert!(stdout.contains(counted), "{stdout}");
    Ok(())
}
