//! The front's side of the task bridge (`crate::tasks`): which `tools/call` becomes a task,
//! and the `tasks/get`, `tasks/update` and `tasks/cancel` requests of the tasks extension.
//!
//! A call becomes a task when the tool declares `execution.taskSupport` `required` or
//! `optional` and the request's `clientCapabilities` declare `io.modelcontextprotocol/tasks`.
//! A `required` tool called without the extension is refused with `-32021` naming it (the
//! conformance suite's code; the extension's text says `-32003`, docs/src/tasks.md). Any other
//! call runs as before, without the legacy `task` param a client may have sent: the gateway,
//! not the client, decides what runs as a task upstream. A call of a tool without task support
//! may still become a task when the configuration says so (`tasks.long_tools`,
//! `tasks.long_after_ms`): [`Tasks::start_long`] keeps it running upstream as one. A task
//! tool's call that asks before it creates its task answers an input round whose
//! `requestState` is the task's id; its retry goes to [`Tasks::resume`].

use std::sync::Arc;

use http::StatusCode;
use serde_json::{json, Value};

use super::outcome::{Outcome, OutcomeLabel};
use super::service::{unknown_method, Call, FrontState};
use super::{relay, respond};
use crate::bridge::upstream_params;
use crate::error::FrontError;
use crate::mrtr::task_id::TASK_ID_PREFIX;
use crate::mrtr::{input_responses, request_state};
use crate::protocol::jsonrpc::result_bytes;
use crate::protocol::methods::{MrtrMethod, TaskMethod};
use crate::tasks::{extension_declared, Started, TaskError, TaskSupport, Tasks, Trigger};

/// How a `tools/call` runs.
enum Route {
    /// As any call, through the bridge.
    Inline,
    /// As a legacy task upstream.
    LegacyTask,
    /// As an ordinary call upstream, kept running as a task.
    Long(Trigger),
    /// The retry of an input round of a task tool's call that asked before it created its
    /// task: its `requestState` is that task's id.
    Resume(String),
}

/// A `tools/call`: started as a task, or run as any call.
pub(super) async fn tools_call(state: &Arc<FrontState>, mut call: Box<Call>) -> Outcome {
    call.params.remove("task");
    let Some(tasks) = state.tasks.clone() else { return state.mrtr(call, MrtrMethod::ToolsCall).await };
    match route(state, &tasks, &call).await {
        Ok(Route::LegacyTask) => start(state, &tasks, &call, None).await,
        Ok(Route::Long(trigger)) => start(state, &tasks, &call, Some(trigger)).await,
        Ok(Route::Resume(task_id)) => resume(&tasks, &call, &task_id).await,
        Ok(Route::Inline) => state.mrtr(call, MrtrMethod::ToolsCall).await,
        Err(e) => Outcome::error(Some(&call.id), &e),
    }
}

/// Whether the call starts a task, and which; `-32021` for a `required` tool without the
/// extension. A retry of an input round (it carries a `requestState`) is never a new task: it
/// continues a task tool's call when its state is a task id, else it is any call's retry.
async fn route(state: &FrontState, tasks: &Tasks, call: &Call) -> Result<Route, FrontError> {
    let Ok(Some(name)) = call.params.str("name") else {
        return Ok(Route::Inline);
    };
    let name = &*name;
    let declared = extension_declared(&call.meta.capabilities);
    if call.params.get("requestState").is_some() {
        let request_state = request_state(&call.params).ok().flatten();
        return match request_state.filter(|s| s.starts_with(TASK_ID_PREFIX)) {
            Some(_) if !declared => Err(TaskError::ExtensionRequired.into()),
            Some(task_id) => Ok(Route::Resume(task_id.into_owned())),
            None => Ok(Route::Inline),
        };
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
    let long = || declared.then(|| tasks.long_trigger(name, &call.principal)).flatten();
    match support {
        TaskSupport::Required if !declared => Err(TaskError::ExtensionRequired.into()),
        TaskSupport::Required | TaskSupport::Optional if declared => Ok(Route::LegacyTask),
        TaskSupport::Required | TaskSupport::Optional => Ok(Route::Inline),
        TaskSupport::Forbidden => Ok(long().map_or(Route::Inline, Route::Long)),
    }
}

/// Starts the call as a legacy task upstream, or as a long call when `long` says when it
/// becomes a task.
async fn start(state: &FrontState, tasks: &Arc<Tasks>, call: &Call, long: Option<Trigger>) -> Outcome {
    let key = (call.principal.clone(), call.caps.fingerprint());
    let capabilities = call.caps.legacy_initialize(state.upstream_version);
    let params = match call.params.tree() {
        Ok(params) => upstream_params(Some(params)),
        Err(e) => return Outcome::error(Some(&call.id), &e.into()),
    };
    let started = match long {
        None => tasks.start(&call.principal, key, capabilities, params, call.output.clone()).await,
        Some(trigger) => {
            tasks.start_long(&call.principal, key, capabilities, params, trigger, call.output.clone()).await
        }
    };
    reply(call, started)
}

/// The retry of an input round of a task tool's call that asked before it created its task:
/// its answers go to the task's owner, which answers as the call moved on.
async fn resume(tasks: &Tasks, call: &Call, task_id: &str) -> Outcome {
    let tool = call.params.str("name").ok().flatten().unwrap_or_default();
    let answers = match input_responses(&call.params) {
        Ok(answers) => answers.unwrap_or_default(),
        Err(e) => return Outcome::error(Some(&call.id), &FrontError::InvalidParams(e.to_string())),
    };
    reply(call, tasks.resume(&call.principal, task_id, &tool, answers).await)
}

/// The response to a `tools/call` the task bridge served.
fn reply(call: &Call, started: Result<Started, TaskError>) -> Outcome {
    let (label, bytes) = match started {
        Ok(Started::Task(created)) => (
            OutcomeLabel::Complete,
            serde_json::value::to_raw_value(&created).map(|raw| result_bytes(&call.id, &raw)),
        ),
        Ok(Started::InputRequired(round)) => (
            OutcomeLabel::InputRequired,
            serde_json::value::to_raw_value(&round).map(|raw| result_bytes(&call.id, &raw)),
        ),
        Ok(Started::Complete(result)) => (
            OutcomeLabel::Complete,
            serde_json::value::to_raw_value(&result).map(|raw| respond::complete_bytes(&call.id, &raw, "")),
        ),
        Err(e) => return Outcome::error(Some(&call.id), &e.into()),
    };
    match bytes {
        Ok(bytes) => Outcome::plain(label, respond::json(StatusCode::OK, bytes)),
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
    let params = Some(call.params.tree()?);
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
