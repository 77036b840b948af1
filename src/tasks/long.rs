//! Long legacy calls served as tasks: an ordinary `tools/call` (a tool without task support)
//! keeps running upstream on this replica, as a parked call does (`src/bridge/park.rs`), while
//! the client polls it as a task of the extension.
//!
//! A call qualifies when its client declared the extension and either the tool is named in
//! `tasks.long_tools` (it becomes a task at once) or `tasks.long_after_ms` is set and the call
//! runs that long without finishing; a call that finishes first answers its plain result. A
//! question the server asks before then makes it a task at once: answering it in-line would
//! take an input round, which ends the call. [`Tasks::start_long`] leases a pooled session,
//! starts the call and hands both to a driver task, which holds them for the call's life.
//!
//! Inside the task the driver does on the call's own stream what `live.rs` does on a legacy
//! task's `tasks/result`: a server request becomes a pending question under a key minted once
//! per task, and `tasks/update` answers the waiting upstream request directly (nothing is
//! replayed, nothing runs twice); progress becomes the `statusMessage`; the result or error
//! settles the task within the same bounds; `tasks/cancel` and the task's expiry send
//! `notifications/cancelled`. The table, the sealed ids and the `tasks/*` requests are the
//! legacy tasks' own (`mod.rs`).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::live::{self, Ending, LiveTask, Origin, Phase, Spec, CANCELLED, EXPIRED};
use super::screen::Rules;
use super::{unix_ms, wire, Started, TaskError, Tasks};
use crate::protocol::jsonrpc::Outcome;
use crate::protocol::{methods, RequestId};
use crate::schema::OutputSchema;
use crate::telemetry::TaskTrace;
use crate::tool_report::TaskEvent;
use crate::upstream::{Call, Lease, PoolKey, UpstreamError, UpstreamEvent};

/// The progress token a long call is sent with when its client gave none: a leased session
/// runs one call at a time, so it names this one.
const PROGRESS_TOKEN: &str = "mrtr-gateway-task";
/// Why a call is cancelled upstream, by how it ended.
const CLIENT_GONE: &str = "the client went away before the call became a task";
const NO_ROOM: &str = "the gateway could not hold the task";
const STOPPED: &str = "the gateway is shutting down";

/// When a long call becomes a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// At once (`tasks.long_tools`).
    AtOnce,
    /// Once it has run this long without finishing (`tasks.long_after_ms`).
    After(Duration),
}

/// What the front hears first from a long call's driver.
enum First {
    /// The `CreateTaskResult`: the task is in the table.
    Task(Value),
    /// The call ended before it became a task.
    Done(Result<Value, TaskError>),
}

/// One long call, from its start upstream to its end.
struct Driver {
    tasks: Arc<Tasks>,
    principal: Arc<str>,
    /// The tool called, named in the task's span.
    tool: String,
    /// What the task's questions are held to.
    rules: Rules,
    /// The tool's compiled `outputSchema`, which the task's result is checked against.
    output: Option<Arc<OutputSchema>>,
    /// Before the lease: dropped first, so the session goes back without a call on it.
    call: Call,
    lease: Lease,
    /// The progress token the call was sent with.
    token: Value,
    /// Where the first answer goes; `None` once it went.
    first: Option<oneshot::Sender<First>>,
    /// The last progress before the task exists, its first `statusMessage`.
    message: Option<String>,
    /// The call ended upstream (its response or its failure arrived).
    ended: bool,
    /// A question was asked: one may be open upstream when the call is cancelled.
    asked: bool,
    /// The session serves no other call: it learned the client's roots (as in
    /// `src/bridge/round.rs`), or failed.
    retire: bool,
    /// The task's handle once the call became one: the finished task is stored under it.
    handle: Option<String>,
    /// The trace context of the request that started the call: the task's span, once the call
    /// becomes one, starts under it.
    parent: opentelemetry::Context,
    trace: Option<TaskTrace>,
}

/// What woke the driver before its call became a task.
enum Before {
    ClientGone,
    Due,
    Event(Result<Option<UpstreamEvent>, UpstreamError>),
}

// === impl Tasks ===

impl Tasks {
    /// When a call of `tool` (which has no task support) by a client that declared the
    /// extension becomes a task, if ever. A duration applies only while `principal` has room
    /// for one more task; without it the call runs in-line as any call.
    pub fn long_trigger(&self, tool: &str, principal: &str) -> Option<Trigger> {
        if self.cfg.long_tools.iter().any(|t| t == tool) {
            return Some(Trigger::AtOnce);
        }
        let after = self.cfg.long_after?;
        self.table.check_room(principal, Instant::now()).is_ok().then_some(Trigger::After(after))
    }

