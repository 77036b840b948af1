//! Why a `subscriptions/listen` request was refused before its stream opened. It becomes a
//! [`crate::error::FrontError`] at the one boundary in `src/error.rs`; the upstream's own text
//! stays in the source, for the log line.

use crate::upstream::UpstreamError;

/// A refused listen request.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    /// The `notifications` filter is malformed; the message describes the client's own input.
    #[error("{0}")]
    Invalid(String),
    #[error("too many resourceSubscriptions in one subscriptions/listen request (the limit is {limit})")]
    TooManyUris { limit: usize },
    #[error("too many subscriptions/listen streams open for this client (the limit is {limit})")]
    PerPrincipal { limit: usize },
    #[error("too many subscriptions/listen streams open on this gateway (the limit is {limit})")]
    Total { limit: usize },
    #[error("too many clients listen on this gateway: no upstream session is free for another (the limit is {limit})")]
    Sessions { limit: usize },
    /// The gateway is shutting down.
    #[error("the gateway is shutting down")]
    ShuttingDown,
    /// The upstream session that listens could not be opened.
    #[error("opening the upstream session")]
    Upstream(#[source] UpstreamError),
}

// === impl ListenError ===

impl ListenError {
    /// A fixed label for the refusal metric.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Invalid(_) => "invalid",
            Self::TooManyUris { .. } => "too_many_uris",
            Self::PerPrincipal { .. } => "per_principal",
            Self::Total { .. } => "total",
            Self::Sessions { .. } => "sessions",
            Self::ShuttingDown => "shutting_down",
            Self::Upstream(_) => "upstream",
        }
    }
}
