//! One bridged task on its owner replica: the upstream session it is pinned to, what the
//! client can see of it, and the driver that holds the legacy `tasks/result` stream open.
//!
//! A legacy server delivers the questions it asks inside a task only while a `tasks/result`
//! request is open, and each only once; a 2026-07-28 client must see them on every
//! `tasks/get` until it answers. So the driver keeps that request open for the task's life,
//! remembers each question under a key minted once per task, and `tasks/update` answers the
//! waiting upstream request directly. The same request ends with the task's result or error,
//! which is the only way a legacy server tells a tool error from a protocol error. The
//! `notifications/progress` the server sends during the task (on that request's stream, or on
//! one that ties nothing to a call: the task's session carries nothing else) become the task's
//! status message, as does a new message in the upstream's own `tasks/get`: the latest wins.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::{json, Map, Value};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::create;
use super::metrics::TaskMetrics;
use super::screen::{self, Rules, Screened};
use super::wire::{self, Snapshot};
use crate::defaults;
use crate::mrtr::translate::{self, InputKind, LegacyVersion};
use crate::protocol::jsonrpc::{ErrorObject, Outcome};
use crate::protocol::RequestId;
use crate::protocol::{codes, methods};
use crate::schema::OutputSchema;
use crate::tool_report::TaskEvent;
use crate::upstream::{Call, Session, UpstreamError, UpstreamEvent};

/// Where a task is.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Phase {
    Working,
    Completed(Value),
    Failed(Value),
    Cancelled,
}

/// What runs upstream behind a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Origin {
    /// A legacy task (`task: {ttl}` on `tools/call`), driven here.
    LegacyTask,
    /// An ordinary `tools/call` kept running as a task, driven by `long.rs`.
    LongCall,
}

/// A question the upstream asked inside the task and is waiting on.
#[derive(Debug)]
struct Question {
    upstream: RequestId,
    kind: InputKind,
    request: Value,
}

#[derive(Debug)]
struct State {
    phase: Phase,
    status_message: Option<String>,
    /// The message the upstream's `tasks/get` said last: only a new one replaces a progress note.
    upstream_message: Option<String>,
    pending: BTreeMap<String, Question>,
    /// Keys are unique over the task's life: a counter, never reused.
    asked: u32,
    updated_ms: u64,
}

/// One task, shared by the table and its driver.
#[derive(Debug)]
pub(super) struct LiveTask {
    /// The tool it runs, for the migration report.
    pub(super) tool: String,
    pub(super) principal: Arc<str>,
    /// The upstream's name for it: a legacy task's id once the server created it (a legacy
    /// task tool may ask questions first, `create.rs`), a long call's `call:<id>`.
    upstream_task: OnceLock<String>,
    pub(super) session: Session,
    pub(super) expires: Instant,
    pub(super) origin: Origin,
    /// What its questions are held to before a client sees them.
    rules: Rules,
    version: LegacyVersion,
    created: String,
    ttl_ms: u64,
    poll_ms: u64,
    max_result_bytes: usize,
    /// Its tool's compiled `outputSchema`, when the front's catalogue knew it: the result is
    /// checked against it before a client sees it.
    output: Option<Arc<OutputSchema>>,
    state: Mutex<State>,
    /// Woken by `tasks/cancel`.
    pub(super) cancel: Notify,
    /// Woken whenever the client's view changes: a question, the upstream task created, the
    /// end (a creating round waits on it, `create.rs`).
    pub(super) changed: Notify,
    /// The task's span: its lifecycle is logged in it.
    pub(super) span: tracing::Span,
}

/// What the driver saw end the task, for the metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ending {
    Completed,
    Failed,
    Cancelled,
    Expired,
    Lost,
    /// This replica shut down while the task ran: it was cancelled upstream and ended `failed`.
    Stopped,
}

/// Why a task the client cancelled ended: told the upstream with its cancel.
pub(super) const CANCELLED: &str = "the client cancelled the task";
/// The error a task that outlived its ttl ends with, and the reason its upstream is told.
pub(super) const EXPIRED: &str = "the task expired";

