//! Task requests between replicas, both halves: the forwarder's side of the task bridge's
//! [`TaskLink`] (a `tasks/get`, `tasks/update` or `tasks/cancel`, or the retry of a task's
//! input round, sent to the replica that owns the task), the internal listener's side that
//! serves them, and their wire format.
//!
//! They travel like forwarded retries ([`super::forward`]): a POST to the owner's internal
//! listener, signed with the replica MAC, under the same connect and accept bounds, and the
//! whole exchange bounded by the one upstream exchange the owner may make for it. The owner
//! serves the request with its task bridge as if its own client had sent it
//! ([`Tasks::serve_forwarded`], which never forwards again), and answers one JSON body: the
//! result, or the error object and HTTP status it would have sent its own client (which carry
//! no upstream or internal detail; that stays in the owner's log).
//!
//! An exchange that fails before the owner answered (refused, reset, timed out, not accepted in
//! time) means the owner is gone; any other failure (a refused MAC, a body that is not ours)
//! means it answered nothing usable. The task bridge decides what the client sees of each.

use std::sync::Arc;

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::forward::{ForwardError, Forwarder};
use crate::body::FrontBody;
use crate::defaults;
use crate::error::FrontError;
use crate::protocol::jsonrpc::ErrorObject;
use crate::tasks::{LinkFailure, OwnerAnswer, OwnerCall, OwnerCalling, TaskLink, TaskOp, Tasks};

/// The path of the internal listener that takes forwarded task requests.
pub const TASKS_PATH: &str = "/internal/tasks";

/// A forwarded task request.
#[derive(Debug, Serialize, Deserialize)]
pub struct WireTaskRequest {
    pub principal: String,
    pub task_id: String,
    /// `get`, `update`, `cancel` or `resume`.
    pub op: String,
    /// The `inputResponses` of an update or a resume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answers: Option<Map<String, Value>>,
    /// The tool a resume calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
}

/// The owner's answer.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WireTaskReply {
    Answer(Value),
    Error { error: ErrorObject, status: u16 },
}

// === impl WireTaskRequest ===

impl WireTaskRequest {
    fn new(call: &OwnerCall<'_>) -> Self {
        let (answers, tool) = match call.op {
            TaskOp::Update(answers) => (Some(answers.clone()), None),
            TaskOp::Resume { tool, answers } => (Some(answers.clone()), Some(tool.clone())),
            TaskOp::Get | TaskOp::Cancel => (None, None),
        };
        Self {
            principal: call.principal.to_owned(),
            task_id: call.task_id.to_owned(),
            op: call.op.name().to_owned(),
            answers,
            tool,
        }
    }

    /// The op it names; `None` for an unknown one.
    fn op(&mut self) -> Option<TaskOp> {
        match self.op.as_str() {
            "get" => Some(TaskOp::Get),
            "update" => Some(TaskOp::Update(self.answers.take().unwrap_or_default())),
            "cancel" => Some(TaskOp::Cancel),
            "resume" => Some(TaskOp::Resume {
                tool: self.tool.take()?,
                answers: self.answers.take().unwrap_or_default(),
            }),
            _ => None,
        }
    }
}

// === the forwarding half ===

impl TaskLink for Forwarder {
    fn call<'a>(&'a self, call: OwnerCall<'a>) -> OwnerCalling<'a> {
        Box::pin(async move {
            match tokio::time::timeout(self.task_timeout, self.exchange_task(&call)).await {
                Ok(Ok(WireTaskReply::Answer(answer))) => Ok(OwnerAnswer::Answered(answer)),
                Ok(Ok(WireTaskReply::Error { error, status })) => Ok(OwnerAnswer::Refused { error, status }),
                Ok(Err(e)) => Err(classify(e)),
                Err(_) => Err(LinkFailure::Gone(Box::new(ForwardError::Timeout(self.task_timeout)))),
            }
        })
    }
}

impl Forwarder {
    async fn exchange_task(&self, call: &OwnerCall<'_>) -> Result<WireTaskReply, ForwardError> {
        let body = serde_json::to_vec(&WireTaskRequest::new(call))
            .map_err(|e| ForwardError::Build(e.to_string()))?;
        let response = self.post(call.owner, TASKS_PATH, body).await?;
        let limited = Limited::new(response.into_body(), defaults::MAX_FORWARD_BYTES);
        let bytes = limited.collect().await.map_err(|e| ForwardError::Body(e.to_string()))?.to_bytes();
        serde_json::from_slice(&bytes).map_err(|e| ForwardError::Body(e.to_string()))
    }
}