    /// Starts `params` (a `tools/call`'s, for upstream) on a leased session of `key` and keeps
    /// it running as a task when `trigger` says: answers the `CreateTaskResult` once the task
    /// is in the table, or the call's own result when it finished first; either result is
    /// checked against `output`, the tool's compiled `outputSchema`.
    pub async fn start_long(
        self: &Arc<Self>,
        principal: &Arc<str>,
        key: PoolKey,
        capabilities: Value,
        params: Value,
        trigger: Trigger,
        output: Option<Arc<OutputSchema>>,
    ) -> Result<Started, TaskError> {
        if trigger == Trigger::AtOnce {
            self.table
                .check_room(principal, Instant::now())
                .inspect_err(|e| self.metrics.count(e.label()))?;
        }
        let rules = self.rules(&key);
        let lease = self.pool.lease(key, &capabilities).await.map_err(TaskError::Unavailable)?;
        let tool = params.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
        let (params, token) = with_progress_token(params);
        let call = lease.session().call(methods::TOOLS_CALL, Some(params));
        let (tx, rx) = oneshot::channel();
        let driver = Driver {
            tasks: self.clone(),
            principal: principal.clone(),
            tool: tool.clone(),
            rules,
            output: output.clone(),
            call,
            lease,
            token,
            first: Some(tx),
            message: None,
            ended: false,
            asked: false,
            retire: false,
            handle: None,
            parent: opentelemetry::Context::current(),
            trace: None,
        };
        self.spawn(driver.run(trigger));
        match rx.await {
            Ok(First::Task(created)) => Ok(Started::Task(created)),
            Ok(First::Done(done)) => done.map(|result| self.at_once(output.as_deref(), &tool, result)),
            Err(_) => {
                Err(TaskError::Unavailable(UpstreamError::Closed("the long call's driver ended".into())))
            }
        }
    }
}

// === impl Driver ===

impl Driver {
    async fn run(mut self, trigger: Trigger) {
        let task = match trigger {
            Trigger::AtOnce => match self.promote() {
                Ok(task) => task,
                Err(e) => {
                    self.answer(First::Done(Err(e)));
                    return self.abandon(NO_ROOM).await;
                }
            },
            Trigger::After(after) => match self.before(Instant::now() + after).await {
                Ok(task) => task,
                Err(Some(reason)) => return self.abandon(reason).await,
                Err(None) => return self.release(),
            },
        };
        let ending = self.inside(&task).await;
        self.tasks.metrics.ended(&self.tool, ending);
        let upstream = task.upstream_task().unwrap_or_default();
        tracing::info!(task = upstream, ending = ending.label(), "long call's task ended");
        let held = self.handle.as_deref().map(|handle| (handle, &*task));
        super::ended(self.tasks.records.as_ref(), held, self.trace.take(), ending).await;
        match ending {
            Ending::Cancelled => self.abandon(CANCELLED).await,
            Ending::Expired => self.abandon(EXPIRED).await,
            Ending::Stopped => self.abandon(STOPPED).await,
            Ending::Lost | Ending::Completed | Ending::Failed => self.release(),
        }
    }

