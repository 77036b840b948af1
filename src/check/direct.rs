//! The server as a legacy client sees it: one session opened with the gateway's own upstream
//! code ([`crate::upstream::Session`], the same seam the pool drives), declaring what the
//! check's 2026-07-28 client declares, then its lists and the tried calls, questions answered
//! in-band. A tool the server runs only as a legacy task is called as one, as a legacy client
//! must: `tools/call` with `task: {ttl}`, then `tasks/result`, which carries the task's
//! questions and ends with its result.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use super::answers::{question, Answers};
use super::calls::TriedCall;
use super::lists::{self, Items, Lister};
use super::report::{DirectCall, Outcome, Question, Side};
use crate::protocol::jsonrpc::{ErrorObject, Outcome as RpcOutcome};
use crate::protocol::{codes, methods};
use crate::upstream::{Session, UpstreamError, UpstreamEvent, UpstreamSettings};

/// A legacy session on the server.
pub(super) struct Direct {
    session: Session,
    /// Bound on one call, questions included.
    call_timeout: Duration,
}

/// What the direct side saw of the server.
pub(super) struct DirectView {
    pub side: Side,
    pub items: Items,
}

// === impl Direct ===

impl Direct {
    /// Opens the session, declaring `capabilities` (legacy form).
    pub(super) async fn open(
        settings: Arc<UpstreamSettings>,
        capabilities: &Value,
    ) -> Result<Self, UpstreamError> {
        let call_timeout = settings.request_timeout;
        let session = Session::initialize(settings, capabilities).await?;
        Ok(Self { session, call_timeout })
    }

    /// The server's `initialize` answer and its lists.
    pub(super) async fn view(&self) -> DirectView {
        let init = self.session.initialize_result();
        let (items, errors) = lists::read_all(self, &init.capabilities).await;
        let side = Side {
            protocol_version: init.protocol_version.clone(),
            server_info: init.server_info.clone(),
            capabilities: init.capabilities.clone(),
            counts: items.counts(),
            errors,
        };
        DirectView { side, items }
    }

    /// Calls `call.tool` (as a legacy task when `as_task`), answering its questions.
    pub(super) async fn call(&self, call: &TriedCall, as_task: bool) -> DirectCall {
        let mut questions = Vec::new();
        let run = async {
            if !as_task {
                let params = json!({"name": call.tool, "arguments": call.arguments});
                return self.run(call, methods::TOOLS_CALL, params, &mut questions).await;
            }
            let ttl = self.call_timeout.as_millis() as u64;
            let params = json!({"name": call.tool, "arguments": call.arguments, "task": {"ttl": ttl}});
            let created = self.run(call, methods::TOOLS_CALL, params, &mut questions).await?;
            let task_id = created.pointer("/task/taskId").cloned();
            let task_id = task_id
                .ok_or_else(|| format!("the server answered the task request with no task: {created}"))?;
            self.run(call, methods::TASKS_RESULT, json!({"taskId": task_id}), &mut questions).await
        };
        let (outcome, error) = match tokio::time::timeout(self.call_timeout, run).await {
            Ok(Ok(result)) => (super::outcome_of(&result), None),
            Ok(Err(e)) => (Outcome::Error, Some(e)),
            Err(_) => (Outcome::Error, Some(format!("no answer within {:?}", self.call_timeout))),
        };
        DirectCall { outcome, questions, error }
    }

    /// `method(params)` on the session, answering the server's requests, until its response.
    async fn run(
        &self,
        call: &TriedCall,
        method: &str,
        params: Value,
        questions: &mut Vec<Question>,
    ) -> Result<Value, String> {
        let mut running = self.session.call(method, Some(params));
        loop {
            match running.next_event().await.map_err(|e| crate::logging::chain(&e))? {
                Some(UpstreamEvent::Request { id, method, params }) => {
                    questions.push(question(&method, params.as_ref()));
                    let answer = answer(&call.answers, &method, params.as_ref());
                    self.session.respond(&id, answer).await.map_err(|e| crate::logging::chain(&e))?;
                }
                Some(UpstreamEvent::Notification { .. }) => {}
                Some(UpstreamEvent::Response(RpcOutcome::Result(raw))) => {
                    return serde_json::from_str(raw.get()).map_err(|e| e.to_string());
                }
                Some(UpstreamEvent::Response(RpcOutcome::Error(e))) => return Err(rpc_error(&e)),
                None => return Err("the call ended without a response".to_owned()),
            }
        }
    }

    /// Ends the session (stops the process, for a stdio server).
    pub(super) async fn close(&self) {
        if let Err(e) = self.session.close().await {
            tracing::debug!(error = %e, "closing the check's direct session");
        }
    }
}

impl Lister for Direct {
    async fn page(&self, method: &'static str, cursor: Option<&str>) -> Result<Value, String> {
        let request = self.session.request(method, Some(lists::params(cursor)));
        match tokio::time::timeout(self.call_timeout, request).await {
            Err(_) => Err(format!("no answer within {:?}", self.call_timeout)),
            Ok(Err(e)) => Err(crate::logging::chain(&e)),
            Ok(Ok(RpcOutcome::Error(e))) => Err(rpc_error(&e)),
            Ok(Ok(RpcOutcome::Result(raw))) => serde_json::from_str(raw.get()).map_err(|e| e.to_string()),
        }
    }
}

/// The check's answer to a server request, or a refusal of one it does not answer.
fn answer(answers: &Answers, method: &str, params: Option<&Value>) -> Result<Value, ErrorObject> {
    answers.answer(method, params).ok_or_else(|| ErrorObject {
        code: codes::METHOD_NOT_FOUND,
        message: format!("the check does not answer {method}"),
        data: None,
    })
}

pub(super) fn rpc_error(e: &ErrorObject) -> String {
    format!("JSON-RPC error {}: {}", e.code, e.message)
}
