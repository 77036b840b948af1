//! The per-tool migration report: what this replica has seen of each tool's calls, so that an
//! operator can tell which tools to fix or to park before the legacy server is ported for real.
//! `GET /admin/tools` serves it as JSON ([`Report`]), and the `mrtr_gateway_tool_*` series carry
//! the same counts to Prometheus (see [`ToolSeries`]).
//!
//! What is counted, per tool (`tools/call` only; prompts and resources are not in it):
//! - a *run* is one front request of the tool that reached the upstream, recorded with how it
//!   was served ([`Served`]): `direct` for a run without `requestState` (a plain call's only
//!   run, or the first run of a call that asks), `replay` for a retry that ran the legacy call
//!   again from the top; `park`, `forwarded` and `fallback` name the ways a retry can reach a
//!   parked call instead;
//! - a *call* ends with the run that completes, fails or is abandoned (its client went away);
//!   the rounds of a completed call are the `input_required` rounds before it;
//! - each run that ends a round adds its questions, and each replay that diverged is counted;
//! - a tool served as a task of the tasks extension counts its tasks instead ([`tasks`]):
//!   created, completed, failed, cancelled, and their input rounds.
//!
//! Why per replica and bounded: like the gather memory, this is what one process has seen, not
//! state any call depends on. It holds at most [`defaults::TOOL_REPORT_MAX_TOOLS`] tools, each
//! with a few hundred bytes of counts; a tool gets an entry of its own only once one of its runs
//! asked a question or completed with a result that is not a tool error (so calls naming tools
//! that do not exist cannot fill it), and everything else counts in one `(other)` entry. Entries are never evicted, so a tool's figures
//! are the ones since the process started, and the Prometheus `tool` label takes the same values.

mod entry;
mod findings;
mod histogram;
mod summary;
mod tasks;
mod verdict;

use std::collections::HashMap;
use std::time::Duration;

use parking_lot::Mutex;
use prometheus::{HistogramVec, IntCounterVec};

pub use findings::SchemaSeries;
pub use histogram::IntBuckets;
pub use summary::{Calls, Counts, Latency, Report, Schema, ServedCounts, TaskSummary, ToolSummary};
pub use tasks::TaskEvent;
pub use verdict::Verdict;

use crate::defaults;
use entry::Entry;

/// The `tool_*` series of the migration report (see [`crate::tool_report`]), by tool.
#[derive(Debug, Clone)]
pub struct ToolSeries {
    /// Calls that ended, by `result` (`completed`, `failed`, `abandoned`).
    pub calls: IntCounterVec,
    /// Runs (front requests) that reached the upstream, by how they were served.
    pub runs: IntCounterVec,
    /// Rounds of each completed call.
    pub call_rounds: HistogramVec,
    /// Questions of each round.
    pub round_questions: HistogramVec,
    /// Runs whose replay diverged.
    pub divergences: IntCounterVec,
    /// Run duration, from the run's start to its reply.
    pub run_duration: HistogramVec,
    /// The 2026-07-28 schema checks' repairs, refusals and sensitive questions.
    pub schema: SchemaSeries,
    /// Tasks of the tasks extension, by tool and [`TaskEvent`].
    pub tasks: IntCounterVec,
}

/// The name of the entry that sums every tool without one of its own (no tool is named with
/// parentheses under the MCP tool-name rules).
pub const OTHER: &str = "(other)";

/// How a run got its upstream call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Served {
    /// No `requestState`: the legacy call started fresh.
    Direct,
    /// A retry that ran the legacy call again from the top, answering from the journal.
    Replay,
    /// A retry whose answers went to the call parked on this replica.
    Park,
    /// A retry relayed to the replica that holds its parked call.
    Forwarded,
    /// A retry whose parked call was gone, replayed from the journal instead.
    Fallback,
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEnd {
    /// The call completed.
    Completed,
    /// The run ended a round with this many questions; the call goes on.
    Asked { questions: usize },
    /// The call failed.
    Failed,
    /// The client went away before the run replied.
    Abandoned,
}

