//! Legacy clients keep their own 2025-11-25 tasks: through the legacy relay (`src/legacy`), a
//! legacy client's `tools/call` with `task: {ttl}`, `tasks/get`, `tasks/result` (with a question
//! asked and answered in-band on its stream), `tasks/list` and `tasks/cancel` reach the scripted
//! legacy task server (`tests/fixtures/task_server.py`) as the client sent them, and come back as
//! the server answered them. The task bridge (`src/tasks`), which serves such tools to
//! 2026-07-28 clients, takes no part: it counts no task.

use serde_json::{json, Value};

use super::form_only;
use super::tasks::TaskGateway;
use crate::common::harness::metric;
use crate::common::legacy_client::LegacyClient;
use crate::common::stdio::serial;
use crate::common::{HarnessError, TestResult};

/// The `result` of a response message, or the error it carried.
fn result_of(response: &Value) -> TestResult<&Value> {
    response.get("result").ok_or_else(|| HarnessError::Unexpected(format!("no result: {response}")))
}

/// Starts `tool` as a legacy task; returns the server's own task object.
async fn create(client: &LegacyClient, tool: &str) -> TestResult<Value> {
    let params = json!({"name": tool, "arguments": {}, "task": {"ttl": 60_000}});
    let response = client.call("tools/call", params).await?;
    let task = result_of(&response)?["task"].clone();
    if !task["taskId"].is_string() {
        return Err(HarnessError::Unexpected(format!("no legacy CreateTaskResult: {response}")));
    }
    Ok(task)
}

async fn on_task(client: &LegacyClient, method: &str, task: &Value) -> TestResult<Value> {
    client.call(method, json!({"taskId": task["taskId"]})).await
}

#[tokio::test]
async fn a_legacy_client_runs_its_own_tasks_through_the_relay() -> TestResult {
    let _serial = serial().await;
    let gw = TaskGateway::start(&[]).await?;
    let mut client = LegacyClient::new(gw.gateway.url("/mcp"));
    client.initialize(form_only()).await?;
    let listed = client.call("tools/list", json!({})).await?;
    let tools = result_of(&listed)?["tools"].as_array().cloned().unwrap_or_default();
    let count = tools.iter().find(|t| t["name"] == "count_job").cloned().unwrap_or_default();
    assert_eq!(count["execution"]["taskSupport"], "required", "{listed}");

    // A task of the server's own making: its id, its fields, relayed as they are.
    let counted = create(&client, "count_job").await?;
    let id = counted["taskId"].as_str().unwrap_or_default();
    assert!(!id.starts_with("t1.") && counted["pollInterval"] == 100, "the server's own task: {counted}");
    let got = on_task(&client, "tasks/get", &counted).await?;
    assert_eq!(result_of(&got)?["taskId"], counted["taskId"], "{got}");
    let done = on_task(&client, "tasks/result", &counted).await?;
    let result = result_of(&done)?;
    assert_eq!(result["content"][0]["text"], "run 1", "{done}");
    assert_eq!(result["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], counted["taskId"]);

    // A question inside the task comes on the tasks/result stream and is answered in-band.
    let asking = create(&client, "ask_job").await?;
    let answered = on_task(&client, "tasks/result", &asking).await?;
    assert_eq!(result_of(&answered)?["content"][0]["text"], "Hello, Ada", "{answered}");
    assert_eq!(client.answered.load(std::sync::atomic::Ordering::Relaxed), 1);

    let slow = create(&client, "slow_job").await?;
    let listed = client.call("tasks/list", json!({})).await?;
    let ids: Vec<&Value> =
        result_of(&listed)?["tasks"].as_array().into_iter().flatten().map(|t| &t["taskId"]).collect();
    for task in [&counted, &asking, &slow] {
        assert!(ids.contains(&&task["taskId"]), "{} listed: {listed}", task["taskId"]);
    }
    let cancelled = on_task(&client, "tasks/cancel", &slow).await?;
    assert_eq!(result_of(&cancelled)?["status"], "cancelled", "{cancelled}");
    assert_eq!(result_of(&on_task(&client, "tasks/get", &slow).await?)?["status"], "cancelled");
    // The server's own rule holds: a finished task cannot be cancelled again.
    let again = on_task(&client, "tasks/cancel", &slow).await?;
    assert_eq!(again["error"]["code"], -32602, "{again}");

    assert_eq!((gw.events("run count_job"), gw.events("cancel slow_job")), (1, 1));
    assert_eq!(metric(&gw.gateway, "mrtr_gateway_tasks_total{outcome=\"created\"}"), 0.0, "not bridged");
    gw.stop().await
}
