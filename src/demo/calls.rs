//! Runs `tools/call`, `prompts/get` and `resources/read`: each in a task of its own that writes
//! the call's SSE stream and ends it with the response.
//!
//! The task is registered with its session before it starts, so `notifications/cancelled` (or
//! the end of the session) can stop it; a stopped call writes nothing more, which ends its
//! stream without a response, as the transport spec allows for cancelled requests. Every call
//! is bounded by the server's maximum call duration.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::oneshot;

use super::catalog::{self, Tool};
use super::context::CallContext;
use super::resources::COUNTER_URI;
use super::session::{Session, SessionError};
use super::sse::{SseBody, SseError, SseWriter};
use super::tools::{self, NameAnswer, ToolOutcome};
use super::Shared;
use crate::protocol::jsonrpc::{error_bytes, result_bytes, ErrorObject, Request};
use crate::protocol::{codes, meta, methods, RequestId};

/// The code the TypeScript SDK uses for timeouts.
const TIMEOUT_CODE: i64 = -32001;

/// Errors that keep a call from starting.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CallError {
    #[error(transparent)]
    Session(#[from] SessionError),
}

/// How a call ends on the wire.
enum CallOutcome {
    Result(Value),
    Error(ErrorObject),
    Abort,
}

/// Starts `request` in its own task and returns the body of its SSE stream.
pub(crate) fn start(shared: &Shared, session: Arc<Session>, request: Request) -> Result<SseBody, CallError> {
    let (stream, body) = match shared.options.close_after_priming {
        Some(_) if session.primes_streams() => session.resumable_stream(),
        _ => session.stream(),
    };
    let progress_token =
        request.params.as_ref().and_then(|p| p.get("_meta")?.get(meta::PROGRESS_TOKEN).cloned());
    let ctx = CallContext {
        session: Arc::clone(&session),
        stream,
        stats: Arc::clone(&shared.stats),
        request_timeout: shared.options.request_timeout,
        progress_token,
        resources: Arc::clone(&shared.resources),
    };
    let (go, ready) = oneshot::channel();
    let id = request.id.clone();
    let limits = Limits {
        duration: shared.options.max_call_duration,
        detach_after_priming: shared.options.close_after_priming,
    };
    let task = tokio::spawn(run(ctx, request, ready, limits));
    match session.track_call(id, task.abort_handle()) {
        Ok(serial) => {
            let _ = go.send(serial);
            Ok(body)
        }
        Err(error) => {
            task.abort();
            Err(error.into())
        }
    }
}

/// Like the reference server (and only when enabled), asks the client's roots on the GET
/// stream shortly after `notifications/initialized`, with no call in flight: the gateway must
/// answer such an unattributed request itself.
pub(crate) fn sync_roots(shared: &Shared, session: &Arc<Session>) {
    let Some(delay) = shared.options.roots_after_initialized else {
        return;
    };
    if !session.caps().roots {
        return;
    }
    // Outside a call there is no POST stream; the writer's body is dropped at once, so only
    // the standalone route can be used.
    let (stream, _no_post_stream) = session.stream();
    let ctx = CallContext {
        session: Arc::clone(session),
        stream,
        stats: Arc::clone(&shared.stats),
        request_timeout: shared.options.request_timeout,
        progress_token: None,
        resources: Arc::clone(&shared.resources),
    };
    tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        if let Err(error) = tools::roots(&ctx).await {
            tracing::debug!(%error, "demo server: roots sync after initialize failed");
        }
    });
}

/// What bounds and shapes one call's run.
#[derive(Clone, Copy)]
struct Limits {
    duration: Duration,
    detach_after_priming: Option<Duration>,
}

/// Untracks the call and ends its stream however its task ends, aborts included.
struct Tracked<'a> {
    ctx: &'a CallContext,
    id: &'a RequestId,
    serial: u64,
}

impl Drop for Tracked<'_> {
    fn drop(&mut self) {
        self.ctx.session.untrack_call(self.id, self.serial);
        self.ctx.stream.finish();
    }
}

async fn run(ctx: CallContext, request: Request, ready: oneshot::Receiver<u64>, limits: Limits) {
    let Ok(serial) = ready.await else {
        return;
    };
    let _tracked = Tracked { ctx: &ctx, id: &request.id, serial };
    if ctx.session.primes_streams() && prime(&ctx.stream, limits).await.is_err() {
        return;
    }
    let outcome = tokio::time::timeout(limits.duration, dispatch(&ctx, &request))
        .await
        .unwrap_or_else(|_| CallOutcome::Error(too_long(limits.duration)));
    // A write that fails means the client left; there is nobody to tell.
    let _ = match outcome {
        CallOutcome::Result(result) => match serde_json::value::to_raw_value(&result) {
            Ok(raw) => ctx.stream.message(&result_bytes(&request.id, &raw)).await,
            Err(error) => ctx.stream.message(&internal(&request.id, &error)).await,
        },
        CallOutcome::Error(error) => ctx.stream.message(&error_bytes(Some(&request.id), &error)).await,
        CallOutcome::Abort => ctx.stream.abort().await,
    };
}

