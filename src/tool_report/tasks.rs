//! The report's counts of the tasks each tool ran as: the task bridge ([`crate::tasks`]) serves a
//! legacy task tool to 2026-07-28 clients as a task of the tasks extension, outside the rounds and
//! runs the rest of the report counts (nothing of a task is replayed), so its tasks have counts of
//! their own: created, and how each ended (`completed`, `failed`, `cancelled`), and its input
//! rounds (each time a task went from working to waiting on questions). A task that expired or
//! lost its upstream ended `failed`, as its client sees it.
//!
//! A created task gives its tool an entry of its own, within the report's bounds: the legacy
//! server made it, so the tool exists.

use super::ToolReport;

/// Something that happened to one task of a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskEvent {
    /// The upstream created it.
    Created,
    /// It ended with the tool's result (a tool error included).
    Completed,
    /// It ended with an error: the upstream's, an expiry, or its upstream lost.
    Failed,
    /// Its client cancelled it, or the upstream did.
    Cancelled,
    /// It went from working to waiting on questions.
    InputRound,
}

/// A tool's task counts, by [`TaskEvent::index`].
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct TaskCounts(pub(super) [u64; TaskEvent::ALL.len()]);

// === impl TaskEvent ===

impl TaskEvent {
    pub const ALL: [Self; 5] =
        [Self::Created, Self::Completed, Self::Failed, Self::Cancelled, Self::InputRound];

    /// The metric label and JSON field.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
            Self::InputRound => "input_rounds",
        }
    }

    pub(super) fn index(self) -> usize {
        self as usize
    }
}

// === impl TaskCounts ===

impl TaskCounts {
    pub(super) fn get(&self, event: TaskEvent) -> u64 {
        self.0[event.index()]
    }
}

// === impl ToolReport ===

impl ToolReport {
    /// Counts one event of a task of `tool`.
    pub fn task(&self, tool: &str, event: TaskEvent) {
        let label = {
            let mut table = self.table.lock();
            let label = table.admit(&self.series, Some(tool));
            if let Some(entry) = table.entry_mut(&label) {
                entry.tasks.0[event.index()] += 1;
            }
            label
        };
        self.series.tasks.with_label_values(&[&label, event.as_str()]).inc();
    }
}
