//! The tasks this replica holds, by the random handle sealed in their ids. Running tasks (each
//! pins an upstream session) are bounded in all and per principal; a finished task is kept
//! until it expires, for `tasks/get` to serve its result, and finished tasks are bounded too:
//! past `max_tasks` of them the one closest to expiry is dropped. Expired entries are swept on
//! every insert and lookup.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::time::Instant;

use super::live::LiveTask;
use super::TaskError;

/// The bounded table.
#[derive(Debug)]
pub(super) struct Table {
    max_tasks: usize,
    max_per_principal: usize,
    entries: Mutex<HashMap<String, Arc<LiveTask>>>,
}

// === impl Table ===

impl Table {
    pub(super) fn new(max_tasks: usize, max_per_principal: usize) -> Self {
        Self { max_tasks, max_per_principal, entries: Mutex::new(HashMap::new()) }
    }

    /// Checks there is room for one more task of `principal` (before the upstream is asked).
    pub(super) fn check_room(&self, principal: &str, now: Instant) -> Result<(), TaskError> {
        let mut entries = self.entries.lock();
        entries.retain(|_, t| t.expires > now);
        room(&entries, principal, (self.max_tasks, self.max_per_principal))
    }

    /// Inserts a task under `handle`, within the bounds; returns the tasks held.
    pub(super) fn insert(
        &self,
        handle: String,
        task: Arc<LiveTask>,
        now: Instant,
    ) -> Result<usize, TaskError> {
        let mut entries = self.entries.lock();
        entries.retain(|_, t| t.expires > now);
        room(&entries, &task.principal, (self.max_tasks, self.max_per_principal))?;
        entries.insert(handle, task);
        drop_finished_over(&mut entries, self.max_tasks);
        Ok(entries.len())
    }

    /// The unexpired task under `handle`.
    pub(super) fn get(&self, handle: &str, now: Instant) -> Option<Arc<LiveTask>> {
        self.entries.lock().get(handle).filter(|t| t.expires > now).cloned()
    }

    /// The tasks still running.
    pub(super) fn running(&self) -> Vec<Arc<LiveTask>> {
        self.entries.lock().values().filter(|t| t.is_running()).cloned().collect()
    }

    /// Drops the expired entries; returns the tasks held.
    pub(super) fn sweep(&self, now: Instant) -> usize {
        let mut entries = self.entries.lock();
        entries.retain(|_, t| t.expires > now);
        entries.len()
    }
}

/// Drops the finished tasks closest to expiry while more than `bound` are held.
fn drop_finished_over(entries: &mut HashMap<String, Arc<LiveTask>>, bound: usize) {
    let mut finished: Vec<(Instant, String)> =
        entries.iter().filter(|(_, t)| !t.is_running()).map(|(h, t)| (t.expires, h.clone())).collect();
    if finished.len() <= bound {
        return;
    }
    finished.sort_unstable();
    for (_, handle) in finished.iter().take(finished.len() - bound) {
        entries.remove(handle);
    }
}

/// Room for one more running task of `principal`.
fn room(
    entries: &HashMap<String, Arc<LiveTask>>,
    principal: &str,
    (max_tasks, max_per_principal): (usize, usize),
) -> Result<(), TaskError> {
    let running = || entries.values().filter(|t| t.is_running());
    if running().count() >= max_tasks {
        return Err(TaskError::Full { limit: max_tasks });
    }
    let mine = running().filter(|t| &*t.principal == principal).count();
    if mine >= max_per_principal {
        return Err(TaskError::PrincipalFull { limit: max_per_principal });
    }
    Ok(())
}
