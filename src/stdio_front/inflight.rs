//! The requests being served: one task each, and the table from JSON-RPC id to task that
//! `notifications/cancelled` looks up. Owned by the serve loop alone, so it needs no lock; a
//! task's entry goes when the loop reaps the task.
//!
//! Ids must be unique among in-flight requests (basic/index.mdx). A client that reuses one
//! anyway is served; a cancellation then reaches the newest request with that id.

use std::collections::HashMap;
use std::future::Future;

use tokio::task::{AbortHandle, Id, JoinSet};

use crate::protocol::RequestId;

#[derive(Default)]
pub(super) struct InFlight {
    tasks: JoinSet<()>,
    by_id: HashMap<RequestId, AbortHandle>,
    by_task: HashMap<Id, RequestId>,
}

impl InFlight {
    /// Runs `work`, cancellable by `id` when it has one.
    pub(super) fn spawn(&mut self, id: Option<RequestId>, work: impl Future<Output = ()> + Send + 'static) {
        let handle = self.tasks.spawn(work);
        if let Some(id) = id {
            self.by_task.insert(handle.id(), id.clone());
            self.by_id.insert(id, handle);
        }
    }

    /// Aborts the request with `id`; false when none is in flight (it may just have ended).
    pub(super) fn cancel(&mut self, id: &RequestId) -> bool {
        match self.by_id.remove(id) {
            Some(handle) => {
                handle.abort();
                true
            }
            None => false,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.tasks.len()
    }

    /// Waits for the next task to end and forgets it; `None` when none is running.
    pub(super) async fn reap(&mut self) -> Option<()> {
        let id = match self.tasks.join_next_with_id().await? {
            Ok((id, ())) => id,
            Err(e) => {
                if e.is_panic() {
                    tracing::error!(error = %e, "a stdio request task panicked");
                }
                e.id()
            }
        };
        if let Some(request) = self.by_task.remove(&id) {
            // Only this task's own entry: a reused id may now name a newer task.
            if self.by_id.get(&request).is_some_and(|h| h.id() == id) {
                self.by_id.remove(&request);
            }
        }
        Some(())
    }

    /// Aborts every task and waits until all have ended.
    pub(super) async fn abort_all(&mut self) {
        self.tasks.shutdown().await;
        self.by_id.clear();
        self.by_task.clear();
    }
}
