//! What a legacy server sends inside a task besides its result (`src/tasks/live.rs`), on its open
//! `tasks/result` stream, against the scripted server (`tests/fixtures/task_server.py`):
//! - the `notifications/progress` become the task's `statusMessage` in `tasks/get`: the progress
//!   `message`, else `progress X/Y`, or `progress X` without a total. The server reports progress
//!   only when the call carried a `progressToken`, which the client here does not send: the
//!   gateway gives its own;
//! - a request that names no task (no related-task `_meta`) is not one of the task's questions:
//!   it is refused upstream and never shown to the client.

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

#[tokio::test]
async fn a_request_that_names_no_task_is_not_the_tasks_question() -> TestResult {
    let _serial = serial().await;
    let gw = TaskGateway::start(&[]).await?;
    let task_id = gw.start_task("stray_job", json!({})).await?;
    let waiting = gw.until(&task_id, "input_required").await?;
    let requests = waiting["inputRequests"].as_object().cloned().unwrap_or_default();
    assert_eq!(requests.len(), 1, "only the task's own question: {waiting}");
    let (key, request) = requests.iter().next().map(|(k, r)| (k.clone(), r.clone())).unwrap_or_default();
    assert_eq!(request["params"]["message"], "Your name?", "{waiting}");
    let answers = json!({key: {"action": "accept", "content": {"name": "Ada"}}});
    gw.task("tasks/update", &task_id, Some(("inputResponses", answers))).await?.result()?;
    let done = gw.until(&task_id, "completed").await?;
    assert_eq!(done["result"]["content"][0]["text"], "roots error; Hello, Ada", "{done}");
    gw.stop().await
}
