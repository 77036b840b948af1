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
        })
    }

    /// Every series to register.
    pub fn collectors(&self) -> Vec<Box<dyn Collector>> {
        vec![Box::new(self.total.clone()), Box::new(self.live.clone())]
    }

    pub(super) fn count(&self, outcome: &str) {
        self.total.with_label_values(&[outcome]).inc();
    }
}
