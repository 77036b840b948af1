//! One tool's figures on this replica: the local counts and histograms `/admin/tools` reads, and
//! the handles of the tool's Prometheus series, resolved once when the entry is made so that
//! recording a run never looks a label up.

use prometheus::{Histogram as PromHistogram, IntCounter};

use super::histogram::Histogram;
use super::ToolSeries;
use super::{RunEnd, RunRecord, Served};
use crate::defaults::{LATENCY_BUCKETS, QUESTION_BUCKETS, ROUND_BUCKETS};
use crate::schema::Sensitive;

/// The figures of one tool (or of the `(other)` entry).
#[derive(Debug)]
pub(super) struct Entry {
    pub(super) completed: u64,
    pub(super) failed: u64,
    pub(super) abandoned: u64,
    /// Runs by [`Served::index`].
    pub(super) served: [u64; Served::ALL.len()],
    /// Rounds of each completed call.
    pub(super) rounds: Histogram,
    /// Questions of each round.
    pub(super) questions: Histogram,
    pub(super) divergences: u64,
    /// Seconds from a run's start to its reply.
    pub(super) latency: Histogram,
    /// What the 2026-07-28 schema checks repaired and refused of this tool.
    pub(super) schema: super::findings::SchemaCounts,
    /// Its sensitive questions, by [`Sensitive::index`].
    pub(super) sensitive: [u64; Sensitive::ALL.len()],
    /// Its tasks of the tasks extension.
    pub(super) tasks: super::tasks::TaskCounts,
    series: Children,
}

/// The tool's own series.
#[derive(Debug)]
struct Children {
    completed: IntCounter,
    failed: IntCounter,
    abandoned: IntCounter,
    served: [IntCounter; Served::ALL.len()],
    rounds: PromHistogram,
    questions: PromHistogram,
    divergences: IntCounter,
    duration: PromHistogram,
}

// === impl Entry ===

impl Entry {
    /// A fresh entry whose series carry `label`.
    pub(super) fn new(series: &ToolSeries, label: &str) -> Self {
        let calls = |result: &str| series.calls.with_label_values(&[label, result]);
        let children = Children {
            completed: calls("completed"),
            failed: calls("failed"),
            abandoned: calls("abandoned"),
            served: Served::ALL.map(|s| series.runs.with_label_values(&[label, s.as_str()])),
            rounds: series.call_rounds.with_label_values(&[label]),
            questions: series.round_questions.with_label_values(&[label]),
            divergences: series.divergences.with_label_values(&[label]),
            duration: series.run_duration.with_label_values(&[label]),
        };
        Self {
            completed: 0,
            failed: 0,
            abandoned: 0,
            served: [0; Served::ALL.len()],
            rounds: Histogram::new(ROUND_BUCKETS),
            questions: Histogram::new(QUESTION_BUCKETS),
            divergences: 0,
            latency: Histogram::new(LATENCY_BUCKETS),
            schema: super::findings::SchemaCounts::default(),
            sensitive: [0; Sensitive::ALL.len()],
            tasks: super::tasks::TaskCounts::default(),
            series: children,
        }
    }

    pub(super) fn record(&mut self, run: &RunRecord) {
        let s = &self.series;
        if let Some(served) = run.served {
            self.served[served.index()] += 1;
            s.served[served.index()].inc();
        }
        if run.diverged {
            self.divergences += 1;
            s.divergences.inc();
        }
        if let Some(elapsed) = run.elapsed {
            self.latency.observe(elapsed.as_secs_f64());
            s.duration.observe(elapsed.as_secs_f64());
        }
        match run.end {
            RunEnd::Completed => {
                self.completed += 1;
                s.completed.inc();
                self.rounds.observe(f64::from(run.rounds));
                s.rounds.observe(f64::from(run.rounds));
            }
            RunEnd::Asked { questions } => {
                self.questions.observe(questions as f64);
                s.questions.observe(questions as f64);
            }
            RunEnd::Failed => {
                self.failed += 1;
                s.failed.inc();
            }
            RunEnd::Abandoned => {
                self.abandoned += 1;
                s.abandoned.inc();
            }
        }
    }
}
