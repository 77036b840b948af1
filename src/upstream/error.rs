//! The one error type of the upstream client, with a variant per case a caller must tell apart.
//!
//! The bridge maps these onto front errors and the pool onto eviction: "the upstream died"
//! ([`UpstreamError::Closed`], [`UpstreamError::Connect`]) and "the upstream hung"
//! ([`UpstreamError::Timeout`]) are distinct from a JSON-RPC error, which is not an error here but
//! an [`crate::protocol::jsonrpc::Outcome::Error`] in a response.

use std::time::Duration;

use http::StatusCode;

use super::sse::SseError;
use super::sse_legacy::EndpointError;

/// A failure to reach or understand the legacy server.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    #[error("invalid upstream settings: {0}")]
    Settings(String),
    #[error("cannot connect to the upstream")]
    Connect(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("upstream request failed")]
    Transport(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("upstream gave no answer within {0:?}")]
    Timeout(Duration),
    #[error("upstream closed the stream: {0}")]
    Closed(String),
    #[error("upstream session expired (HTTP 404); a new session is needed")]
    SessionExpired,
    #[error("upstream answered HTTP {status}: {body}")]
    Http { status: StatusCode, body: String },
    #[error("upstream sent an invalid message: {0}")]
    Protocol(String),
    #[error("upstream SSE stream is malformed")]
    Sse(#[from] SseError),
    #[error("upstream initialize failed: {0}")]
    Initialize(String),
    #[error("no upstream session became free within {0:?}")]
    PoolExhausted(Duration),
    /// The caller's pool key (principal and capabilities) held its most sessions throughout.
    #[error("no upstream session of this client became free within {0:?}")]
    KeyExhausted(Duration),
    #[error("upstream overloaded: {limit} calls already wait for a session")]
    QueueFull { limit: usize },
    /// The caller's principal holds `pool_max_per_principal` sessions or places in the queue.
    #[error("this client holds its share of upstream sessions ({limit})")]
    PrincipalShare { limit: usize },
    #[error("cannot start the upstream command")]
    Spawn(#[source] std::io::Error),
    /// A stdio upstream process ended or was stopped. The text is the gateway's own description
    /// (exit status, signal, or why it was stopped), never the child's output, so the client may
    /// be told it.
    #[error("{0}")]
    ProcessEnded(String),
    /// The event stream of an HTTP+SSE session ended or broke: the session is dead.
    #[error("the upstream's event stream ended")]
    StreamEnded,
    /// An HTTP+SSE server announced a message endpoint the gateway will not use.
    #[error("refused the upstream's message endpoint")]
    Endpoint(#[from] EndpointError),
}

// === impl UpstreamError ===

impl UpstreamError {
    /// A fixed label for metrics and logs.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Settings(_) => "settings",
            Self::Connect(_) => "connect",
            Self::Transport(_) => "transport",
            Self::Timeout(_) => "timeout",
            Self::Closed(_) => "closed",
            Self::SessionExpired => "session_expired",
            Self::Http { .. } => "http_status",
            Self::Protocol(_) | Self::Sse(_) => "protocol",
            Self::Initialize(_) => "initialize",
            Self::PoolExhausted(_) => "pool_exhausted",
            Self::KeyExhausted(_) => "key_exhausted",
            Self::QueueFull { .. } => "queue_full",
            Self::PrincipalShare { .. } => "principal_share",
            Self::Spawn(_) => "spawn",
            Self::ProcessEnded(_) => "process_ended",
            Self::StreamEnded => "stream_ended",
            Self::Endpoint(_) => "endpoint",
        }
    }

    /// True when the upstream died (refused the connection, dropped it, or ended a stream
    /// before the response), as opposed to hanging ([`Self::Timeout`]) or refusing.
    pub fn is_dead(&self) -> bool {
        matches!(
            self,
            Self::Connect(_)
                | Self::Transport(_)
                | Self::Closed(_)
                | Self::Spawn(_)
                | Self::ProcessEnded(_)
                | Self::StreamEnded
        )
    }

    /// True when the pool refused the call for overload (the front answers 503).
    pub fn is_overload(&self) -> bool {
        matches!(
            self,
            Self::PoolExhausted(_)
                | Self::KeyExhausted(_)
                | Self::QueueFull { .. }
                | Self::PrincipalShare { .. }
        )
    }

    /// True when the session that produced this error must not be reused.
    pub fn poisons_session(&self) -> bool {
        !matches!(
            self,
            Self::PoolExhausted(_)
                | Self::KeyExhausted(_)
                | Self::QueueFull { .. }
                | Self::PrincipalShare { .. }
                | Self::Settings(_)
        )
    }

    /// A short, bounded excerpt of an HTTP error body for the message.
    pub(crate) fn http(status: StatusCode, body: &[u8]) -> Self {
        let text = String::from_utf8_lossy(&body[..body.len().min(256)]).into_owned();
        Self::Http { status, body: text }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error of each kind but the two whose causes other modules build (a malformed SSE
    /// stream, a refused endpoint), with whether it is dead, overload and poisons its session.
    fn kinds() -> Vec<(UpstreamError, bool, bool, bool)> {
        let wait = Duration::from_secs(1);
        let io = || std::io::Error::other("refused");
        vec![
            (UpstreamError::Settings("x".into()), false, false, false),
            (UpstreamError::Connect(Box::new(io())), true, false, true),
            (UpstreamError::Transport(Box::new(io())), true, false, true),
            (UpstreamError::Timeout(wait), false, false, true),
            (UpstreamError::Closed("x".into()), true, false, true),
            (UpstreamError::SessionExpired, false, false, true),
            (UpstreamError::http(StatusCode::BAD_GATEWAY, b"x"), false, false, true),
            (UpstreamError::Protocol("x".into()), false, false, true),
            (UpstreamError::Initialize("x".into()), false, false, true),
            (UpstreamError::PoolExhausted(wait), false, true, false),
            (UpstreamError::KeyExhausted(wait), false, true, false),
            (UpstreamError::QueueFull { limit: 1 }, false, true, false),
            (UpstreamError::PrincipalShare { limit: 1 }, false, true, false),
            (UpstreamError::Spawn(io()), true, false, true),
            (UpstreamError::ProcessEnded("x".into()), true, false, true),
            (UpstreamError::StreamEnded, true, false, true),
        ]
    }

    #[test]
    fn an_upstream_that_went_away_is_told_from_one_that_hung_refused_or_was_overloaded() {
        for (error, dead, overload, poisons) in kinds() {
            assert_eq!(error.is_dead(), dead, "{error:?} dead");
            assert_eq!(error.is_overload(), overload, "{error:?} overload");
            assert_eq!(error.poisons_session(), poisons, "{error:?} poisons its session");
        }
    }
}
