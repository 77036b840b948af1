//! The check's 2026-07-28 client following a task: a tool the gateway serves as a task of the
//! tasks extension (`crate::tasks`) answers the call with a `CreateTaskResult`, and the client
//! then does what a client of the extension does: polls `tasks/get` at the task's
//! `pollIntervalMs`, answers each new set of `inputRequests` through `tasks/update` (the same
//! answers as an `input_required` round gets), and takes the result of the `completed` task. Each
//! set of new questions is one of the run's rounds, so the report compares them with the
//! questions the server asked directly as it does for any call.

use std::collections::HashSet;
use std::time::Duration;

use serde_json::{json, Map, Value};
use tokio::time::Instant;

use super::calls::TriedCall;
use super::modern::{answer_requests, Modern};
use super::report::{GatewayRun, Outcome, Question};
use crate::protocol::methods;

/// Bounds on the `pollIntervalMs` the gateway suggests: the check neither spins nor dozes.
const POLL_MIN: Duration = Duration::from_millis(10);
const POLL_MAX: Duration = Duration::from_secs(5);

/// Follows the task `created` names until it ends, within `wait`; `rounds` are the call's rounds
/// before it became a task.
pub(super) async fn follow(
    client: &Modern<'_>,
    call: &TriedCall,
    created: &Value,
    mut rounds: Vec<Vec<Question>>,
    wait: Duration,
) -> GatewayRun {
    let Some(id) = created.get("taskId").and_then(Value::as_str) else {
        return ended(Outcome::Error, rounds, Some("a CreateTaskResult without a taskId".to_owned()));
    };
    let pause = created.get("pollIntervalMs").and_then(Value::as_u64).map_or(POLL_MAX, Duration::from_millis);
    let pause = pause.clamp(POLL_MIN, POLL_MAX);
    let deadline = Instant::now() + wait;
    let mut answered = HashSet::new();
    while Instant::now() < deadline {
        tokio::time::sleep(pause).await;
        let task = match client.request(methods::TASKS_GET, Some(id), json!({"taskId": id})).await {
            Ok(task) => task,
            Err(e) => return ended(Outcome::Error, rounds, Some(e)),
        };
        match task.get("status").and_then(Value::as_str) {
            Some("completed") => {
                let result = task.get("result").cloned().unwrap_or(Value::Null);
                return ended(super::outcome_of(&result), rounds, None);
            }
            Some("failed") => {
                let why = task.pointer("/error/message").and_then(Value::as_str).unwrap_or("no error given");
                return ended(Outcome::Error, rounds, Some(format!("the task failed: {why}")));
            }
            Some("cancelled") => {
                return ended(Outcome::Error, rounds, Some("the task was cancelled".to_owned()))
            }
            _ => {}
        }
        let fresh = new_questions(&task, &answered);
        if fresh.is_empty() {
            continue;
        }
        let (questions, responses) = answer_requests(call, &fresh);
        rounds.push(questions);
        answered.extend(fresh.keys().cloned());
        let update = json!({"taskId": id, "inputResponses": responses});
        if let Err(e) = client.request(methods::TASKS_UPDATE, Some(id), update).await {
            return ended(Outcome::Error, rounds, Some(e));
        }
    }
    let _ = client.request(methods::TASKS_CANCEL, Some(id), json!({"taskId": id})).await;
    ended(Outcome::Error, rounds, Some(format!("the task did not end within {wait:?}: cancelled")))
}

/// The task's open questions not answered yet (keys are unique over a task's life).
fn new_questions(task: &Value, answered: &HashSet<String>) -> Map<String, Value> {
    let open = task.get("inputRequests").and_then(Value::as_object).into_iter().flatten();
    open.filter(|(key, _)| !answered.contains(*key)).map(|(k, v)| (k.clone(), v.clone())).collect()
}

fn ended(outcome: Outcome, rounds: Vec<Vec<Question>>, error: Option<String>) -> GatewayRun {
    GatewayRun { outcome, rounds, error, task: true }
}