/// What one run contributes to its tool's figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunRecord {
    /// `None` for a run refused before it reached the upstream (say, a bad `requestState`).
    pub served: Option<Served>,
    /// Rounds the call had before this run: the round of its `requestState`, 0 without one.
    pub rounds: u32,
    /// Its replay asked a new question while recorded answers went unused.
    pub diverged: bool,
    pub end: RunEnd,
    /// A completed call whose result is a tool error (`isError: true`), which is how legacy
    /// servers answer a tool they do not have; only looked at for a tool without an entry.
    pub tool_error: bool,
    /// From the run's start to its reply; `None` when it was refused before the upstream or
    /// abandoned.
    pub elapsed: Option<Duration>,
}

/// The report of one replica, shared by every run.
#[derive(Debug)]
pub struct ToolReport {
    series: ToolSeries,
    table: Mutex<Table>,
}

#[derive(Debug, Default)]
struct Table {
    /// foldhash, seeded per process: every call looks its tool up here; the upstream's tool
    /// names are the keys, bounded by the report's size.
    tools: HashMap<Box<str>, Entry, foldhash::fast::RandomState>,
    other: Option<Entry>,
    /// The schema checks' counts of prompt and resource lists, by [`crate::schema::ListKind::index`].
    lists: [findings::SchemaCounts; crate::schema::ListKind::ALL.len()],
    logged: findings::Logged,
}

// === impl Served ===

impl Served {
    pub const ALL: [Self; 5] = [Self::Direct, Self::Replay, Self::Park, Self::Forwarded, Self::Fallback];

    /// The metric label and JSON field.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Direct => "direct",
            Self::Replay => "replay",
            Self::Park => "park",
            Self::Forwarded => "forwarded",
            Self::Fallback => "fallback",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

// === impl RunRecord ===

impl RunRecord {
    /// Whether the run showed the tool exists (it completed without a tool error, or asked),
    /// which earns it an entry.
    fn admits(&self) -> bool {
        match self.end {
            RunEnd::Completed => !self.tool_error,
            RunEnd::Asked { .. } => true,
            RunEnd::Failed | RunEnd::Abandoned => self.diverged,
        }
    }
}

// === impl ToolReport ===

impl ToolReport {
    /// An empty report over `series` (registered by [`crate::metrics::Metrics::new`]).
    pub fn new(series: ToolSeries) -> Self {
        Self { series, table: Mutex::new(Table::default()) }
    }

    /// Whether `tool` has an entry of its own.
    pub fn has_entry(&self, tool: &str) -> bool {
        self.table.lock().tools.contains_key(tool)
    }

    /// Adds one run of `tool`, asking `tool_error` (whether its result is a tool error) only
    /// when the tool has no entry yet, outside the lock: reading a result costs its length.
    pub fn record_checking(&self, tool: &str, run: RunRecord, tool_error: impl FnOnce() -> bool) {
        if let Some(entry) = self.table.lock().tools.get_mut(tool) {
            entry.record(&run);
            return;
        }
        self.record(tool, &RunRecord { tool_error: tool_error(), ..run });
    }

    /// Adds one run of `tool`.
    pub fn record(&self, tool: &str, run: &RunRecord) {
        let mut table = self.table.lock();
        if let Some(entry) = table.tools.get_mut(tool) {
            entry.record(run);
            return;
        }
        let room = table.tools.len() < defaults::TOOL_REPORT_MAX_TOOLS;
        if room && run.admits() && tool.len() <= defaults::TOOL_REPORT_MAX_NAME_BYTES {
            let mut entry = Entry::new(&self.series, tool);
            entry.record(run);
            table.tools.insert(tool.into(), entry);
        } else {
            table.other.get_or_insert_with(|| Entry::new(&self.series, OTHER)).record(run);
        }
    }

    /// The report as it stands.
    pub fn snapshot(&self) -> Report {
        let table = self.table.lock();
        let mut tools: Vec<ToolSummary> =
            table.tools.iter().map(|(name, e)| ToolSummary::of(name, e, false)).collect();
        let other = table.other.as_ref().map(|e| ToolSummary::of(OTHER, e, true));
        let lists = summary::lists(&table.lists);
        drop(table);
        tools.sort_unstable_by(|a, b| a.tool.cmp(&b.tool));
        tools.extend(other);
        Report { max_tools: defaults::TOOL_REPORT_MAX_TOOLS, tools, lists }
    }

    /// The report as JSON text.
    pub fn to_json(&self) -> Result<Vec<u8>, serde_json::Error> {
        serde_json::to_vec_pretty(&self.snapshot())
    }
}

#[cfg(test)]
mod tests;