/// The error a task that this replica stopped at its shutdown ends with.
pub(super) const STOPPED: &str = "the gateway replica running the task shut down";

/// How a task was made: its pinned session and its bounds.
pub(super) struct Spec {
    pub tool: String,
    pub principal: Arc<str>,
    /// `None` while a legacy task tool's call has not created its task yet.
    pub upstream_task: Option<String>,
    pub session: Session,
    pub version: LegacyVersion,
    pub created_ms: u64,
    pub status_message: Option<String>,
    pub ttl: Duration,
    pub poll: Duration,
    pub max_result_bytes: usize,
    pub origin: Origin,
    pub rules: Rules,
    pub output: Option<Arc<OutputSchema>>,
}

// === impl Ending ===

impl Ending {
    pub(super) fn label(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
            Self::Expired => "expired",
            Self::Lost => "lost",
            Self::Stopped => "stopped",
        }
    }
}

// === impl LiveTask ===

impl LiveTask {
    pub(super) fn new(spec: Spec) -> Self {
        Self {
            tool: spec.tool,
            principal: spec.principal,
            upstream_task: spec.upstream_task.map(OnceLock::from).unwrap_or_default(),
            session: spec.session,
            expires: Instant::now() + spec.ttl,
            origin: spec.origin,
            rules: spec.rules,
            version: spec.version,
            created: wire::iso8601(spec.created_ms),
            ttl_ms: spec.ttl.as_millis() as u64,
            poll_ms: spec.poll.as_millis() as u64,
            max_result_bytes: spec.max_result_bytes,
            output: spec.output,
            state: Mutex::new(State {
                phase: Phase::Working,
                upstream_message: spec.status_message.clone(),
                status_message: spec.status_message,
                pending: BTreeMap::new(),
                asked: 0,
                updated_ms: spec.created_ms,
            }),
            cancel: Notify::new(),
            changed: Notify::new(),
            span: tracing::Span::none(),
        }
    }

    /// The task, its lifecycle logged in `span`.
    pub(super) fn with_span(mut self, span: tracing::Span) -> Self {
        self.span = span;
        self
    }

    /// What the client sees now.
    pub(super) fn snapshot(&self) -> Snapshot {
        let state = self.state.lock();
        let (status, result, error) = match &state.phase {
            Phase::Working if !state.pending.is_empty() => ("input_required", None, None),
            Phase::Working => ("working", None, None),
            Phase::Completed(r) => ("completed", Some(r.clone()), None),
            Phase::Failed(e) => ("failed", None, Some(e.clone())),
            Phase::Cancelled => ("cancelled", None, None),
        };
        let input_requests = (status == "input_required").then(|| {
            state.pending.iter().map(|(k, q)| (k.clone(), q.request.clone())).collect::<Map<_, _>>()
        });
        Snapshot {
            status,
            status_message: state.status_message.clone(),
            created_at: self.created.clone(),
            updated_at: wire::iso8601(state.updated_ms),
            ttl_ms: self.ttl_ms,
            poll_interval_ms: self.poll_ms,
            result,
            error,
            input_requests,
        }
    }

    /// The upstream's name for the task; `None` until a legacy task tool's call created it.
    pub(super) fn upstream_task(&self) -> Option<&str> {
        self.upstream_task.get().map(String::as_str)
    }

    /// Notes that the upstream created the task as `upstream_task` (a legacy task tool's call
    /// that asked questions first).
    pub(super) fn created_upstream(&self, upstream_task: String) {
        if self.upstream_task.set(upstream_task).is_ok() {
            self.changed.notify_waiters();
        }
    }

    /// True while the task runs (a question pending included).
    pub(super) fn is_running(&self) -> bool {
        self.state.lock().phase == Phase::Working
    }

    /// Takes the status message the upstream's own `tasks/get` reported, and notes a task the
    /// upstream says it cancelled itself.
    pub(super) fn note_upstream(&self, status: Option<&str>, message: Option<&str>, now_ms: u64) {
        let mut state = self.state.lock();
        if state.phase != Phase::Working {
            return;
        }
        if let Some(m) = message.map(bounded).filter(|m| state.upstream_message.as_ref() != Some(m)) {
            state.upstream_message = Some(m.clone());
            state.status_message = Some(m);
        }
        if status == Some("cancelled") {
            state.phase = Phase::Cancelled;
            state.updated_ms = now_ms;
        }
    }

