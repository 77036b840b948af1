//! The three task requests a client sends about a task (`tasks/get`, `tasks/update`,
//! `tasks/cancel`), and the retry of an input round of a task tool's call that asked before it
//! created its task (`super::create`), answered where the task is: on this replica when it owns
//! the task (the owner sealed in the id is its own `cluster.advertise_url`), else from the
//! shared result store or by the owner ([`super::forward`]). A request another replica
//! forwarded here is served here or refused, never forwarded again.

use serde_json::{json, Map, Value};
use tokio::time::Instant;

use super::live::{LiveTask, Origin};
use super::{create, lost, unix_ms, wire, Started, TaskError, TaskOp, Tasks};
use crate::defaults;
use crate::mrtr::{TaskClaims, TaskSealer};
use crate::protocol::jsonrpc::Outcome;

// === impl Tasks ===

impl Tasks {
    /// `tasks/get`: the detailed task.
    pub async fn get(&self, principal: &str, task_id: &str) -> Result<Value, TaskError> {
        self.serve(principal, task_id, TaskOp::Get).await
    }

    /// `tasks/update`: delivers the answers to the pending questions they name (a partial set
    /// is fine, unknown keys are ignored).
    pub async fn update(
        &self,
        principal: &str,
        task_id: &str,
        answers: Map<String, Value>,
    ) -> Result<(), TaskError> {
        self.serve(principal, task_id, TaskOp::Update(answers)).await.map(drop)
    }

    /// `tasks/cancel`: cancels a running task (upstream too, by its driver); a finished or
    /// lost one is acknowledged the same way.
    pub async fn cancel(&self, principal: &str, task_id: &str) -> Result<(), TaskError> {
        self.serve(principal, task_id, TaskOp::Cancel).await.map(drop)
    }

    /// Serves `op` about the task `task_id` names: here when this replica owns it, else from
    /// the result store or by its owner ([`forward`]). The answer is the detailed task for
    /// `tasks/get`, the empty ack for the others.
    pub async fn serve(&self, principal: &str, task_id: &str, op: TaskOp) -> Result<Value, TaskError> {
        let claims = self.open(principal, task_id)?;
        if claims.owner != self.owner {
            return self.remote(&claims, principal, task_id, op).await;
        }
        self.here(&claims, task_id, op).await
    }

    /// Serves `op` for another replica that forwarded it here, the task's owner; never
    /// forwards it again (a task this replica does not own is refused).
    pub async fn serve_forwarded(
        &self,
        principal: &str,
        task_id: &str,
        op: TaskOp,
    ) -> Result<Value, TaskError> {
        let claims = self.open(principal, task_id)?;
        if claims.owner != self.owner {
            return Err(TaskError::OtherOwner);
        }
        self.here(&claims, task_id, op).await
    }

    /// Serves `op` on this replica, the owner. A task it no longer holds (it restarted, or
    /// dropped the finished task under its bound) is read from the result store, or reported
    /// lost; an update or cancel of it is acknowledged.
    async fn here(&self, claims: &TaskClaims, task_id: &str, op: TaskOp) -> Result<Value, TaskError> {
        let now = Instant::now();
        self.metrics.live.set(self.table.sweep(now) as i64);
        let Some(task) = self.table.get(&claims.handle, now) else {
            if matches!(op, TaskOp::Resume { .. }) {
                return Err(TaskError::RoundOver);
            }
            if !matches!(op, TaskOp::Get) {
                return Ok(json!({}));
            }
            let stored = match &self.records {
                Some(records) => records.find(&claims.handle, task_id).await,
                None => None,
            };
            return Ok(stored.unwrap_or_else(|| lost(task_id)));
        };
        match op {
            TaskOp::Get => Ok(self.refreshed(&task, task_id).await),
            TaskOp::Update(answers) => {
                deliver(&task, answers).await;
                Ok(json!({}))
            }
            TaskOp::Resume { tool, answers } => {
                if tool != task.tool {
                    return Err(TaskError::RoundMismatch);
                }
                deliver(&task, answers).await;
                create::round_reply(&task, task_id).await.map(|round| round.to_wire())
            }
            TaskOp::Cancel => {
                if task.cancel(unix_ms()) {
                    tracing::info!(parent: &task.span, "task cancel asked");
                }
                Ok(json!({}))
            }
        }
    }

    /// The detailed task. A running legacy task without open questions asks the upstream's
    /// `tasks/get` for its status message (and a cancel of its own).
    async fn refreshed(&self, task: &LiveTask, task_id: &str) -> Value {
        let upstream = task.upstream_task().filter(|_| task.origin == Origin::LegacyTask);
        if let Some(upstream) =
            upstream.filter(|_| task.is_running() && task.snapshot().input_requests.is_none())
        {
            let params = json!({ "taskId": upstream });
            let asked = tokio::time::timeout(
                defaults::TASK_UPSTREAM_TIMEOUT,
                task.session.request("tasks/get", Some(params)),
            );
            if let Ok(Ok(Outcome::Result(raw))) = asked.await {
                if let Ok(v) = serde_json::from_str::<Value>(raw.get()) {
                    let (status, message) = wire::read_status(&v);
                    task.note_upstream(status, message, unix_ms());
                }
            }
        }
        wire::detailed(task_id, &task.snapshot())
    }

    /// A `tools/call` of `tool` whose `requestState` is a task's id: the retry of an input round
    /// of a call that asked before it created its task (`create.rs`). Its answers go upstream,
    /// and it is answered as the call moved on: another round, the task, or the call's end.
    pub async fn resume(
        &self,
        principal: &str,
        task_id: &str,
        tool: &str,
        answers: Map<String, Value>,
    ) -> Result<Started, TaskError> {
        let op = TaskOp::Resume { tool: tool.to_owned(), answers };
        let round = self.serve(principal, task_id, op).await?;
        Started::from_wire(round)
            .ok_or_else(|| TaskError::OwnerFailed("the owner's answer is not a round's".into()))
    }

    /// Opens the id: the task's claims, if it is the principal's and has not expired.
    fn open(&self, principal: &str, task_id: &str) -> Result<TaskClaims, TaskError> {
        let sealer = TaskSealer::shared(self.keys.current());
        sealer.open(task_id, principal, unix_ms() / 1000).map_err(TaskError::UnknownTask)
    }
}

/// Delivers `answers` to the questions of `task` they name, straight to the waiting upstream
/// requests.
async fn deliver(task: &LiveTask, answers: Map<String, Value>) {
    let delivered = task.take_answers(answers, unix_ms());
    tracing::info!(parent: &task.span, answers = delivered.len(), "task answers delivered");
    for (id, result) in delivered {
        if let Err(e) = task.session.respond(&id, result).await {
            tracing::info!(parent: &task.span, error = %e, "delivering a task's answer upstream");
        }
    }
}
