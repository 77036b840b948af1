//! The bridge's side of the migration report ([`crate::tool_report`]): one [`ToolRun`] per front
//! request of a tool, filled in as the run learns how it is served and whether its replay
//! diverged, and recorded once when the run replies, or as abandoned when the run is dropped
//! before that (its client went away). Prompts and resources are not reported.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering::Relaxed};

use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::time::Instant;

use super::{Bridge, MrtrRequest, Reply};
use crate::error::FrontError;
use crate::protocol::methods::MrtrMethod;
use crate::tool_report::{RunEnd, RunRecord, Served, ToolReport};

/// What one run of a tool has shown so far. Shared by reference with the run's loop, hence the
/// atomics (the run's future must stay `Send`); nothing else touches it.
pub(crate) struct ToolRun<'a> {
    report: &'a ToolReport,
    /// `None` for a run that is not a `tools/call`: nothing is recorded.
    tool: Option<&'a str>,
    bridge: &'a Bridge,
    started: Instant,
    rounds: AtomicU32,
    /// 0 until served, then 1 + the index in [`Served::ALL`].
    served: AtomicU8,
    diverged: AtomicBool,
    ended: bool,
}

// === impl ToolRun ===

impl<'a> ToolRun<'a> {
    pub(crate) fn start(bridge: &'a Bridge, req: &'a MrtrRequest) -> Self {
        Self::for_tool(bridge, (req.method == MrtrMethod::ToolsCall).then_some(req.target.as_str()))
    }

    fn for_tool(bridge: &'a Bridge, tool: Option<&'a str>) -> Self {
        Self {
            report: &bridge.metrics.tools,
            tool,
            bridge,
            started: bridge.clock.now(),
            rounds: AtomicU32::new(0),
            served: AtomicU8::new(0),
            diverged: AtomicBool::new(false),
            ended: false,
        }
    }

    /// A run the migration report does not count: a retry another replica forwarded here,
    /// which that replica counts as `forwarded`.
    pub(crate) fn unreported(bridge: &'a Bridge) -> Self {
        Self::for_tool(bridge, None)
    }

    /// The call had `rounds` rounds before this run (the round of its `requestState`).
    pub(crate) fn resumed(&self, rounds: u32) {
        self.rounds.store(rounds, Relaxed);
    }

    /// The run reached the upstream, served `how`; a later call replaces an earlier one.
    pub(crate) fn serve(&self, how: Served) {
        let index = Served::ALL.iter().position(|s| *s == how).unwrap_or(0);
        self.served.store(u8::try_from(index + 1).unwrap_or(1), Relaxed);
    }

    /// The run's replay diverged.
    pub(crate) fn diverged(&self) {
        self.diverged.store(true, Relaxed);
    }

    /// Records the run as ended with `reply`.
    pub(crate) fn end(mut self, reply: &Result<Reply, FrontError>) {
        self.ended = true;
        let Some(tool) = self.tool else { return };
        match reply {
            // Whether the result is a tool error matters only to a tool without an entry: the
            // result is read only then.
            Ok(Reply::Complete(raw)) => {
                self.report.record_checking(tool, self.record(RunEnd::Completed), || is_tool_error(raw))
            }
            Ok(Reply::InputRequired { requests, .. }) => {
                self.report.record(tool, &self.record(RunEnd::Asked { questions: requests.len() }))
            }
            Err(_) => self.report.record(tool, &self.record(RunEnd::Failed)),
        }
    }

    /// The run's figures, as it ended with `end`.
    fn record(&self, end: RunEnd) -> RunRecord {
        let served = self.served.load(Relaxed).checked_sub(1).and_then(|i| Served::ALL.get(usize::from(i)));
        let elapsed = (served.is_some() && end != RunEnd::Abandoned)
            .then(|| self.bridge.clock.now().saturating_duration_since(self.started));
        RunRecord {
            served: served.copied(),
            rounds: self.rounds.load(Relaxed),
            diverged: self.diverged.load(Relaxed),
            end,
            tool_error: false,
            elapsed,
        }
    }
}

/// Whether a `tools/call` result says `isError: true`.
fn is_tool_error(raw: &RawValue) -> bool {
    #[derive(Deserialize)]
    struct Flag {
        #[serde(rename = "isError", default)]
        is_error: bool,
    }
    serde_json::from_str::<Flag>(raw.get()).is_ok_and(|f| f.is_error)
}

impl Drop for ToolRun<'_> {
    fn drop(&mut self) {
        if let (false, Some(tool)) = (self.ended, self.tool) {
            self.report.record(tool, &self.record(RunEnd::Abandoned));
        }
    }
}
