//! The JSON view of the report that `GET /admin/tools` serves: per tool the raw counts and the
//! figures derived from them (means, maxima, rates, percentiles) and the verdict. The book's
//! migration report (docs/src/migrating.md) documents every field.

use std::collections::BTreeMap;

use serde::Serialize;

use super::entry::Entry;
use super::findings::SchemaCounts;
use super::histogram::{Histogram, IntBuckets};
use super::tasks::TaskEvent;
use super::verdict::{Figures, Verdict};
use super::Served;
use crate::schema::{ListKind, Refusal, Repair, Sensitive};

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Tools that get an entry of their own.
    pub max_tools: usize,
    /// One entry per tool, sorted by name, then the `(other)` entry when it has counted anything.
    pub tools: Vec<ToolSummary>,
    /// The schema checks' repairs and refusals of items of prompt and resource lists, per list
    /// (`prompts`, `resources`, `resource_templates`).
    pub lists: BTreeMap<&'static str, Schema>,
}

/// What the 2026-07-28 schema checks repaired and refused: counts by reason, reasons never
/// seen left out.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Schema {
    pub repairs: BTreeMap<&'static str, u64>,
    pub refusals: BTreeMap<&'static str, u64>,
}

/// One tool's entry.
#[derive(Debug, Clone, Serialize)]
pub struct ToolSummary {
    pub tool: String,
    /// True for the `(other)` entry only.
    pub folded: bool,
    pub verdict: Verdict,
    pub advice: &'static str,
    pub calls: Calls,
    /// Runs that reached the upstream (the sum of `served`).
    pub runs: u64,
    pub served: ServedCounts,
    /// Over completed calls: `count` calls.
    pub rounds_per_call: Counts,
    /// Over rounds that ended with questions: `count` rounds.
    pub questions_per_round: Counts,
    pub divergences: u64,
    /// Divergences per replayed run (`replay` + `fallback`); null before any.
    pub divergence_rate: Option<f64>,
    pub latency_ms: Latency,
    /// Its repairs and refusals by the 2026-07-28 schema checks.
    pub schema: Schema,
    /// Its questions that asked for a secret, by reason (whatever was done with them).
    pub sensitive: BTreeMap<&'static str, u64>,
    /// Its tasks of the tasks extension.
    pub tasks: TaskSummary,
}

/// A tool's tasks: how many were created, how they ended, and their input rounds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct TaskSummary {
    pub created: u64,
    pub completed: u64,
    pub failed: u64,
    pub cancelled: u64,
    pub input_rounds: u64,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct Calls {
    pub completed: u64,
    pub failed: u64,
    pub abandoned: u64,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct ServedCounts {
    pub direct: u64,
    pub replay: u64,
    pub park: u64,
    pub forwarded: u64,
    pub fallback: u64,
}

/// A distribution of whole numbers.
#[derive(Debug, Clone, Serialize)]
pub struct Counts {
    pub count: u64,
    pub sum: u64,
    pub mean: Option<f64>,
    pub max: Option<u64>,
    pub histogram: IntBuckets,
}

/// Run latency in milliseconds (percentiles estimated from the histogram's buckets).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Latency {
    pub p50: Option<f64>,
    pub p90: Option<f64>,
    pub p99: Option<f64>,
    pub mean: Option<f64>,
    pub max: Option<f64>,
}

// === impl ToolSummary ===

impl ToolSummary {
    pub(super) fn of(tool: &str, e: &Entry, folded: bool) -> Self {
        let served = |s: Served| e.served[s.index()];
        let replayed = served(Served::Replay) + served(Served::Fallback);
        let figures = Figures {
            completed: e.completed,
            failed: e.failed,
            rounds: e.questions.count(),
            divergences: e.divergences,
            mean_rounds: e.rounds.mean(),
            tasks: e.tasks.get(TaskEvent::Created),
        };
        let verdict = if folded { Verdict::Folded } else { Verdict::of(&figures) };
        Self {
            tool: tool.to_owned(),
            folded,
            verdict,
            advice: verdict.advice(),
            calls: Calls { completed: e.completed, failed: e.failed, abandoned: e.abandoned },
            runs: e.served.iter().sum(),
            served: ServedCounts {
                direct: served(Served::Direct),
                replay: served(Served::Replay),
                park: served(Served::Park),
                forwarded: served(Served::Forwarded),
                fallback: served(Served::Fallback),
            },
            rounds_per_call: counts(&e.rounds),
            questions_per_round: counts(&e.questions),
            divergences: e.divergences,
            divergence_rate: (replayed > 0).then(|| round3(e.divergences as f64 / replayed as f64)),
            latency_ms: latency(&e.latency),
            schema: schema(&e.schema),
            sensitive: nonzero(Sensitive::ALL.iter().map(|r| (r.as_str(), e.sensitive[r.index()]))),
            tasks: TaskSummary {
                created: e.tasks.get(TaskEvent::Created),
                completed: e.tasks.get(TaskEvent::Completed),
                failed: e.tasks.get(TaskEvent::Failed),
                cancelled: e.tasks.get(TaskEvent::Cancelled),
                input_rounds: e.tasks.get(TaskEvent::InputRound),
            },
        }
    }
}

/// The `lists` object of the report.
pub(super) fn lists(counts: &[SchemaCounts; ListKind::ALL.len()]) -> BTreeMap<&'static str, Schema> {
    ListKind::ALL.iter().map(|k| (k.as_str(), schema(&counts[k.index()]))).collect()
}

fn schema(counts: &SchemaCounts) -> Schema {
    Schema {
        repairs: nonzero(Repair::ALL.iter().map(|r| (r.as_str(), counts.repairs[r.index()]))),
        refusals: nonzero(Refusal::ALL.iter().map(|r| (r.as_str(), counts.refusals[r.index()]))),
    }
}

fn nonzero(counts: impl Iterator<Item = (&'static str, u64)>) -> BTreeMap<&'static str, u64> {
    counts.filter(|(_, n)| *n > 0).collect()
}

fn counts(h: &Histogram) -> Counts {
    Counts {
        count: h.count(),
        sum: h.sum() as u64,
        mean: h.mean().map(round3),
        max: h.max().map(|m| m as u64),
        histogram: h.int_buckets(),
    }
}

fn latency(h: &Histogram) -> Latency {
    let ms = |s: Option<f64>| s.map(|s| round3(s * 1000.0));
    Latency {
        p50: ms(h.quantile(0.5)),
        p90: ms(h.quantile(0.9)),
        p99: ms(h.quantile(0.99)),
        mean: ms(h.mean()),
        max: ms(h.max()),
    }
}

/// Three decimals: microseconds for latencies, enough for means and rates.
fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}
