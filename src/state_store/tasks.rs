//! Finished tasks in Redis, for every replica: the task bridge's [`ResultStore`]
//! (`src/tasks/store.rs`), on the same connection and under the same time bound as single use.
//!
//! A record is written with `SET key value PX ttl` and read with `GETRANGE key 0 max`, so a
//! reader never takes more than the bound from the server, whatever was written under the
//! key. The task bridge seals what it stores and derives the keys; this side only moves bytes.
//! Failures are counted in `state_store_errors_total` under `op="task_put"` and
//! `op="task_get"`; the task bridge logs them and carries on without the store.

use std::sync::Arc;
use std::time::Duration;

use super::{StateStore, StoreError};
use crate::metrics::Metrics;
use crate::tasks::store::{ResultStore, Storing};

/// The task bridge's view of the state store.
pub struct TaskResults {
    store: Arc<StateStore>,
    metrics: Arc<Metrics>,
}

/// A record longer than the reader's bound.
#[derive(Debug, thiserror::Error)]
#[error("the stored task record is over {0} bytes")]
struct TooLarge(usize);

// === impl TaskResults ===

impl TaskResults {
    pub fn new(store: Arc<StateStore>, metrics: Arc<Metrics>) -> Self {
        Self { store, metrics }
    }

    fn failed(&self, op: &str, e: StoreError) -> Box<dyn std::error::Error + Send + Sync> {
        self.metrics.state_store_errors.with_label_values(&[op, e.label()]).inc();
        Box::new(e)
    }

    async fn set(&self, key: &str, value: String, ttl: Duration) -> Result<(), StoreError> {
        let mut cmd = redis::cmd("SET");
        cmd.arg(key).arg(value).arg("PX").arg(ttl.as_millis().max(1) as u64);
        let mut conn = self.store.conn.clone();
        self.store.bounded(cmd.query_async::<()>(&mut conn)).await
    }

    async fn range(&self, key: &str, max_bytes: usize) -> Result<Vec<u8>, StoreError> {
        let mut cmd = redis::cmd("GETRANGE");
        cmd.arg(key).arg(0).arg(max_bytes);
        let mut conn = self.store.conn.clone();
        self.store.bounded(cmd.query_async::<Vec<u8>>(&mut conn)).await
    }
}

impl ResultStore for TaskResults {
    fn put<'a>(&'a self, key: &'a str, value: String, ttl: Duration) -> Storing<'a, ()> {
        Box::pin(async move { self.set(key, value, ttl).await.map_err(|e| self.failed("task_put", e)) })
    }

    fn get<'a>(&'a self, key: &'a str, max_bytes: usize) -> Storing<'a, Option<String>> {
        Box::pin(async move {
            let bytes = self.range(key, max_bytes).await.map_err(|e| self.failed("task_get", e))?;
            if bytes.is_empty() {
                // GETRANGE answers an empty string for a key that does not exist.
                return Ok(None);
            }
            if bytes.len() > max_bytes {
                self.metrics.state_store_errors.with_label_values(&["task_get", "too_large"]).inc();
                return Err(Box::new(TooLarge(max_bytes)) as Box<dyn std::error::Error + Send + Sync>);
            }
            // A record is base64 text; anything else is not one.
            Ok(String::from_utf8(bytes).ok())
        })
    }
}
