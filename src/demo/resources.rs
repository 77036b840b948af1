//! The demo's counter resource and its subscriptions (`resources/subscribe`,
//! `notifications/resources/updated`), as a legacy server with shared state has them.
//!
//! The counter is server-wide: any session's `bump_counter` call changes it, and every session
//! subscribed to it hears of the change on its standalone GET stream (a session without one
//! misses it, as with the TypeScript SDK). Since the counter's value is in the resource list,
//! every session with a GET stream is also sent `notifications/resources/list_changed`.
//! Sessions are held weakly; ended ones are pruned, so the list is bounded by the live sessions.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::json;

use super::session::Session;
use crate::protocol::jsonrpc::notification_bytes;
use crate::protocol::methods;

/// The counter resource.
pub(crate) const COUNTER_URI: &str = "demo://counter";
/// Longest one notification waits for room on a GET stream before that session misses it.
const WRITE_BOUND: Duration = Duration::from_secs(1);

/// The counter and the sessions that may hear of it.
#[derive(Default)]
pub(crate) struct Resources {
    counter: AtomicU64,
    sessions: Mutex<Vec<Weak<Session>>>,
}

// === impl Resources ===

impl Resources {
    /// The counter's value now.
    pub(crate) fn counter(&self) -> u64 {
        self.counter.load(Ordering::Relaxed)
    }

    /// Remembers a new session (dropping ended ones).
    pub(crate) fn register(&self, session: &Arc<Session>) {
        let mut sessions = self.sessions.lock();
        sessions.retain(|s| s.strong_count() > 0);
        sessions.push(Arc::downgrade(session));
    }

    /// Adds one to the counter and tells the sessions; returns the new value and how many
    /// `notifications/resources/updated` were written.
    pub(crate) async fn bump(&self) -> (u64, usize) {
        let value = self.counter.fetch_add(1, Ordering::Relaxed) + 1;
        let live: Vec<Arc<Session>> = self.sessions.lock().iter().filter_map(Weak::upgrade).collect();
        let updated = notification_bytes(methods::RESOURCES_UPDATED, Some(&json!({ "uri": COUNTER_URI })));
        let listed = notification_bytes(methods::RESOURCES_LIST_CHANGED, None);
        let mut sent = 0;
        for session in live {
            let Some(stream) = session.live_standalone() else { continue };
            if session.is_subscribed(COUNTER_URI) {
                let wrote = tokio::time::timeout(WRITE_BOUND, stream.message(&updated)).await;
                sent += usize::from(matches!(wrote, Ok(Ok(()))));
            }
            let _ = tokio::time::timeout(WRITE_BOUND, stream.message(&listed)).await;
        }
        (value, sent)
    }
}