    /// Runs the call until it is due to become a task, or asks a question: then returns the
    /// task. A call that ends first has answered the front (`Err(None)`); one whose client went
    /// away is to be cancelled upstream (`Err(Some(reason))`). A task that cannot be held when
    /// due leaves the call in-line.
    async fn before(&mut self, due: Instant) -> Result<Arc<LiveTask>, Option<&'static str>> {
        let mut waiting = true;
        loop {
            let first = self.first.as_mut().ok_or(None)?;
            let woke = tokio::select! {
                biased;
                () = first.closed() => Before::ClientGone,
                () = tokio::time::sleep_until(due), if waiting => Before::Due,
                event = self.call.next_event() => Before::Event(event),
            };
            match woke {
                Before::ClientGone => return Err(Some(CLIENT_GONE)),
                Before::Due => match self.promote() {
                    Ok(task) => return Ok(task),
                    Err(e) => {
                        tracing::info!(error = %e, "a long call could not become a task: it runs on in-line");
                        waiting = false;
                    }
                },
                Before::Event(Ok(Some(UpstreamEvent::Request { id, method, params }))) => {
                    return self.promote_to_ask(id, &method, params).await;
                }
                Before::Event(Ok(Some(UpstreamEvent::Notification { method, params }))) => {
                    if let Some(message) = progress_message(&self.token, &method, params.as_ref()) {
                        self.message = Some(message);
                    }
                }
                Before::Event(Ok(Some(UpstreamEvent::Response(outcome)))) => {
                    self.ended = true;
                    self.answer(First::Done(plain(outcome)));
                    return Err(None);
                }
                Before::Event(failed) => {
                    let error = failed
                        .err()
                        .unwrap_or_else(|| UpstreamError::Closed("the call ended without a response".into()));
                    (self.ended, self.retire) = (true, true);
                    self.answer(First::Done(Err(TaskError::Unavailable(error))));
                    return Err(None);
                }
            }
        }
    }

    /// A question before the task exists: the call becomes a task, with the question as its
    /// first pending one; when the task cannot be held, the refusal is the front's answer and
    /// the call is to be cancelled.
    async fn promote_to_ask(
        &mut self,
        id: RequestId,
        method: &str,
        params: Option<Value>,
    ) -> Result<Arc<LiveTask>, Option<&'static str>> {
        self.asked = true;
        match self.hold() {
            Ok((task, task_id)) => {
                self.surface(&task, id, method, params).await;
                self.answer(First::Task(wire::create_result(&task_id, &task.snapshot())));
                Ok(task)
            }
            Err(e) => {
                self.answer(First::Done(Err(e)));
                Err(Some(NO_ROOM))
            }
        }
    }

    /// Makes the call a task and answers the front its `CreateTaskResult`.
    fn promote(&mut self) -> Result<Arc<LiveTask>, TaskError> {
        let (task, task_id) = self.hold()?;
        self.answer(First::Task(wire::create_result(&task_id, &task.snapshot())));
        Ok(task)
    }

    /// Puts the call in the table as a task, bounded by the task's life from now on; returns
    /// it with its sealed id.
    fn hold(&mut self) -> Result<(Arc<LiveTask>, String), TaskError> {
        let tasks = &self.tasks;
        let now_ms = unix_ms();
        let spec = Spec {
            tool: self.tool.clone(),
            principal: self.principal.clone(),
            upstream_task: Some(format!("call:{}", self.call.id())),
            session: self.lease.session().clone(),
            version: tasks.version,
            created_ms: now_ms,
            status_message: self.message.take(),
            ttl: tasks.cfg.ttl,
            poll: tasks.cfg.poll_interval,
            max_result_bytes: tasks.cfg.max_result_bytes,
            origin: Origin::LongCall,
            rules: self.rules,
            output: self.output.clone(),
        };
        let span = super::task_span(&spec.tool, &spec.principal);
        let task = Arc::new(LiveTask::new(spec).with_span(span));
        let (task_id, handle) = tasks.hold(&task, now_ms)?;
        self.handle = Some(handle);
        let _parent = self.parent.clone().attach();
        self.trace = TaskTrace::start(&self.tool);
        self.call.set_deadline(task.expires);
        Ok((task, task_id))
    }

    /// Runs the task's call until it ends, is cancelled or expires.
    async fn inside(&mut self, task: &LiveTask) -> Ending {
        loop {
            let event = tokio::select! {
                biased;
                () = task.cancel.notified() => return task.woken(),
                () = tokio::time::sleep_until(task.expires) => {
                    task.finish(Phase::Failed(live::gateway_error(EXPIRED)), unix_ms());
                    return Ending::Expired;
                }
                event = self.call.next_event() => event,
            };
            match event {
                Ok(Some(UpstreamEvent::Request { id, method, params })) => {
                    self.surface(task, id, &method, params).await;
                }
                Ok(Some(UpstreamEvent::Notification { method, params })) => {
                    if let Some(message) = progress_message(&self.token, &method, params.as_ref()) {
                        task.note_upstream(None, Some(&message), unix_ms());
                    }
                }
                Ok(Some(UpstreamEvent::Response(outcome))) => {
                    self.ended = true;
                    return task.conclude(outcome, &self.tasks.metrics, unix_ms());
                }
                Ok(None) | Err(_) => {
                    (self.ended, self.retire) = (true, true);
                    let lost = live::gateway_error("the upstream server was lost during the task");
                    return if task.finish(Phase::Failed(lost), unix_ms()) {
                        Ending::Lost
                    } else {
                        Ending::Cancelled
                    };
                }
            }
        }
    }

    /// Puts a server request before the client as a pending question (or refuses it upstream).
    async fn surface(&mut self, task: &LiveTask, id: RequestId, method: &str, params: Option<Value>) {
        self.asked = true;
        self.retire |= method == methods::ROOTS_LIST;
        if live::surface(task, &self.tasks.metrics, id, method, params.as_ref(), unix_ms()).await {
            self.tasks.metrics.tool(&self.tool, TaskEvent::InputRound);
        }
    }

    fn answer(&mut self, first: First) {
        if let Some(tx) = self.first.take() {
            // A front that went away meanwhile hears nothing; the task, if any, lives on.
            let _ = tx.send(first);
        }
    }

    /// Cancels the call upstream when it still runs, then releases the session; retired when
    /// a question may still be open on it.
    async fn abandon(self, reason: &str) {
        let Self { call, lease, ended, asked, retire, .. } = self;
        if !ended {
            if let Err(e) = lease.session().cancel(call, reason).await {
                tracing::debug!(error = %e, "could not send notifications/cancelled upstream");
            }
        }
        if retire || (asked && !ended) {
            lease.poison();
        }
    }

    /// Gives the session back to the pool, or retires it.
    fn release(self) {
        let Self { call, lease, retire, .. } = self;
        drop(call);
        if retire {
            lease.poison();
        }
    }
}