async fn prime(stream: &SseWriter, limits: Limits) -> Result<(), SseError> {
    match limits.detach_after_priming {
        Some(retry) => stream.prime_and_detach(retry).await,
        None => stream.prime().await,
    }
}

fn too_long(limit: Duration) -> ErrorObject {
    ErrorObject {
        code: TIMEOUT_CODE,
        message: format!("the call ran past the server's limit of {} s", limit.as_secs()),
        data: None,
    }
}

fn internal(id: &RequestId, error: &serde_json::Error) -> Vec<u8> {
    let error = ErrorObject {
        code: codes::INTERNAL_ERROR,
        message: format!("result could not be serialised: {error}"),
        data: None,
    };
    error_bytes(Some(id), &error)
}

async fn dispatch(ctx: &CallContext, request: &Request) -> CallOutcome {
    let params = request.params.as_ref().unwrap_or(&Value::Null);
    match request.method.as_str() {
        methods::TOOLS_CALL => call_tool(ctx, params).await,
        methods::PROMPTS_GET => get_prompt(ctx, params).await,
        methods::RESOURCES_READ => read_resource(ctx, params).await,
        other => CallOutcome::Error(invalid(format!("{other} is not a streamed method"))),
    }
}

fn invalid(message: String) -> ErrorObject {
    ErrorObject { code: codes::INVALID_PARAMS, message, data: None }
}

async fn call_tool(ctx: &CallContext, params: &Value) -> CallOutcome {
    let name = params.get("name").and_then(Value::as_str).unwrap_or("");
    let known = Tool::parse(name);
    ctx.stats.record_tool_call(known);
    // An unknown or capability-gated tool is a failed tool result, as in the reference server.
    let Some(tool) = known.filter(|tool| tool.offered(ctx.session.caps())) else {
        return tool_result(format!("MCP error -32602: Tool {name} not found"), true);
    };
    let args = params.get("arguments").cloned().unwrap_or_else(|| json!({}));
    match tools::run(ctx, tool, &args).await {
        ToolOutcome::Text(text) => tool_result(text, false),
        ToolOutcome::Failed(text) => tool_result(text, true),
        ToolOutcome::Abort => CallOutcome::Abort,
    }
}

fn tool_result(text: String, is_error: bool) -> CallOutcome {
    let mut result = json!({"content": [{"type": "text", "text": text}]});
    if is_error {
        result["isError"] = Value::Bool(true);
    }
    CallOutcome::Result(result)
}

async fn get_prompt(ctx: &CallContext, params: &Value) -> CallOutcome {
    let name = params.get("name").and_then(Value::as_str).unwrap_or("");
    if !catalog::prompt_offered(name, ctx.session.caps()) {
        return CallOutcome::Error(invalid(format!("Prompt {name} not found")));
    }
    let style = params.pointer("/arguments/style").and_then(Value::as_str).unwrap_or("friendly");
    let text = match tools::ask_name(ctx, "Whom should the greeting address?").await {
        Ok(NameAnswer::Given(name)) => format!("Write a {style} greeting for {name}."),
        Ok(NameAnswer::Refused(_)) => format!("Write a {style} greeting for the user."),
        Err(error) => return CallOutcome::Error(internal_error(error.to_string())),
    };
    CallOutcome::Result(json!({
        "description": "A greeting request",
        "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
    }))
}

async fn read_resource(ctx: &CallContext, params: &Value) -> CallOutcome {
    let uri = params.get("uri").and_then(Value::as_str).unwrap_or("");
    if !catalog::resource_offered(uri, ctx.session.caps()) {
        return CallOutcome::Error(ErrorObject {
            code: codes::LEGACY_RESOURCE_NOT_FOUND,
            message: format!("Resource {uri} not found"),
            data: Some(json!({"uri": uri})),
        });
    }
    if uri == COUNTER_URI {
        let text = ctx.resources.counter().to_string();
        return CallOutcome::Result(
            json!({"contents": [{"uri": uri, "mimeType": "text/plain", "text": text}]}),
        );
    }
    let text = match tools::ask_name(ctx, "Whose profile is this?").await {
        Ok(NameAnswer::Given(name)) => format!("Profile of {name}"),
        Ok(NameAnswer::Refused(action)) => format!("Anonymous profile ({action})"),
        Err(error) => return CallOutcome::Error(internal_error(error.to_string())),
    };
    CallOutcome::Result(json!({
        "contents": [{"uri": uri, "mimeType": "text/plain", "text": text}],
    }))
}

fn internal_error(message: String) -> ErrorObject {
    ErrorObject { code: codes::INTERNAL_ERROR, message, data: None }
}