    /// Takes a `notifications/progress` the upstream sent during the task as its status message.
    pub(super) fn note_progress(&self, params: Option<&Value>, now_ms: u64) {
        let Some(message) = params.and_then(wire::progress_message) else { return };
        let mut state = self.state.lock();
        if state.phase == Phase::Working {
            state.status_message = Some(bounded(&message));
            state.updated_ms = now_ms;
        }
    }

    /// Tells the client, in the status message, why a question of the task was not shown.
    fn note_refused(&self, why: String, now_ms: u64) {
        let mut state = self.state.lock();
        if state.phase == Phase::Working {
            state.status_message = Some(why);
            state.updated_ms = now_ms;
        }
    }

    /// Takes the answers to pending questions; unknown keys are ignored. Returns the legacy
    /// results to send upstream, each with the id of the request it answers.
    pub(super) fn take_answers(
        &self,
        answers: Map<String, Value>,
        now_ms: u64,
    ) -> Vec<(RequestId, Result<Value, ErrorObject>)> {
        let mut state = self.state.lock();
        let mut out = Vec::new();
        for (key, answer) in answers {
            let Some(question) = state.pending.remove(&key) else { continue };
            let result =
                translate::to_legacy_result(question.kind, answer, self.version).map_err(|e| ErrorObject {
                    code: codes::INVALID_PARAMS,
                    message: format!("invalid answer: {e}"),
                    data: None,
                });
            out.push((question.upstream, result));
        }
        if !out.is_empty() {
            state.updated_ms = now_ms;
        }
        out
    }

    /// Marks the task cancelled (when it still runs) and wakes its driver; true when it ran.
    pub(super) fn cancel(&self, now_ms: u64) -> bool {
        self.end_early(Phase::Cancelled, now_ms)
    }

    /// Ends the task `failed` because this replica shuts down (when it still runs) and wakes
    /// its driver, which cancels it upstream; true when it ran.
    pub(super) fn stop(&self, now_ms: u64) -> bool {
        self.end_early(Phase::Failed(gateway_error(STOPPED)), now_ms)
    }

    /// What ended a task that [`Self::cancel`] or [`Self::stop`] ended first: its driver was
    /// woken, or lost the race to settle it.
    pub(super) fn woken(&self) -> Ending {
        match self.state.lock().phase {
            Phase::Failed(_) => Ending::Stopped,
            _ => Ending::Cancelled,
        }
    }

    fn end_early(&self, phase: Phase, now_ms: u64) -> bool {
        if !self.finish(phase, now_ms) {
            return false;
        }
        self.cancel.notify_one();
        true
    }

    /// Keeps a question for `tasks/get`; `None` when it cannot be asked, else whether it starts
    /// an input round (no other question was pending).
    fn ask(&self, upstream: RequestId, kind: InputKind, request: Value, now_ms: u64) -> Option<bool> {
        let mut state = self.state.lock();
        if state.phase != Phase::Working || state.pending.len() >= defaults::TASK_MAX_PENDING_QUESTIONS {
            return None;
        }
        let new_round = state.pending.is_empty();
        state.asked += 1;
        let key = format!("{}-{}", kind.key_prefix(), state.asked);
        state.pending.insert(key, Question { upstream, kind, request });
        state.updated_ms = now_ms;
        drop(state);
        self.changed.notify_waiters();
        Some(new_round)
    }

    pub(super) fn finish(&self, phase: Phase, now_ms: u64) -> bool {
        let mut state = self.state.lock();
        if state.phase != Phase::Working {
            return false;
        }
        state.phase = phase;
        state.pending.clear();
        state.updated_ms = now_ms;
        drop(state);
        self.changed.notify_waiters();
        true
    }

