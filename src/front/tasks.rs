//! The front's side of the task bridge (`crate::tasks`): which `tools/call` becomes a task,
//! and the `tasks/get`, `tasks/update` and `tasks/cancel` requests of the tasks extension.
//!
//! A call becomes a task when the tool declares `execution.taskSupport` `required` or
//! `optional` and the request's `clientCapabilities` declare `io.modelcontextprotocol/tasks`.
//! A `required` tool called without the extension is refused with `-32021` naming it (the
//! conformance suite's code; the extension's text says `-32003`, docs/src/tasks.md). Any other
//! call runs as before, without the legacy `task` param a client may have sent: the gateway,
//! not the client, decides what runs as a task upstream.

use std::sync::Arc;

use http::StatusCode;
use serde_json::{json, Value};

use super::outcome::{Outcome, OutcomeLabel};
use super::service::{unknown_method, Call, FrontState};
use super::{relay, respond};
use crate::bridge::upstream_params;
use crate::error::FrontError;
use crate::protocol::jsonrpc::result_bytes;
use crate::protocol::methods::{MrtrMethod, TaskMethod};
use crate::tasks::{extension_declared, Started, TaskError, TaskSupport, Tasks};

/// A `tools/call`: started as a task, or run as any call.
pub(super) async fn tools_call(state: &Arc<FrontState>, mut call: Call) -> Outcome {
    if let Some(params) = call.params.as_mut().and_then(Value::as_object_mut) {
        params.remove("task");
    }
    let Some(tasks) = state.tasks.clone() else { return state.mrtr(call, MrtrMethod::ToolsCall).await };
    match runs_as_task(state, &tasks, &call).await {
        Ok(true) => start(state, &tasks, &call).await,
        Ok(false) => state.mrtr(call, MrtrMethod::ToolsCall).await,
        Err(e) => Outcome::error(Some(&call.id), &e),
    }
}

/// Whether the call starts a task; `-32021` for a `required` tool without the extension. A
/// retry of an input round (it carries a `requestState`) is never a new task.
async fn runs_as_task(state: &FrontState, tasks: &Tasks, call: &Call) -> Result<bool, FrontError> {
    let params = call.params.as_ref();
    let Some(name) = params.and_then(|p| p.get("name")).and_then(Value::as_str) else { return Ok(false) };
    if params.is_some_and(|p| p.get("requestState").is_some()) {
        return Ok(false);
    }
    let support = match tasks.catalogue().support(name) {
        Some(s) => s,
        None => {
            let key = (call.principal.clone(), call.caps.fingerprint());
            let (caps, version) = (call.caps, state.upstream_version);
            let init = move || caps.legacy_initialize(version);
            let catalogues = (state.tool_headers(), Some(tasks.catalogue()));
            relay::list_tools(&state.pool, &state.metrics, key, init, catalogues).await?;
            tasks.catalogue().support(name).unwrap_or(TaskSupport::Forbidden)
        }
    };
    let declared = extension_declared(&call.meta.capabilities);
    match support {
        TaskSupport::Required if !declared => Err(TaskError::ExtensionRequired.into()),
        TaskSupport::Required | TaskSupport::Optional => Ok(declared),
        TaskSupport::Forbidden => Ok(false),
    }
}

async fn start(state: &FrontState, tasks: &Tasks, call: &Call) -> Outcome {
    let key = (call.principal.clone(), call.caps.fingerprint());
    let capabilities = call.caps.legacy_initialize(state.upstream_version);
    let params = upstream_params(call.params.as_ref());
    let bytes = match tasks.start(&call.principal, key, capabilities, params).await {
        Ok(Started::Task(created)) => {
            serde_json::value::to_raw_value(&created).map(|raw| result_bytes(&call.id, &raw))
        }
        Ok(Started::Complete(result)) => {
            serde_json::value::to_raw_value(&result).map(|raw| respond::complete_bytes(&call.id, &raw, ""))
        }
        Err(e) => return Outcome::error(Some(&call.id), &e.into()),
    };
    match bytes {
        Ok(bytes) => Outcome::plain(OutcomeLabel::Complete, respond::json(StatusCode::OK, bytes)),
        Err(e) => Outcome::error(Some(&call.id), &FrontError::internal(e)),
    }
}

/// `tasks/get`, `tasks/update` or `tasks/cancel`.
pub(super) async fn task_request(state: &FrontState, call: &Call, method: TaskMethod) -> Outcome {
    let Some(tasks) = state.tasks.as_deref() else {
        return Outcome::error(Some(&call.id), &unknown_method(method.name()));
    };
    match answer(tasks, call, method).await {
        Ok(result) => match serde_json::value::to_raw_value(&result) {
            Ok(raw) => Outcome::plain(
                OutcomeLabel::Complete,
                respond::json(StatusCode::OK, respond::complete_bytes(&call.id, &raw, "")),
            ),
            Err(e) => Outcome::error(Some(&call.id), &FrontError::internal(e)),
        },
        Err(e) => Outcome::error(Some(&call.id), &e),
    }
}

async fn answer(tasks: &Tasks, call: &Call, method: TaskMethod) -> Result<Value, FrontError> {
    if !extension_declared(&call.meta.capabilities) {
        return Err(TaskError::ExtensionRequired.into());
    }
    let params = call.params.as_ref();
    let task_id = params
        .and_then(|p| p.get("taskId"))
        .and_then(Value::as_str)
        .ok_or_else(|| FrontError::InvalidParams("params.taskId must be a string".into()))?;
    match method {
        TaskMethod::Get => Ok(tasks.get(&call.principal, task_id).await?),
        TaskMethod::Update => {
            let answers = match params.and_then(|p| p.get("inputResponses")) {
                Some(Value::Object(answers)) => answers.clone(),
                _ => return Err(FrontError::InvalidParams("params.inputResponses must be an object".into())),
            };
            tasks.update(&call.principal, task_id, answers).await?;
            Ok(json!({}))
        }
        TaskMethod::Cancel => {
            tasks.cancel(&call.principal, task_id).await?;
            Ok(json!({}))
        }
    }
}
