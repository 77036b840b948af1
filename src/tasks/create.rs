//! A legacy task tool's call that asks before it creates its task: the 2026-07-28 client gets
//! the questions as an `input_required` round of its `tools/call`, and its retry gets the
//! `CreateTaskResult` once the legacy server made the task (the extension composed with
//! SEP-2322's input rounds).
//!
//! A legacy (2025-11-25) server may send requests inside the task-augmented `tools/call`
//! itself, before it answers with its task. Such a question belongs to no task yet, and
//! replaying the call to ask it again would run whatever came before it twice. So the call is
//! held, as a long call is (`long.rs`): at its first question the gateway makes its own task,
//! keeps the call running on the task's pinned session, and answers the client
//! `input_required` with the questions and, as `requestState`, the task's sealed id (it names
//! the owner replica: a retry that reaches another replica is forwarded there, `forward.rs`).
//! The retry's `inputResponses` go straight to the waiting upstream requests, and the retry is
//! answered once the call moved on: more questions (another round, with the same state), the
//! task (the `CreateTaskResult`; from then on `tasks/get` follows the legacy task), or the
//! call's own result or error when the server ran the tool without a task. Nothing is
//! replayed. A round waits at most [`defaults::TASK_UPSTREAM_TIMEOUT`] for the call to move
//! on; past it the call is cancelled and the client told so.

use serde::Deserialize;
use serde_json::{json, Map, Value};
use tokio::time::Instant;

use super::live::{gateway_error, take_event, Ending, LiveTask, Phase, CANCELLED, EXPIRED};
use super::metrics::TaskMetrics;
use super::{wire, Started, TaskError};
use crate::defaults;
use crate::protocol::codes;
use crate::protocol::jsonrpc::{ErrorObject, Outcome};
use crate::upstream::{Call, UpstreamError, UpstreamEvent};

const FAILED: &str = "the task's call failed";

/// The one field of the call's answer that tells a task from a result.
#[derive(Deserialize)]
struct AnswerView {
    task: Option<serde::de::IgnoredAny>,
}

// === impl Started ===

impl Started {
    /// The round's answer as an owner sends it to the replica that forwarded the retry.
    pub(super) fn to_wire(&self) -> Value {
        let (round, value) = match self {
            Self::Task(v) => ("task", v),
            Self::Complete(v) => ("complete", v),
            Self::InputRequired(v) => ("input_required", v),
        };
        json!({ "round": round, "value": value })
    }

    /// A round's answer from [`Self::to_wire`]; `None` for anything else.
    pub(super) fn from_wire(mut wire: Value) -> Option<Self> {
        let value = wire.get_mut("value")?.take();
        match wire.get("round")?.as_str()? {
            "task" => Some(Self::Task(value)),
            "complete" => Some(Self::Complete(value)),
            "input_required" => Some(Self::InputRequired(value)),
            _ => None,
        }
    }
}

/// Runs the held call of `task` from its `first` event until the upstream answers it: `None`
/// once it created its task (whose id the task then carries), else how the task ended.
pub(super) async fn hold_call(
    task: &LiveTask,
    mut call: Call,
    first: UpstreamEvent,
    metrics: &TaskMetrics,
    now_ms: &impl Fn() -> u64,
) -> Option<Ending> {
    call.set_deadline(task.expires);
    let mut event = Ok(Some(first));
    loop {
        match event {
            Ok(Some(event)) => {
                if let Some(outcome) = take_event(task, metrics, event, now_ms()).await {
                    return answered(task, outcome, metrics, now_ms());
                }
            }
            Ok(None) | Err(_) if Instant::now() >= task.expires => {
                return Some(expired(task, call, now_ms()).await)
            }
            Ok(None) | Err(_) => {
                let lost = gateway_error("the upstream server was lost during the task's call");
                return Some(if task.finish(Phase::Failed(lost), now_ms()) {
                    Ending::Lost
                } else {
                    task.woken()
                });
            }
        }
        event = tokio::select! {
            biased;
            () = task.cancel.notified() => {
                cancel_call(task, call, CANCELLED).await;
                return Some(task.woken());
            }
            () = tokio::time::sleep_until(task.expires) => return Some(expired(task, call, now_ms()).await),
            event = call.next_event() => event,
        };
    }
}