    /// Ends the task with the upstream's final answer (unless it ended first, cancelled or
    /// expired): what the driver saw end it.
    pub(super) fn conclude(&self, outcome: Outcome, metrics: &TaskMetrics, now_ms: u64) -> Ending {
        let phase = self.settle(outcome, metrics);
        let ending = if matches!(phase, Phase::Completed(_)) { Ending::Completed } else { Ending::Failed };
        if self.finish(phase, now_ms) {
            ending
        } else {
            self.woken()
        }
    }

    /// The task's terminal phase from the upstream's final answer: a result (a tool error
    /// included) is `completed`, after its `structuredContent` is checked against the tool's
    /// `outputSchema`; a JSON-RPC error `failed`; either over the size bound fails.
    fn settle(&self, outcome: Outcome, metrics: &TaskMetrics) -> Phase {
        match outcome {
            Outcome::Result(raw) if raw.get().len() <= self.max_result_bytes => {
                match serde_json::from_str::<Value>(raw.get()) {
                    Ok(v) => {
                        let output = self.output.as_deref();
                        Phase::Completed(screen::result(output, metrics, &self.tool, wire::clean_result(v)))
                    }
                    Err(_) => Phase::Failed(gateway_error("the upstream server's task result was not JSON")),
                }
            }
            Outcome::Result(_) => Phase::Failed(gateway_error(&format!(
                "the task's result exceeds the gateway's limit of {} bytes",
                self.max_result_bytes
            ))),
            Outcome::Error(e) => {
                let error = serde_json::to_value(&e).unwrap_or(Value::Null);
                if error.to_string().len() <= self.max_result_bytes {
                    Phase::Failed(error)
                } else {
                    Phase::Failed(json!({"code": e.code, "message": "the upstream task failed"}))
                }
            }
        }
    }
}

/// A status message within the gateway's bound on quoted server text.
fn bounded(message: &str) -> String {
    message.chars().take(defaults::MAX_QUOTED_CHARS * 4).collect()
}

/// An error object the gateway makes itself (never upstream text).
pub(super) fn gateway_error(message: &str) -> Value {
    json!({ "code": codes::INTERNAL_ERROR, "message": message })
}

/// Drives `task` until it ends: holds `tasks/result` open, surfaces questions, settles the
/// result, honours a cancel and the expiry; then cancels upstream if needed and closes the
/// pinned session. A task whose call asked before it created its task comes with that `held`
/// call and its first event, which run first ([`create::hold_call`]). `now_ms` reads the wall
/// clock for the timestamps. Returns how the task ended.
pub(super) async fn drive(
    task: Arc<LiveTask>,
    metrics: TaskMetrics,
    now_ms: impl Fn() -> u64,
    held: Option<(Call, UpstreamEvent)>,
) -> Ending {
    let ending = match held {
        Some((call, first)) => match create::hold_call(&task, call, first, &metrics, &now_ms).await {
            Some(ending) => ending,
            None => run(&task, &metrics, &now_ms).await,
        },
        None => run(&task, &metrics, &now_ms).await,
    };
    if let (Ending::Cancelled | Ending::Expired | Ending::Stopped, Some(upstream)) =
        (ending, task.upstream_task())
    {
        let params = json!({ "taskId": upstream });
        let cancel = task.session.request("tasks/cancel", Some(params));
        match tokio::time::timeout(defaults::TASK_UPSTREAM_TIMEOUT, cancel).await {
            Ok(Ok(Outcome::Result(_))) => {}
            // A task that ended meanwhile is -32602 upstream: nothing left to cancel.
            other => tracing::debug!(answer = ?other.map(|r| r.map(|_| ())), "upstream tasks/cancel"),
        }
    }
    metrics.ended(&task.tool, ending);
    tracing::info!(task = task.upstream_task().unwrap_or_default(), ending = ending.label(), "task ended");
    if let Err(e) = task.session.close().await {
        tracing::debug!(error = %e, "closing a task's upstream session");
    }
    ending
}