/// `params` with a progress token in `_meta` (the client's, else the gateway's), and that token.
fn with_progress_token(mut params: Value) -> (Value, Value) {
    let Some(object) = params.as_object_mut() else { return (params, Value::Null) };
    let meta = object.entry("_meta").or_insert_with(|| Value::Object(Map::new()));
    let Some(meta) = meta.as_object_mut() else { return (params, Value::Null) };
    let token = meta.entry("progressToken").or_insert_with(|| json!(PROGRESS_TOKEN)).clone();
    (params, token)
}

/// The status message a notification of the call's progress (`token`) carries: its own
/// message, else `progress X/Y` (`progress X` without a total); `None` for anything else.
fn progress_message(token: &Value, method: &str, params: Option<&Value>) -> Option<String> {
    let params = params.filter(|p| method == methods::PROGRESS && p.get("progressToken") == Some(token))?;
    if let Some(message) = params.get("message").and_then(Value::as_str) {
        return Some(message.to_owned());
    }
    let progress = params.get("progress").filter(|p| p.is_number())?;
    Some(match params.get("total").filter(|t| t.is_number()) {
        Some(total) => format!("progress {progress}/{total}"),
        None => format!("progress {progress}"),
    })
}

/// A call's outcome as the front relays it when it finished before becoming a task.
fn plain(outcome: Outcome) -> Result<Value, TaskError> {
    match outcome {
        Outcome::Result(raw) => serde_json::from_str(raw.get()).map_err(|_| TaskError::Malformed("not JSON")),
        Outcome::Error(e) => Err(TaskError::Upstream(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clients_progress_token_is_kept_else_the_gateways_is_added() {
        let (params, token) = with_progress_token(json!({"name": "crawl", "_meta": {"progressToken": 7}}));
        assert_eq!((params["_meta"]["progressToken"].clone(), token), (json!(7), json!(7)));
        let (params, token) = with_progress_token(json!({"name": "crawl"}));
        assert_eq!(params, json!({"name": "crawl", "_meta": {"progressToken": PROGRESS_TOKEN}}));
        assert_eq!(token, json!(PROGRESS_TOKEN));
    }

    #[test]
    fn progress_of_the_call_becomes_a_status_message() {
        let token = json!("t");
        let note = |params: Value| progress_message(&token, methods::PROGRESS, Some(&params));
        let own = note(json!({"progressToken": "t", "progress": 1, "message": "indexing"}));
        assert_eq!(own.as_deref(), Some("indexing"));
        assert_eq!(
            note(json!({"progressToken": "t", "progress": 2, "total": 5})).as_deref(),
            Some("progress 2/5")
        );
        assert_eq!(note(json!({"progressToken": "t", "progress": 0.5})).as_deref(), Some("progress 0.5"));
        assert_eq!(note(json!({"progressToken": "other", "progress": 1})), None, "another call's");
        assert_eq!(note(json!({"progressToken": "t"})), None, "no progress");
        let log = json!({"progressToken": "t", "progress": 1, "message": "x"});
        assert_eq!(progress_message(&token, methods::MESSAGE, Some(&log)), None, "not progress");
    }
}
