//! What one legacy session keeps whatever its transport: the router of its in-flight calls,
//! its request-id counter and its health. A session's handles, its calls and its transport's
//! background tasks (the GET stream, a child's stdout reader) share it.
//!
//! A session allocates its own request ids: front ids from many clients would collide.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU8, Ordering};

use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::mpsc;

use super::event::Origin;
use super::handshake::INITIALIZE_ID;
use super::router::{Action, Router};
use super::settings::UpstreamSettings;
use super::UpstreamError;
use crate::protocol::jsonrpc::{error_bytes, result_bytes, ErrorObject};
use crate::protocol::log_level::LogLevel;
use crate::protocol::{Envelope, RequestId};

/// The transport-neutral state of one session.
pub(crate) struct SessionState {
    pub(crate) router: Mutex<Router>,
    next_id: AtomicI64,
    healthy: AtomicBool,
    /// The `logging/setLevel` threshold the server accepted last, as [`LogLevel::rank`]; 0 until
    /// one was set (the server's own default applies).
    log_level: AtomicU8,
}

// === impl SessionState ===

impl SessionState {
    /// A fresh session; unattributed `roots/list` requests get the configured roots, and a
    /// `notifications/tools/list_changed` is counted in the settings' [`ToolsChanged`].
    pub(crate) fn new(settings: &UpstreamSettings) -> Self {
        Self {
            router: Mutex::new(
                Router::with_roots(settings.roots.clone()).counting(settings.tools_changed.clone()),
            ),
            next_id: AtomicI64::new(INITIALIZE_ID + 1),
            healthy: AtomicBool::new(true),
            log_level: AtomicU8::new(0),
        }
    }

    /// The threshold the server accepted last; `None` until one was set.
    pub(crate) fn log_level(&self) -> Option<LogLevel> {
        LogLevel::from_rank(self.log_level.load(Ordering::Relaxed))
    }

    /// Records the threshold the server has just accepted.
    pub(crate) fn set_log_level(&self, level: LogLevel) {
        self.log_level.store(level.rank(), Ordering::Relaxed);
    }

    pub(crate) fn next_id(&self) -> i64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// False once a failure showed the session can't be reused.
    pub(crate) fn is_healthy(&self) -> bool {
        self.healthy.load(Ordering::Relaxed)
    }

    pub(crate) fn mark_unhealthy(&self) {
        self.healthy.store(false, Ordering::Relaxed);
    }

    /// Marks the session unusable when a result shows it is.
    pub(crate) fn note<T>(&self, result: Result<T, UpstreamError>) -> Result<T, UpstreamError> {
        if let Err(e) = &result {
            if e.poisons_session() {
                self.mark_unhealthy();
            }
        }
        result
    }

    /// Parses one message text and decides where it goes; the flag is true when it is the
    /// response that ends the call whose stream carried it.
    pub(crate) fn route(&self, text: &str, origin: Origin) -> Result<(Action, bool), UpstreamError> {
        let env = Envelope::parse_str(text).map_err(|e| UpstreamError::Protocol(format!("{e}")))?;
        Ok(self.router.lock().route(env, origin))
    }

    /// Ends every call in flight with the error `why` builds (the session died).
    pub(crate) async fn fail_all(&self, why: impl Fn() -> UpstreamError) {
        self.mark_unhealthy();
        let queues = self.router.lock().drain();
        for tx in queues {
            // A closed queue means the call was dropped: nobody waits for the error.
            let _ = tx.send(Err(why())).await;
        }
    }
}

/// Delivers a routed event to its call. A closed queue means the call was dropped: its events
/// are discarded.
pub(crate) async fn deliver(action: Action) -> Option<Action> {
    match action {
        Action::Deliver(tx, event) => {
            let _ = tx.send(Ok(event)).await;
            None
        }
        Action::Tap(tx, event) => {
            if let Err(mpsc::error::TrySendError::Full(_)) = tx.try_send(Ok(event)) {
                tracing::warn!("a list change for listen streams dropped: their queue is full");
            }
            None
        }
        Action::Ignore(why) => {
            tracing::debug!(why, "upstream message dropped");
            None
        }
        answer @ Action::Answer(..) => Some(answer),
    }
}

/// One JSON-RPC response to a server request, framed for any transport.
pub(crate) fn response_bytes(
    id: &RequestId,
    outcome: Result<Value, ErrorObject>,
) -> Result<Vec<u8>, UpstreamError> {
    match outcome {
        Ok(value) => {
            let raw = serde_json::value::to_raw_value(&value)
                .map_err(|e| UpstreamError::Protocol(format!("unserialisable result: {e}")))?;
            Ok(result_bytes(id, &raw))
        }
        Err(error) => Ok(error_bytes(Some(id), &error)),
    }
}