/// An owner that was not reached, or did not answer in time, is gone.
fn classify(e: ForwardError) -> LinkFailure {
    match e {
        ForwardError::Request(_) | ForwardError::Unaccepted(_) | ForwardError::Timeout(_) => {
            LinkFailure::Gone(Box::new(e))
        }
        ForwardError::Url(_) | ForwardError::Build(_) | ForwardError::Status(_) | ForwardError::Body(_) => {
            LinkFailure::Failed(Box::new(e))
        }
    }
}

// === the serving half ===

/// Serves a verified forwarded task request (`body`) with `tasks`, this replica's task bridge.
pub(super) async fn serve(tasks: Option<&Arc<Tasks>>, body: &[u8]) -> Response<FrontBody> {
    let Ok(mut wire) = serde_json::from_slice::<WireTaskRequest>(body) else {
        return plain(StatusCode::BAD_REQUEST, "not a forwarded task request");
    };
    let Some(op) = wire.op() else { return plain(StatusCode::BAD_REQUEST, "not a forwarded task request") };
    let Some(tasks) = tasks else { return plain(StatusCode::NOT_FOUND, "tasks are off on this replica") };
    let reply = match tasks.serve_forwarded(&wire.principal, &wire.task_id, op).await {
        Ok(answer) => WireTaskReply::Answer(answer),
        Err(e) => {
            let e = FrontError::from(e);
            tracing::info!(error = %e.detail(), "a forwarded task request failed");
            WireTaskReply::Error { error: e.to_object(), status: e.status().as_u16() }
        }
    };
    match serde_json::to_vec(&reply) {
        Ok(bytes) => {
            let mut response = Response::new(FrontBody::full(Bytes::from(bytes)));
            response.headers_mut().insert(CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
            response
        }
        Err(_) => plain(StatusCode::INTERNAL_SERVER_ERROR, "internal error"),
    }
}

fn plain(status: StatusCode, text: &'static str) -> Response<FrontBody> {
    let mut response = Response::new(FrontBody::full(Bytes::from_static(text.as_bytes())));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, http::HeaderValue::from_static("text/plain"));
    response
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_task_request_survives_the_trip() {
        let answers = json!({"elicitation-1": {"action": "accept"}}).as_object().cloned().unwrap_or_default();
        let op = TaskOp::Update(answers.clone());
        let call = OwnerCall { owner: "http://o", principal: "alice", task_id: "t1.x", op: &op };
        let text = serde_json::to_string(&WireTaskRequest::new(&call)).unwrap();
        let mut back: WireTaskRequest = serde_json::from_str(&text).unwrap();
        assert_eq!((back.principal.as_str(), back.task_id.as_str()), ("alice", "t1.x"));
        assert!(matches!(back.op(), Some(TaskOp::Update(a)) if a == answers));
        let get =
            serde_json::to_string(&WireTaskRequest::new(&OwnerCall { op: &TaskOp::Get, ..call })).unwrap();
        assert!(!get.contains("answers"), "{get}");
        let resume = TaskOp::Resume { tool: "book".into(), answers: answers.clone() };
        let text = serde_json::to_string(&WireTaskRequest::new(&OwnerCall { op: &resume, ..call })).unwrap();
        let mut back: WireTaskRequest = serde_json::from_str(&text).unwrap();
        assert!(
            matches!(back.op(), Some(TaskOp::Resume { tool, answers: a }) if tool == "book" && a == answers)
        );
        let mut toolless: WireTaskRequest =
            serde_json::from_value(json!({"principal": "a", "task_id": "t", "op": "resume"})).unwrap();
        assert!(toolless.op().is_none(), "a resume names its tool");
        let mut odd: WireTaskRequest =
            serde_json::from_value(json!({"principal": "a", "task_id": "t", "op": "result"})).unwrap();
        assert!(odd.op().is_none());
    }

    #[test]
    fn only_an_owner_never_reached_is_gone() {
        assert!(matches!(classify(ForwardError::Request("refused".into())), LinkFailure::Gone(_)));
        let late = ForwardError::Unaccepted(std::time::Duration::from_secs(1));
        assert!(matches!(classify(late), LinkFailure::Gone(_)));
        assert!(matches!(classify(ForwardError::Status(StatusCode::UNAUTHORIZED)), LinkFailure::Failed(_)));
        assert!(matches!(classify(ForwardError::Body("junk".into())), LinkFailure::Failed(_)));
    }
}
