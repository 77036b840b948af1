//! Each tool's tasks in the migration report: the tasks a legacy task tool ran as through the
//! task bridge, counted per tool in `GET /admin/tools` and `mrtr_gateway_tool_tasks_total`
//! (created, completed, failed, cancelled, input rounds), against the scripted task server
//! (`tests/fixtures/task_server.py`).

use http::StatusCode;
use serde_json::{json, Value};

use super::tasks::TaskGateway;
use crate::common::client::admin_get;
use crate::common::harness::metric;
use crate::common::stdio::serial;
use crate::common::{eventually, HarnessError, TestResult};

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
