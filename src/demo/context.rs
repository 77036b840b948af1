//! What a running call can do besides answering: send server → client requests and progress.
//!
//! This is the behaviour the gateway exists for. A request made on [`Route::Post`] rides the
//! call's own SSE stream (the TypeScript SDK's `relatedRequestId`); one made on
//! [`Route::Standalone`] goes out on the session's GET stream, as the SDK's `listRoots()` does,
//! waiting for that stream to be opened if need be. Every request has one deadline covering the
//! wait for a stream, the write and the answer.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::time::{timeout_at, Instant};

use super::session::{Answer, Session, SessionError};
use super::sse::{SseError, SseWriter};
use super::stats::DemoStats;
use crate::protocol::jsonrpc::{notification_bytes, request_bytes, ErrorObject};
use crate::protocol::{methods, RequestId};

/// Why a server → client request got no usable answer.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AskError {
    #[error("{method} failed: MCP error {}: {}", .error.code, .error.message)]
    Rejected { method: &'static str, error: ErrorObject },
    #[error("{method} timed out after {} ms (MCP error -32001: Request timed out)", .after.as_millis())]
    TimedOut { method: &'static str, after: Duration },
    #[error("{method} could not be sent: {source}")]
    Stream { method: &'static str, source: SseError },
    #[error("{method} could not be sent: {source}")]
    Session { method: &'static str, source: SessionError },
    #[error("{method} was abandoned: the session ended")]
    SessionEnded { method: &'static str },
}

/// Which stream a server → client request is written to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// The SSE stream of the POST that started the call.
    Post,
    /// The session's standalone GET stream.
    Standalone,
}

/// Everything a handler needs while one call runs.
pub(crate) struct CallContext {
    pub(crate) session: Arc<Session>,
    pub(crate) stream: SseWriter,
    pub(crate) stats: Arc<DemoStats>,
    pub(crate) request_timeout: Duration,
    pub(crate) progress_token: Option<Value>,
    /// The server-wide resources (the counter a tool changes).
    pub(crate) resources: Arc<super::resources::Resources>,
}

/// Keeps the outstanding count and the session's pending table right however the wait ends.
struct Outstanding<'a> {
    ctx: &'a CallContext,
    id: i64,
}

impl Drop for Outstanding<'_> {
    fn drop(&mut self) {
        self.ctx.session.forget_request(self.id);
        self.ctx.stats.record_request_settled();
    }
}

// === impl CallContext ===

impl CallContext {
    /// Sends `method` to the client on `route` and waits for its answer.
    pub(crate) async fn ask(
        &self,
        method: &'static str,
        params: Value,
        route: Route,
    ) -> Result<Value, AskError> {
        let deadline = Instant::now() + self.request_timeout;
        let timed_out = AskError::TimedOut { method, after: self.request_timeout };
        timeout_at(deadline, self.ask_on(method, &params, route)).await.unwrap_or(Err(timed_out))
    }

    async fn ask_on(&self, method: &'static str, params: &Value, route: Route) -> Result<Value, AskError> {
        let stream = match route {
            Route::Post => self.stream.clone(),
            Route::Standalone => self.session.standalone_writer().await,
        };
        let (id, answer) =
            self.session.register_request().map_err(|source| AskError::Session { method, source })?;
        self.stats.record_request_opened();
        let _outstanding = Outstanding { ctx: self, id };
        let bytes = request_bytes(&RequestId::Number(id), method, Some(params));
        stream.message(&bytes).await.map_err(|source| AskError::Stream { method, source })?;
        self.stats.record_request_sent();
        settle(method, answer.await.ok())
    }

    /// Sends `notifications/progress` if the request asked for progress.
    pub(crate) async fn progress(&self, progress: u64, total: u64) -> Result<(), SseError> {
        let Some(token) = &self.progress_token else {
            return Ok(());
        };
        let params = json!({
            "progressToken": token,
            "progress": progress,
            "total": total,
            "message": format!("step {progress} of {total}"),
        });
        let bytes = notification_bytes(methods::PROGRESS, Some(&params));
        self.stream.message(&bytes).await
    }
}

fn settle(method: &'static str, answer: Option<Answer>) -> Result<Value, AskError> {
    match answer {
        Some(Ok(result)) => Ok(result),
        Some(Err(error)) => Err(AskError::Rejected { method, error }),
        None => Err(AskError::SessionEnded { method }),
    }
}
