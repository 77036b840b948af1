//! Progress inside a task (`src/tasks/live.rs`): the `notifications/progress` a legacy server
//! sends during a task, on its open `tasks/result` stream, become the task's `statusMessage` in
//! `tasks/get`: the progress `message`, else `progress X/Y`, or `progress X` without a total.
//! The scripted server (`tests/fixtures/task_server.py`) reports progress only when the call
//! carried a `progressToken`, which the client here does not send: the gateway gives its own.

use serde_json::{json, Map, Value};

use super::tasks::TaskGateway;
use crate::common::stdio::serial;
use crate::common::TestResult;

#[tokio::test]
async fn progress_inside_a_task_becomes_its_status_message() -> TestResult {
    let _serial = serial().await;
    let gw = TaskGateway::start(&[]).await?;
    let task_id = gw.start_task("progress_job", json!({})).await?;
    // Each progress note is followed by a question that holds the task, so each is seen.
    for expected in ["fetching", "progress 2/3", "progress 3"] {
        let waiting = gw.until(&task_id, "input_required").await?;
        assert_eq!(waiting["status"], "input_required", "{waiting}");
        assert_eq!(waiting["statusMessage"], expected, "{waiting}");
        let requests = waiting["inputRequests"].as_object().cloned().unwrap_or_default();
        let answers: Map<String, Value> = requests
            .keys()
            .map(|k| (k.clone(), json!({"action": "accept", "content": {"name": "x"}})))
            .collect();
        gw.task("tasks/update", &task_id, Some(("inputResponses", Value::Object(answers))))
            .await?
            .result()?;
    }
    let done = gw.until(&task_id, "completed").await?;
    assert_eq!(done["result"]["content"][0]["text"], "progress done", "{done}");
    assert_eq!(done["statusMessage"], "progress 3", "the last note stays: {done}");
    gw.stop().await
}