/// The call's answer: its task, or its result or error, which ends the task.
fn answered(task: &LiveTask, outcome: Outcome, metrics: &TaskMetrics, now_ms: u64) -> Option<Ending> {
    let Outcome::Result(raw) = &outcome else { return Some(task.conclude(outcome, metrics, now_ms)) };
    let view = serde_json::from_str::<AnswerView>(raw.get());
    if !matches!(view, Ok(AnswerView { task: Some(_) })) {
        return Some(task.conclude(outcome, metrics, now_ms));
    }
    let created =
        serde_json::from_str::<Value>(raw.get()).map_err(|_| "not JSON").and_then(wire::read_created);
    match created {
        Ok(wire::Created::Task(legacy)) => {
            task.note_upstream(None, legacy.status_message.as_deref(), now_ms);
            task.created_upstream(legacy.task_id);
            tracing::info!(parent: &task.span, "the task's call created its upstream task");
            None
        }
        Ok(wire::Created::Result(_)) | Err(_) => {
            let error = gateway_error("the upstream server answered the task's call with no task");
            Some(if task.finish(Phase::Failed(error), now_ms) { Ending::Failed } else { task.woken() })
        }
    }
}

async fn expired(task: &LiveTask, call: Call, now_ms: u64) -> Ending {
    task.finish(Phase::Failed(gateway_error(EXPIRED)), now_ms);
    cancel_call(task, call, EXPIRED).await;
    Ending::Expired
}

/// Tells the upstream the call is over (`notifications/cancelled`).
async fn cancel_call(task: &LiveTask, call: Call, reason: &str) {
    if let Err(e) = task.session.cancel(call, reason).await {
        tracing::debug!(error = %e, "could not send notifications/cancelled upstream");
    }
}

/// Answers a round of `task`'s call (its first, or a retry's once its answers went upstream)
/// as soon as the call moved on, within [`defaults::TASK_UPSTREAM_TIMEOUT`]; past it the task
/// is cancelled. `task_id` is its sealed id, the round's `requestState`.
pub(super) async fn round_reply(task: &LiveTask, task_id: &str) -> Result<Started, TaskError> {
    let deadline = Instant::now() + defaults::TASK_UPSTREAM_TIMEOUT;
    loop {
        let changed = task.changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        if let Some(reply) = settled(task, task_id) {
            return reply;
        }
        if tokio::time::timeout_at(deadline, changed).await.is_err() {
            tracing::info!(parent: &task.span, "the task's call did not move on in time: cancelled");
            task.cancel(super::unix_ms());
            return Err(TaskError::Unavailable(UpstreamError::Timeout(defaults::TASK_UPSTREAM_TIMEOUT)));
        }
    }
}

/// The round's answer when the call has moved on: its open questions, its task, or how it
/// ended; `None` while it runs with nothing to show.
fn settled(task: &LiveTask, task_id: &str) -> Option<Result<Started, TaskError>> {
    let snapshot = task.snapshot();
    if task.upstream_task().is_some() {
        return Some(Ok(Started::Task(wire::create_result(task_id, &snapshot))));
    }
    match snapshot.status {
        "input_required" => {
            let requests = snapshot.input_requests.unwrap_or_default();
            Some(Ok(Started::InputRequired(input_required(requests, task_id))))
        }
        "completed" => Some(Ok(Started::Complete(snapshot.result.unwrap_or(Value::Null)))),
        "failed" => Some(Err(TaskError::Upstream(error_object(snapshot.error)))),
        "cancelled" => Some(Err(TaskError::Upstream(ErrorObject {
            code: codes::INTERNAL_ERROR,
            message: CANCELLED.to_owned(),
            data: None,
        }))),
        _ => None,
    }
}

/// The `InputRequiredResult` of a round.
fn input_required(requests: Map<String, Value>, task_id: &str) -> Value {
    json!({ "resultType": "input_required", "inputRequests": requests, "requestState": task_id })
}

/// A failed task's error as a JSON-RPC error object (the gateway's own when it is not one).
fn error_object(error: Option<Value>) -> ErrorObject {
    error.and_then(|e| serde_json::from_value(e).ok()).unwrap_or_else(|| ErrorObject {
        code: codes::INTERNAL_ERROR,
        message: FAILED.to_owned(),
        data: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_names_its_state_and_a_failure_keeps_its_code() {
        let round = input_required(Map::from_iter([("elicitation-1".to_owned(), json!({}))]), "t1.x");
        assert_eq!(round["resultType"], "input_required");
        assert_eq!(round["requestState"], "t1.x");
        assert!(round.get("taskId").is_none());
        let e = error_object(Some(json!({"code": -32602, "message": "no such user"})));
        assert_eq!((e.code, e.message.as_str()), (-32602, "no such user"));
        assert_eq!(error_object(Some(json!("junk"))).code, codes::INTERNAL_ERROR);
    }

    #[test]
    fn a_rounds_answer_survives_the_trip_between_replicas() {
        for started in
            [Started::Task(json!({"taskId": "t1.x"})), Started::Complete(json!({"resultType": "task"}))]
        {
            let back = Started::from_wire(started.to_wire()).expect("a round");
            assert_eq!(format!("{back:?}"), format!("{started:?}"), "a result is never taken for a task");
        }
        assert!(Started::from_wire(json!({"round": "other", "value": 1})).is_none());
        assert!(Started::from_wire(json!({"taskId": "t1.x"})).is_none());
    }
}
