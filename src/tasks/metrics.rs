//! The task bridge's series, registered on the gateway's registry: tasks by outcome and the
//! tasks live on this replica. Every label value is a fixed word. Each tool's tasks are also
//! counted in the migration report (`crate::tool_report`), whose handle the wiring sets, and a
//! question a task's client did not declare the capability for in the front's
//! `capability_denials_total`, whose registered series the wiring sets too.

use std::sync::Arc;

use prometheus::core::Collector;
use prometheus::{IntCounterVec, IntGauge, Opts};

use super::live::Ending;
use crate::tool_report::{TaskEvent, ToolReport};

/// Task metrics; clones share the series.
#[derive(Debug, Clone)]
pub struct TaskMetrics {
    /// Tasks by outcome: `created`, `completed`, `failed`, `cancelled`, `expired`, `lost`
    /// (upstream session died), `stopped` (this replica shut down while it ran), and refusals
    /// `full`, `principal_full`.
    pub total: IntCounterVec,
    /// Tasks held on this replica (running or finished and not yet expired).
    pub live: IntGauge,
    /// Task requests about another replica's task, by outcome: `stored` (served from the
    /// result store), `answered`, `refused` (the owner's error relayed), `gone` (the owner
    /// unreachable), `failed` (its answer unusable); and on the owner, `unauthenticated`
    /// (a forwarded request whose replica MAC did not verify).
    pub forwards: IntCounterVec,
    /// The migration report, which counts each tool's tasks; `None` until the wiring sets it.
    pub tools: Option<Arc<ToolReport>>,
    /// Questions refused for an undeclared client capability, by capability: the front's
    /// series, which the wiring sets (detached until then).
    pub capability_denials: IntCounterVec,
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
            tools: None,
            capability_denials: IntCounterVec::new(
                Opts::new(
                    "capability_denials_total",
                    "Upstream requests refused for an undeclared client capability.",
                ),
                &["capability"],
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

    /// Counts a task of `tool` the upstream created.
    pub(super) fn created(&self, tool: &str) {
        self.count("created");
        self.tool(tool, TaskEvent::Created);
    }

    /// Counts how a task of `tool` ended.
    pub(super) fn ended(&self, tool: &str, ending: Ending) {
        self.count(ending.label());
        let event = match ending {
            Ending::Completed => TaskEvent::Completed,
            Ending::Cancelled => TaskEvent::Cancelled,
            Ending::Failed | Ending::Expired | Ending::Lost | Ending::Stopped => TaskEvent::Failed,
        };
        self.tool(tool, event);
    }

    /// Counts one more event of a task of `tool` in the migration report.
    pub(super) fn tool(&self, tool: &str, event: TaskEvent) {
        if let Some(report) = &self.tools {
            report.task(tool, event);
        }
    }
}
