//! The table of live sessions, bounded in number and in idle time.
//!
//! Unlike the reference TypeScript server, which keeps every session until it is deleted, the
//! demo evicts sessions nobody has used for a while, and the least recently used one when the
//! table is full, so a long test run or a forgetful client cannot grow it without limit.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::session::Session;
use super::stats::{DemoStats, SessionEnd};

/// Errors of the session table.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StoreError {
    #[error("session id collision")]
    Collision,
}

/// Live sessions by `Mcp-Session-Id`.
pub(crate) struct SessionStore {
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    max_sessions: usize,
    idle_timeout: Duration,
    stats: Arc<DemoStats>,
}

// === impl SessionStore ===

impl SessionStore {
    pub(crate) fn new(max_sessions: usize, idle_timeout: Duration, stats: Arc<DemoStats>) -> Self {
        Self { sessions: Mutex::new(HashMap::new()), max_sessions: max_sessions.max(1), idle_timeout, stats }
    }

    /// Adds a session, first evicting idle ones and, if still full, the least recently used.
    pub(crate) fn insert(&self, session: Arc<Session>) -> Result<(), StoreError> {
        self.evict_idle(Instant::now());
        let evicted = {
            let mut sessions = self.sessions.lock();
            if sessions.contains_key(session.id()) {
                return Err(StoreError::Collision);
            }
            let evicted = (sessions.len() >= self.max_sessions)
                .then(|| least_recent(&sessions))
                .flatten()
                .and_then(|id| sessions.remove(&id));
            sessions.insert(session.id().to_owned(), session);
            evicted
        };
        if let Some(old) = evicted {
            self.end(&old, SessionEnd::Evicted);
        }
        Ok(())
    }

    /// Looks a session up and marks it used.
    pub(crate) fn get(&self, id: &str) -> Option<Arc<Session>> {
        let session = self.sessions.lock().get(id).cloned()?;
        session.touch();
        Some(session)
    }

    /// Ends the session with this id; false if there was none.
    pub(crate) fn delete(&self, id: &str) -> bool {
        let removed = self.sessions.lock().remove(id);
        removed.map(|session| self.end(&session, SessionEnd::Deleted)).is_some()
    }

    /// Ends every session idle since before `now - idle_timeout`.
    pub(crate) fn evict_idle(&self, now: Instant) {
        let Some(cutoff) = now.checked_sub(self.idle_timeout) else {
            return;
        };
        let idle: Vec<Arc<Session>> = {
            let mut sessions = self.sessions.lock();
            let ids: Vec<String> = sessions
                .values()
                .filter(|session| session.idle_since(cutoff))
                .map(|session| session.id().to_owned())
                .collect();
            ids.iter().filter_map(|id| sessions.remove(id)).collect()
        };
        idle.iter().for_each(|s| self.end(s, SessionEnd::Evicted));
    }

    /// Ends every session (server shutdown).
    pub(crate) fn close_all(&self) {
        let all: Vec<Arc<Session>> = self.sessions.lock().drain().map(|(_, s)| s).collect();
        all.iter().for_each(|s| self.end(s, SessionEnd::Shutdown));
    }

    fn end(&self, session: &Session, reason: SessionEnd) {
        session.close();
        self.stats.record_session_end(reason);
    }
}

impl Drop for SessionStore {
    /// Calls run in tasks of their own; when the server is dropped without a shutdown (an
    /// aborted [`DemoHandle`](super::DemoHandle)), this stops them instead of leaving them to
    /// their time limit.
    fn drop(&mut self) {
        self.close_all();
    }
}

fn least_recent(sessions: &HashMap<String, Arc<Session>>) -> Option<String> {
    sessions.values().min_by_key(|session| session.last_seen()).map(|session| session.id().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demo::session::{ClientCaps, SessionLimits};

    fn session(id: &str) -> Arc<Session> {
        let limits = SessionLimits { max_outstanding: 1, max_calls: 1 };
        Arc::new(Session::new(id.into(), "2025-11-25", ClientCaps::default(), limits))
    }

    fn store(max: usize, idle: Duration) -> (SessionStore, Arc<DemoStats>) {
        let stats = Arc::new(DemoStats::default());
        (SessionStore::new(max, idle, Arc::clone(&stats)), stats)
    }

    fn insert(store: &SessionStore, stats: &DemoStats, id: &str) {
        stats.record_initialize();
        store.insert(session(id)).unwrap();
    }

    #[test]
    fn full_table_evicts_the_least_recently_used() {
        let (store, stats) = store(2, Duration::from_secs(600));
        insert(&store, &stats, "a");
        std::thread::sleep(Duration::from_millis(2));
        insert(&store, &stats, "b");
        std::thread::sleep(Duration::from_millis(2));
        assert!(store.get("a").is_some());
        insert(&store, &stats, "c");
        assert!(store.get("b").is_none());
        assert!(store.get("a").is_some() && store.get("c").is_some());
        assert_eq!((stats.sessions_alive(), stats.sessions_evicted()), (2, 1));
    }

    #[test]
    fn idle_sessions_are_evicted_and_deletes_counted() {
        let (store, stats) = store(8, Duration::from_secs(60));
        insert(&store, &stats, "a");
        insert(&store, &stats, "b");
        assert!(store.delete("b") && !store.delete("b"));
        store.evict_idle(Instant::now() + Duration::from_secs(61));
        assert!(store.get("a").is_none());
        assert_eq!(stats.deletes(), 1);
        assert_eq!(stats.sessions_evicted(), 1);
        assert_eq!(stats.sessions_alive(), 0);
        assert!(matches!(store.insert(session("x")), Ok(())));
        assert!(matches!(store.insert(session("x")), Err(StoreError::Collision)));
    }
}
