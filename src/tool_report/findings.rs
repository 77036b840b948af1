//! The report's counts of what the 2026-07-28 schema checks did ([`crate::schema`]): repairs and
//! refusals per tool and reason, sensitive questions per tool and reason, and the repairs and
//! refusals of prompt and resource lists, which are counted per list (their items have no
//! entry of their own, so the report stays bounded by its tools). Each is counted in the
//! report, on its series, and logged the first time a (tool, reason) pair is seen.
//!
//! A finding gives a tool an entry of its own, within the report's bounds: it comes from the
//! upstream's own listing, call or question, so it names a tool that exists. A finding without
//! a tool name (a listed tool with none) counts under `(other)`.

use std::collections::HashSet;

use prometheus::IntCounterVec;

use super::{Table, ToolReport, OTHER};
use crate::defaults;
use crate::schema::{Finding, ListKind, Refusal, Repair, Sensitive, SensitiveAction};

/// The counts of one tool, or one list.
#[derive(Debug, Clone, Default)]
pub(super) struct SchemaCounts {
    pub(super) repairs: [u64; Repair::ALL.len()],
    pub(super) refusals: [u64; Refusal::ALL.len()],
}

/// The series of the schema checks, registered beside the report's (see [`super::ToolSeries`]).
#[derive(Debug, Clone)]
pub struct SchemaSeries {
    /// `schema_repairs_total{tool,reason}`.
    pub repairs: IntCounterVec,
    /// `schema_refusals_total{tool,reason}`.
    pub refusals: IntCounterVec,
    /// `sensitive_questions_total{tool,reason,action}`.
    pub sensitive: IntCounterVec,
}

/// (tool, reason) pairs already logged, at most [`defaults::TOOL_REPORT_MAX_LOGGED`].
#[derive(Debug, Default)]
pub(super) struct Logged(HashSet<(Box<str>, &'static str)>);

// === impl SchemaCounts ===

impl SchemaCounts {
    fn add(&mut self, finding: Finding) {
        match finding {
            Finding::Repair(r) => self.repairs[r.index()] += 1,
            Finding::Refusal(r) => self.refusals[r.index()] += 1,
        }
    }
}

// === impl Logged ===

impl Logged {
    /// True the first time `(tool, reason)` is seen, while there is room to remember it.
    pub(super) fn first(&mut self, tool: &str, reason: &'static str) -> bool {
        if self.0.len() >= defaults::TOOL_REPORT_MAX_LOGGED {
            return false;
        }
        self.0.insert((tool.into(), reason))
    }
}

#[cfg(test)]
impl Logged {
    /// Whether `(tool, reason)` would still be logged.
    pub(super) fn first_unseen(&self, tool: &str, reason: &'static str) -> bool {
        !self.0.contains(&(Box::from(tool), reason))
    }
}

// === impl ToolReport ===

impl ToolReport {
    /// Counts one repair or refusal of `tool` (`None`: a listed tool without a usable name);
    /// `detail` (what was wrong, possibly in the upstream's words) goes to the first log line.
    pub fn schema(&self, tool: Option<&str>, finding: Finding, detail: &str) {
        let (label, first) = {
            let mut table = self.table.lock();
            let label = table.admit(&self.series, tool);
            if let Some(entry) = table.entry_mut(&label) {
                entry.schema.add(finding);
            }
            let first = table.logged.first(tool.unwrap_or(OTHER), finding.as_str());
            (label, first)
        };
        let series = match finding {
            Finding::Repair(_) => &self.series.schema.repairs,
            Finding::Refusal(_) => &self.series.schema.refusals,
        };
        series.with_label_values(&[&label, finding.as_str()]).inc();
        if first {
            log_finding(tool.unwrap_or(OTHER), finding, detail);
        }
    }

    /// Counts one repair or refusal of an item of a prompt or resource list.
    pub fn list(&self, kind: ListKind, finding: Finding, detail: &str) {
        let first = {
            let mut table = self.table.lock();
            table.lists[kind.index()].add(finding);
            table.logged.first(kind.label(), finding.as_str())
        };
        let series = match finding {
            Finding::Repair(_) => &self.series.schema.repairs,
            Finding::Refusal(_) => &self.series.schema.refusals,
        };
        series.with_label_values(&[kind.label(), finding.as_str()]).inc();
        if first {
            log_finding(kind.label(), finding, detail);
        }
    }

    /// Counts one sensitive question of `tool`, asking for `field` (a property, or `url`).
    pub fn sensitive(&self, tool: &str, reason: Sensitive, action: SensitiveAction, field: &str) {
        let (label, first) = {
            let mut table = self.table.lock();
            let label = table.admit(&self.series, Some(tool));
            if let Some(entry) = table.entry_mut(&label) {
                entry.sensitive[reason.index()] += 1;
            }
            (label, table.logged.first(tool, reason.as_str()))
        };
        let labels = [label.as_str(), reason.as_str(), action.as_str()];
        self.series.schema.sensitive.with_label_values(&labels).inc();
        if first {
            tracing::warn!(
                tool,
                reason = reason.as_str(),
                action = action.as_str(),
                field,
                "a question asks for a secret: the MCP spec says servers must not ask for it through an elicitation form (or a non-https URL)"
            );
        }
    }
}

fn log_finding(tool: &str, finding: Finding, detail: &str) {
    match finding {
        Finding::Repair(r) => {
            tracing::info!(
                tool,
                reason = r.as_str(),
                detail,
                "repaired what a legacy server sent, for 2026-07-28 clients"
            )
        }
        Finding::Refusal(r) => tracing::warn!(
            tool,
            reason = r.as_str(),
            detail,
            "refused what a legacy server sent: it is not valid 2026-07-28 and cannot be repaired"
        ),
    }
}

// === impl Table ===

impl Table {
    /// The label of `tool`'s entry, made now if it has none and the report has room.
    pub(super) fn admit(&mut self, series: &super::ToolSeries, tool: Option<&str>) -> String {
        let Some(tool) = tool else {
            self.other.get_or_insert_with(|| super::Entry::new(series, OTHER));
            return OTHER.to_owned();
        };
        if self.tools.contains_key(tool) {
            return tool.to_owned();
        }
        let room = self.tools.len() < defaults::TOOL_REPORT_MAX_TOOLS;
        if room && tool.len() <= defaults::TOOL_REPORT_MAX_NAME_BYTES {
            self.tools.insert(tool.into(), super::Entry::new(series, tool));
            return tool.to_owned();
        }
        self.other.get_or_insert_with(|| super::Entry::new(series, OTHER));
        OTHER.to_owned()
    }

    pub(super) fn entry_mut(&mut self, label: &str) -> Option<&mut super::Entry> {
        match label {
            OTHER => self.other.as_mut(),
            tool => self.tools.get_mut(tool),
        }
    }
}
