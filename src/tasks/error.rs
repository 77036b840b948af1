//! Why a task request failed. The front turns each into its client error at its one boundary
//! (`src/error.rs`); the detail (why an id did not open, what the upstream said when it died)
//! stays here, for the log line and the metric label.

use crate::mrtr::TaskIdError;
use crate::protocol::jsonrpc::ErrorObject;
use crate::upstream::UpstreamError;

/// A failed `tools/call` that would start a task, or a failed `tasks/*` request.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    /// The client did not declare `io.modelcontextprotocol/tasks` (`-32021`).
    #[error("the client did not declare the tasks extension")]
    ExtensionRequired,
    /// The task id did not open (forged, another principal's, expired, malformed).
    #[error("unknown task id ({})", .0.reason())]
    UnknownTask(#[source] TaskIdError),
    /// The id names a task another replica holds, and this one cannot reach it: no link to
    /// other replicas here, no owner URL in the id, or a forwarded request that reached a
    /// replica which is not the owner.
    #[error("the task is held by another replica, which this one cannot reach")]
    OtherOwner,
    /// The task's owner answered a forwarded request with this error (already the fixed
    /// object it would have sent its own client).
    #[error("the owner replica refused: {}", .error.message)]
    OwnerRefused { error: ErrorObject, status: u16 },
    /// The task's owner could not be reached or did not answer in time: it is gone.
    #[error("the replica running the task is gone")]
    OwnerGone(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The task's owner answered a forwarded request with something that is not an answer.
    #[error("the replica running the task did not answer usably")]
    OwnerFailed(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// `tasks.max_tasks` live tasks are held on this replica.
    #[error("too many tasks on this replica (the limit is {limit})")]
    Full { limit: usize },
    /// The principal holds `tasks.max_per_principal` live tasks.
    #[error("too many tasks for this client (the limit is {limit})")]
    PrincipalFull { limit: usize },
    /// The upstream answered the creating `tools/call` with a JSON-RPC error: its protocol
    /// answer, relayed like any call's.
    #[error("upstream error {}: {}", .0.code, .0.message)]
    Upstream(ErrorObject),
    /// The upstream could not be reached or failed while creating the task.
    #[error("upstream failed while creating the task")]
    Unavailable(#[source] UpstreamError),
    /// The upstream's answer to a task-augmented `tools/call` was neither a task nor a result.
    #[error("the upstream answered a task request with no task: {0}")]
    Malformed(&'static str),
    /// A retry whose `requestState` is a task's id came after the task's input rounds ended
    /// (the call created its task or ended, and the owner no longer holds it).
    #[error("the input round this requestState continues is over")]
    RoundOver,
    /// A retry whose `requestState` is the id of a task that calls another tool.
    #[error("the requestState belongs to a call of another tool")]
    RoundMismatch,
    /// The task id could not be sealed.
    #[error("the task id could not be sealed")]
    Seal(#[source] TaskIdError),
}

// === impl TaskError ===

impl TaskError {
    /// A fixed label for metrics and logs.
    pub fn label(&self) -> &'static str {
        match self {
            Self::ExtensionRequired => "extension_required",
            Self::UnknownTask(_) => "unknown_task",
            Self::OtherOwner => "other_owner",
            Self::OwnerRefused { .. } => "owner_refused",
            Self::OwnerGone(_) => "owner_gone",
            Self::OwnerFailed(_) => "owner_failed",
            Self::Full { .. } => "full",
            Self::PrincipalFull { .. } => "principal_full",
            Self::Upstream(_) => "upstream_error",
            Self::Unavailable(_) => "upstream_unavailable",
            Self::Malformed(_) => "malformed",
            Self::RoundOver => "round_over",
            Self::RoundMismatch => "round_mismatch",
            Self::Seal(_) => "seal",
        }
    }
}
