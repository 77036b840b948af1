//! A task tool's call that asks before it creates its task (`src/tasks/create.rs`), against the
//! scripted task server (`tests/fixtures/task_server.py`, whose `ask_first_job` asks on the
//! call's own stream before it makes its task): the question is an `input_required` round of
//! the `tools/call`, whose `requestState` is the task's id and which carries no `taskId`; the
//! retry gets the `CreateTaskResult`, carrying neither `requestState` nor `inputRequests`, and
//! the task's result reflects the answer. The call runs once upstream: nothing is replayed.
//! Also: two rounds, a call that ends with its own result, a retry for another tool, a forged
//! state, a question the client cannot serve, and the same state sent again.

use http::StatusCode;
use serde_json::{json, Value};

use super::tasks::{with_extension, TaskGateway};
use crate::common::stdio::serial;
use crate::common::{HarnessError, Reply, TestResult};

/// Calls `tool` as a client that declared the extension, with a round's `state` and
/// `answers` when given.
async fn call(
    gw: &TaskGateway,
    tool: &str,
    arguments: Value,
    retry: Option<(&str, Value)>,
) -> TestResult<Reply> {
    let mut request = gw.client.call_tool(tool, arguments).caps(with_extension());
    if let Some((state, answers)) = retry {
        request = request.param("requestState", json!(state)).param("inputResponses", answers);
    }
    request.send().await
}

/// The round's only question: its key and message, and the round's state.
fn question(round: &Value) -> TestResult<(String, String, String)> {
    let requests = round["inputRequests"].as_object().cloned().unwrap_or_default();
    let (key, request) = requests.iter().next().ok_or(HarnessError::Unexpected(round.to_string()))?;
    let message = request["params"]["message"].as_str().unwrap_or_default().to_owned();
    let state = round["requestState"].as_str().unwrap_or_default().to_owned();
    Ok((key.clone(), message, state))
}

fn accept(key: &str, name: &str) -> Value {
    json!({ key: {"action": "accept", "content": {"name": name}} })
}

#[tokio::test]
async fn a_question_before_the_task_is_an_input_round_and_the_retry_gets_the_task() -> TestResult {
    let _serial = serial().await;
    let gw = TaskGateway::start(&[]).await?;
    let first = call(&gw, "ask_first_job", json!({}), None).await?;
    let round = first.result()?.clone();
    assert_eq!(round["resultType"], "input_required", "{round}");
    assert!(round.get("taskId").is_none(), "no task before the last round: {round}");
    let (key, message, state) = question(&round)?;
    assert_eq!(message, "Your name?");
    assert!(state.starts_with("t1."), "{round}");

    let second = call(&gw, "ask_first_job", json!({}), Some((&state, accept(&key, "Ada")))).await?;
    let created = second.result()?.clone();
    assert_eq!(created["resultType"], "task", "{created}");
    assert!(created.get("requestState").is_none() && created.get("inputRequests").is_none(), "{created}");
    let task_id = created["taskId"].as_str().unwrap_or_default().to_owned();
    let done = gw.until(&task_id, "completed").await?;
    assert_eq!(done["result"]["content"][0]["text"], "Hello, Ada", "{done}");
    assert_eq!(gw.events("run ask_first_job"), 1, "the call ran once upstream");

    // The same state again: the call already made its task, which is named again.
    let again = call(&gw, "ask_first_job", json!({}), Some((&state, json!({})))).await?;
    assert_eq!(again.result()?["taskId"], task_id.as_str(), "{}", again.body);
    gw.stop().await
}

#[tokio::test]
async fn each_question_is_a_round_until_the_call_ends_with_its_own_result() -> TestResult {
    let _serial = serial().await;
    let gw = TaskGateway::start(&[]).await?;
    let arguments = json!({"rounds": 2, "at_once": true});
    let first = call(&gw, "ask_first_job", arguments.clone(), None).await?;
    let (key, message, state) = question(first.result()?)?;
    assert_eq!(message, "Your name?");
    let second = call(&gw, "ask_first_job", arguments.clone(), Some((&state, accept(&key, "Ada")))).await?;
    let round = second.result()?.clone();
    assert_eq!(round["resultType"], "input_required", "{round}");
    let (city, message, same) = question(&round)?;
    assert_eq!((message.as_str(), same.as_str()), ("Your city?", state.as_str()));
    assert_ne!(city, key, "keys are never reused within a task");
    let last = call(&gw, "ask_first_job", arguments, Some((&state, accept(&city, "Paris")))).await?;
    let result = last.result()?;
    assert_eq!(result["resultType"], "complete", "{}", last.body);
    assert_eq!(result["content"][0]["text"], "Hello, Ada from Paris", "{}", last.body);
    gw.stop().await
}

#[tokio::test]
async fn a_rounds_state_serves_only_its_own_tool_and_never_a_forgery() -> TestResult {
    let _serial = serial().await;
    let gw = TaskGateway::start(&[]).await?;
    let first = call(&gw, "ask_first_job", json!({}), None).await?;
    let (key, _, state) = question(first.result()?)?;
    let other = call(&gw, "count_job", json!({}), Some((&state, accept(&key, "Ada")))).await?;
    let message = other.expect_error(StatusCode::BAD_REQUEST, -32602)?;
    assert!(message.contains("another tool"), "{message}");
    let forged = call(&gw, "ask_first_job", json!({}), Some(("t1.AAAA", accept(&key, "Ada")))).await?;
    forged.expect_error(StatusCode::BAD_REQUEST, -32602)?;
    // The round is still open for its own tool.
    let second = call(&gw, "ask_first_job", json!({}), Some((&state, accept(&key, "Ada")))).await?;
    assert_eq!(second.result()?["resultType"], "task", "{}", second.body);
    gw.stop().await
}

#[tokio::test]
async fn a_question_the_client_cannot_serve_is_never_a_round() -> TestResult {
    let _serial = serial().await;
    let gw = TaskGateway::start(&[]).await?;
    let no_forms = json!({"extensions": {mrtr_gateway::tasks::EXTENSION: {}}});
    let reply = gw.client.call_tool("ask_first_job", json!({})).caps(no_forms).send().await?;
    let created = reply.result()?.clone();
    assert_eq!(created["resultType"], "task", "the refused question went upstream, not here: {created}");
    let done = gw.until(created["taskId"].as_str().unwrap_or_default(), "completed").await?;
    assert_eq!(done["result"]["content"][0]["text"], "Hello, nobody", "{done}");
    gw.stop().await
}
