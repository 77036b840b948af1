//! The task bridge's series, registered on the gateway's registry: tasks by outcome and the
//! tasks live on this replica. Every label value is a fixed word.

use prometheus::core::Collector;
use prometheus::{IntCounterVec, IntGauge, Opts};

/// Task metrics; clones share the series.
#[derive(Debug, Clone)]
pub struct TaskMetrics {
    /// Tasks by outcome: `created`, `completed`, `failed`, `cancelled`, `expired`, `lost`
    /// (upstream session died), and refusals `full`, `principal_full`.
    pub total: IntCounterVec,
    /// Tasks held on this replica (running or finished and not yet expired).
    pub live: IntGauge,
    /// Task requests about another replica's task, by outcome: `stored` (served from the
    /// result store), `answered`, `refused` (the owner's error relayed), `gone` (the owner
    /// unreachable), `failed` (its answer unusable); and on the owner, `unauthenticated`
    /// (a forwarded request whose replica MAC did not verify).
    pub forwards: IntCounterVec,
}

// === impl TaskMetrics ===

impl TaskMetrics {
    /// The series, registered nowhere yet.
    pub fn detached() -> Result<Self, prometheus::Error> {
        Ok(Self {
            total: IntCounterVec::new(
                Opts::new("tasks_total", "Legacy tasks served as 2026-07-28 tasks, by outcome."),
                &["outcome"],
            )?,
            live: IntGauge::new("tasks_live", "Tasks held on this replica, running or finished.")?,
            forwards: IntCounterVec::new(
                Opts::new("task_forwards_total", "Task requests about another replica's task, by outcome."),
                &["outcome"],
            )?,
        })
    }

    /// Every series to register.
    pub fn collectors(&self) -> Vec<Box<dyn Collector>> {
        vec![Box::new(self.total.clone()), Box::new(self.live.clone()), Box::new(self.forwards.clone())]
    }

    pub(super) fn count(&self, outcome: &str) {
        self.total.with_label_values(&[outcome]).inc();
    }

    /// Counts a task request about another replica's task (or one forwarded here) by outcome.
    pub fn forward(&self, outcome: &'static str) {
        self.forwards.with_label_values(&[outcome]).inc();
    }
}
