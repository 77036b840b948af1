//! A task request that reaches a replica other than the task's owner (the replica sealed in
//! its id): what this replica asks of the link to the owner, and what it answers meanwhile.
//!
//! The link itself (HTTP to the owner's internal listener, signed with the replica MAC, under
//! the cluster's connect and accept bounds) is the cluster's, three layers up; the task bridge
//! sees only [`TaskLink`], as the bridge sees its `OwnerLink` (`src/bridge/owner.rs`).
//!
//! A `tasks/get` looks in the shared result store first (a finished task is served from there
//! without asking the owner), then asks the owner. An owner that cannot be reached (refused,
//! timed out) is gone: its live tasks went with it, so `tasks/get` answers the task `failed`
//! saying so, and `tasks/update` and `tasks/cancel` get an error saying so, both within the
//! link's bounds. An owner that answered is relayed, its errors included (they are already the
//! fixed objects it would have sent its own client).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::{TaskError, Tasks};
use crate::mrtr::TaskClaims;
use crate::protocol::jsonrpc::ErrorObject;

/// One of the task requests a client can send about a task: the three of the extension, and
/// the retry of an input round of a call that asks before it creates its task (`create.rs`).
#[derive(Debug, Clone)]
pub enum TaskOp {
    Get,
    /// The client's `inputResponses`.
    Update(Map<String, Value>),
    Cancel,
    /// A `tools/call` of `tool` whose `requestState` is the task's id, with its
    /// `inputResponses`.
    Resume {
        tool: String,
        answers: Map<String, Value>,
    },
}

/// A task request for the owner: who asks, about which task, what.
#[derive(Debug, Clone, Copy)]
pub struct OwnerCall<'a> {
    /// The owner's advertised URL (sealed in the id).
    pub owner: &'a str,
    pub principal: &'a str,
    pub task_id: &'a str,
    pub op: &'a TaskOp,
}

/// What the owner answered.
#[derive(Debug)]
pub enum OwnerAnswer {
    /// The result to relay: the detailed task, or the empty ack.
    Answered(Value),
    /// The owner's error, as it would have sent it to its own client.
    Refused { error: ErrorObject, status: u16 },
}

/// Why the owner gave no answer.
#[derive(Debug)]
pub enum LinkFailure {
    /// It could not be reached, or did not answer in time: taken for gone.
    Gone(Box<dyn std::error::Error + Send + Sync>),
    /// It answered something that is not an answer (a refused MAC, a malformed body).
    Failed(Box<dyn std::error::Error + Send + Sync>),
}

/// A future of one forwarded task request.
pub type OwnerCalling<'a> = Pin<Box<dyn Future<Output = Result<OwnerAnswer, LinkFailure>> + Send + 'a>>;

/// Reaches the owners of tasks (`cluster.advertise_url` configured).
pub trait TaskLink: Send + Sync {
    /// Sends `call` to its owner, within the link's bounds.
    fn call<'a>(&'a self, call: OwnerCall<'a>) -> OwnerCalling<'a>;
}

// === impl TaskOp ===

impl TaskOp {
    /// The op's name on the wire between replicas and in logs.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Get => "get",
            Self::Update(_) => "update",
            Self::Cancel => "cancel",
            Self::Resume { .. } => "resume",
        }
    }
}

// === impl Tasks ===

impl Tasks {
    /// Uses `link` to reach the owners of tasks this replica does not hold.
    pub fn with_link(mut self, link: Arc<dyn TaskLink>) -> Self {
        self.link = Some(link);
        self
    }

    /// Serves `op` about a task another replica owns: from the result store, or by its owner.
    pub(super) async fn remote(
        &self,
        claims: &TaskClaims,
        principal: &str,
        task_id: &str,
        op: TaskOp,
    ) -> Result<Value, TaskError> {
        if let (TaskOp::Get, Some(records)) = (&op, &self.records) {
            if let Some(stored) = records.find(&claims.handle, task_id).await {
                self.metrics.forward("stored");
                return Ok(stored);
            }
        }
        let Some(link) = (!claims.owner.is_empty()).then_some(self.link.as_ref()).flatten() else {
            return Err(TaskError::OtherOwner);
        };
        let call = OwnerCall { owner: &claims.owner, principal, task_id, op: &op };
        match link.call(call).await {
            Ok(OwnerAnswer::Answered(answer)) => {
                self.metrics.forward("answered");
                Ok(answer)
            }
            Ok(OwnerAnswer::Refused { error, status }) => {
                self.metrics.forward("refused");
                Err(TaskError::OwnerRefused { error, status })
            }
            Err(LinkFailure::Gone(e)) => {
                self.metrics.forward("gone");
                tracing::warn!(op = op.name(), error = crate::logging::chain(&*e), "a task's owner is gone");
                self.without_owner(claims, task_id, &op, e).await
            }
            Err(LinkFailure::Failed(e)) => {
                self.metrics.forward("failed");
                tracing::warn!(op = op.name(), error = crate::logging::chain(&*e), "a task's owner failed");
                Err(TaskError::OwnerFailed(e))
            }
        }
    }

    /// The answer when the owner is gone: a stored record still says how the task ended (so
    /// an update or cancel of it is acknowledged, as for any finished task); otherwise the
    /// task is `failed` for `tasks/get` and the others are refused.
    async fn without_owner(
        &self,
        claims: &TaskClaims,
        task_id: &str,
        op: &TaskOp,
        e: Box<dyn std::error::Error + Send + Sync>,
    ) -> Result<Value, TaskError> {
        let stored = match &self.records {
            Some(records) => records.find(&claims.handle, task_id).await,
            None => None,
        };
        match (op, stored) {
            (TaskOp::Resume { .. }, Some(_)) => Err(TaskError::RoundOver),
            (TaskOp::Get, Some(task)) => Ok(task),
            (_, Some(_)) => Ok(json!({})),
            (TaskOp::Get, None) => Ok(gone(task_id)),
            (_, None) => Err(TaskError::OwnerGone(e)),
        }
    }
}

/// The detailed task of a task whose owner is gone.
fn gone(task_id: &str) -> Value {
    super::failed_task(task_id, GONE)
}

/// What a client is told of a task whose owner is gone.
pub const GONE: &str = "the replica running this task is gone: its live state was lost with it";