async fn run(task: &LiveTask, metrics: &TaskMetrics, now_ms: &impl Fn() -> u64) -> Ending {
    let params = json!({ "taskId": task.upstream_task().unwrap_or_default() });
    'reopen: loop {
        let mut call = task.session.call(methods::TASKS_RESULT, Some(params.clone()));
        loop {
            let event = tokio::select! {
                biased;
                () = task.cancel.notified() => return task.woken(),
                () = tokio::time::sleep_until(task.expires) => {
                    task.finish(Phase::Failed(gateway_error(EXPIRED)), now_ms());
                    return Ending::Expired;
                }
                event = call.next_event() => event,
            };
            match event {
                Ok(Some(event)) => {
                    if let Some(outcome) = take_event(task, metrics, event, now_ms()).await {
                        return task.conclude(outcome, metrics, now_ms());
                    }
                }
                // The request outlived the upstream request timeout: ask again, the task runs on.
                Err(UpstreamError::Timeout(_)) if Instant::now() < task.expires => continue 'reopen,
                Ok(None) | Err(_) => {
                    let lost = gateway_error("the upstream server was lost during the task");
                    return if task.finish(Phase::Failed(lost), now_ms()) {
                        Ending::Lost
                    } else {
                        Ending::Cancelled
                    };
                }
            }
        }
    }
}

/// Takes one event of the stream a task's questions come on: a question is surfaced (counted
/// as an input round when it starts one), a progress note becomes the status message. Returns
/// the outcome of a response, which is the driver's to settle.
pub(super) async fn take_event(
    task: &LiveTask,
    metrics: &TaskMetrics,
    event: UpstreamEvent,
    now_ms: u64,
) -> Option<Outcome> {
    match event {
        UpstreamEvent::Request { id, method, params } => {
            if surface(task, metrics, id, &method, params.as_ref(), now_ms).await {
                metrics.tool(&task.tool, TaskEvent::InputRound);
            }
            None
        }
        UpstreamEvent::Notification { method, params } => {
            if method == methods::PROGRESS {
                task.note_progress(params.as_ref(), now_ms);
            }
            None
        }
        UpstreamEvent::Response(outcome) => Some(outcome),
    }
}

/// Remembers a question for `tasks/get`, or refuses it upstream when it cannot be asked; true
/// when it starts an input round. A request on a legacy task's session that does not name the
/// task in its related-task `_meta` is not the task's (a server may ask its session something
/// of its own, say `roots/list` after `initialize`): it is refused as one no call can be asked.
/// A long call's questions are its own: they come on its call's stream. A question of the task
/// passes the checks every question passes ([`screen`]) before it is kept.
pub(super) async fn surface(
    task: &LiveTask,
    metrics: &TaskMetrics,
    id: RequestId,
    method: &str,
    params: Option<&Value>,
    now_ms: u64,
) -> bool {
    // Before a legacy task tool's call created its task, its questions come on the call's
    // own stream, as a long call's do.
    let refusal = if task.origin == Origin::LegacyTask
        && task.upstream_task().is_some_and(|upstream| wire::related_task(params) != Some(upstream))
    {
        "the request names no task of this session, and no client request is in flight to ask"
    } else if !methods::is_input_method(method) {
        "the gateway cannot relay this request inside a task"
    } else {
        match screen::screen(&task.rules, metrics, &task.tool, method, params) {
            Screened::Show(checked) => {
                let shown = checked.repaired.as_ref().or(params);
                match translate::input_request(method, shown) {
                    Ok((kind, request)) => match task.ask(id.clone(), kind, request, now_ms) {
                        Some(new_round) => {
                            screen::shown(metrics, &task.tool, &checked);
                            return new_round;
                        }
                        None => "the task has too many open questions",
                    },
                    Err(_) => "the gateway cannot relay this request inside a task",
                }
            }
            Screened::Refuse { answer, why } => {
                tracing::info!(parent: &task.span, method, reason = %why, "a task's question was refused");
                answer_upstream(task, &id, answer).await;
                task.note_refused(why, now_ms);
                return false;
            }
        }
    };
    let error = ErrorObject { code: codes::METHOD_NOT_FOUND, message: refusal.to_owned(), data: None };
    answer_upstream(task, &id, Err(error)).await;
    false
}

async fn answer_upstream(task: &LiveTask, id: &RequestId, answer: Result<Value, ErrorObject>) {
    if let Err(e) = task.session.respond(id, answer).await {
        tracing::debug!(error = %e, "answering a task's server request");
    }
}
