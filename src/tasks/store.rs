//! Where a finished task's result or error is kept for every replica: the seam to a shared
//! store, and what goes into it.
//!
//! The task bridge sits below the state store (README, `## Layout`), so it defines what it asks
//! of one, [`ResultStore`], and the Redis store implements it (`src/state_store/tasks.rs`);
//! without `state.redis_url` there is none and the owner alone holds the result. What is
//! stored is the detailed task `tasks/get` answers, sealed with the state key ring
//! ([`crate::mrtr::TaskRecordSealer`]) under a key derived from the task's random handle, with
//! the task's remaining life as its time to live. A reader opens it only for the task whose id
//! it was given, and replaces the id in it by that one.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tokio::time::Instant;

use super::live::LiveTask;
use super::wire;
use crate::defaults;
use crate::mrtr::{LiveRing, TaskRecordSealer};

/// Why the store did not answer; for the log line (the store counts it under its own label).
pub type StoreFailure = Box<dyn std::error::Error + Send + Sync>;

/// A future of one store operation.
pub type Storing<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreFailure>> + Send + 'a>>;

/// A store every replica reads (Redis), each operation bounded in time by its implementation.
pub trait ResultStore: Send + Sync {
    /// Keeps `value` under `key` for `ttl`.
    fn put<'a>(&'a self, key: &'a str, value: String, ttl: Duration) -> Storing<'a, ()>;
    /// The value under `key`, reading at most `max_bytes + 1` bytes of it (a longer one is an
    /// error); `None` when there is none.
    fn get<'a>(&'a self, key: &'a str, max_bytes: usize) -> Storing<'a, Option<String>>;
}

/// The task bridge's side of the store: seals and opens records, derives their keys.
#[derive(Clone)]
pub(super) struct Records {
    store: Arc<dyn ResultStore>,
    keys: Arc<LiveRing>,
    max_bytes: usize,
}

// === impl Records ===

impl Records {
    /// Records of tasks whose result or error is at most `max_result_bytes`.
    pub(super) fn new(store: Arc<dyn ResultStore>, keys: Arc<LiveRing>, max_result_bytes: usize) -> Self {
        // The record is the detailed task around the result, sealed: base64 of it and the
        // envelope, with room for the task's own fields.
        let max_bytes = (max_result_bytes + defaults::TASK_RECORD_OVERHEAD_BYTES).div_ceil(3) * 4;
        Self { store, keys, max_bytes }
    }

    fn sealer(&self) -> TaskRecordSealer {
        TaskRecordSealer::shared(self.keys.current(), self.max_bytes)
    }

    /// Stores the finished `task` named `handle` until it expires. A task still running, or
    /// with no life left, is not stored; a failure is logged, the owner still holds the task.
    pub(super) async fn keep(&self, handle: &str, task: &LiveTask) {
        let ttl = task.expires.saturating_duration_since(Instant::now());
        if task.is_running() || ttl < Duration::from_millis(1) {
            return;
        }
        let snapshot = task.snapshot();
        let detailed = wire::detailed("", &snapshot);
        let sealed = match self.sealer().seal(handle, &detailed) {
            Ok(sealed) => sealed,
            Err(e) => {
                tracing::warn!(error = %e, "a finished task could not be sealed for the result store");
                return;
            }
        };
        match self.store.put(&key(handle), sealed, ttl).await {
            Ok(()) => tracing::info!(status = snapshot.status, "task result stored"),
            Err(e) => tracing::warn!(
                error = crate::logging::chain(&*e),
                "task result not stored: only this replica serves it"
            ),
        }
    }

    /// The stored detailed task named `handle`, its id set to `task_id`; `None` when none is
    /// stored, or the store failed (logged), or the record does not open (logged).
    pub(super) async fn find(&self, handle: &str, task_id: &str) -> Option<Value> {
        let text = match self.store.get(&key(handle), self.max_bytes).await {
            Ok(Some(text)) => text,
            Ok(None) => return None,
            Err(e) => {
                tracing::info!(error = crate::logging::chain(&*e), "the result store did not answer");
                return None;
            }
        };
        match self.sealer().open(handle, &text) {
            Ok(mut task) => {
                if let Some(fields) = task.as_object_mut() {
                    fields.insert("taskId".into(), json!(task_id));
                }
                Some(task)
            }
            Err(e) => {
                tracing::warn!(reason = e.reason(), error = %e, "a stored task record did not open");
                None
            }
        }
    }
}

/// The store key of the task named `handle`: a prefix and the hex of the first 16 bytes of the
/// handle's SHA-256 (the handle itself is not shown to the store).
pub(super) fn key(handle: &str) -> String {
    let digest = Sha256::digest(handle.as_bytes());
    let mut out = String::with_capacity(defaults::TASK_STORE_KEY_PREFIX.len() + 32);
    out.push_str(defaults::TASK_STORE_KEY_PREFIX);
    for b in &digest[..16] {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_a_digest_of_the_handle() {
        let k = key("0123456789abcdef");
        assert!(k.starts_with(defaults::TASK_STORE_KEY_PREFIX));
        assert_eq!(k.len(), defaults::TASK_STORE_KEY_PREFIX.len() + 32);
        assert!(!k.contains("0123456789abcdef"));
        assert_eq!(k, key("0123456789abcdef"));
        assert_ne!(k, key("0123456789abcdee"));
    }
}
