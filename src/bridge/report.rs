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

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::clock::{Clock, ManualClock};
    use crate::metrics::Metrics;
    use crate::mrtr::{CodecSettings, KeyRing, KeySecret, LiveRing};
    use crate::protocol::version::LegacyVersion;
    use crate::tool_report::{Report, ToolSummary, OTHER};
    use crate::upstream::{Pool, UpstreamSettings};

    /// A bridge whose report the runs below fill in; its upstream is never reached.
    fn bridge(clock: &ManualClock) -> Bridge {
        let pool = Pool::new(UpstreamSettings::new("http://127.0.0.1:9/".parse().unwrap())).unwrap();
        let ring = KeyRing::new(vec![KeySecret::new([7; 32], None).unwrap()]).unwrap();
        let metrics = Arc::new(Metrics::new().unwrap());
        let limits = crate::config::Config::from_toml("").unwrap().mrtr;
        let keys = Arc::new(LiveRing::new(ring));
        Bridge::new(
            Arc::new(pool),
            keys,
            CodecSettings::default(),
            metrics,
            limits,
            LegacyVersion::V2025_11_25,
        )
        .with_clock(Clock::Manual(clock.clone()))
    }

    fn complete(result: &str) -> Result<Reply, FrontError> {
        Ok(Reply::Complete(RawValue::from_string(result.to_owned()).unwrap()))
    }

    fn tool<'r>(report: &'r Report, name: &str) -> &'r ToolSummary {
        report
            .tools
            .iter()
            .find(|t| t.tool == name)
            .unwrap_or_else(|| panic!("no entry for {name}: {report:?}"))
    }

    #[tokio::test]
    async fn a_run_is_recorded_once_with_how_it_was_last_served_its_rounds_and_its_time() {
        let clock = ManualClock::new();
        let b = bridge(&clock);
        let run = ToolRun::for_tool(&b, Some("t"));
        run.resumed(2);
        run.serve(Served::Direct);
        run.serve(Served::Park);
        clock.advance(Duration::from_millis(40));
        run.end(&complete(r#"{"content":[]}"#));
        let report = b.metrics.tools.snapshot();
        let t = tool(&report, "t");
        assert_eq!(
            (t.calls.completed, t.calls.abandoned, t.runs),
            (1, 0, 1),
            "recorded once, not again when dropped"
        );
        assert_eq!((t.served.direct, t.served.park, t.served.replay), (0, 1, 0), "the later serve counts");
        assert_eq!((t.rounds_per_call.count, t.rounds_per_call.sum), (1, 2));
        assert_eq!((t.latency_ms.mean, t.latency_ms.max), (Some(40.0), Some(40.0)));

        let first = ToolRun::for_tool(&b, Some("u"));
        first.serve(Served::Direct);
        first.end(&complete(r#"{"content":[]}"#));
        let report = b.metrics.tools.snapshot();
        let u = tool(&report, "u");
        assert_eq!((u.served.direct, u.served.park, u.rounds_per_call.sum), (1, 0, 0));
    }

    #[tokio::test]
    async fn only_a_served_run_that_replied_is_timed() {
        let clock = ManualClock::new();
        let b = bridge(&clock);
        let refused = ToolRun::for_tool(&b, Some("t"));
        clock.advance(Duration::from_millis(5));
        refused.end(&Err(FrontError::InvalidParams("bad state".into())));
        let abandoned = ToolRun::for_tool(&b, Some("t"));
        abandoned.serve(Served::Replay);
        clock.advance(Duration::from_millis(5));
        drop(abandoned);
        let report = b.metrics.tools.snapshot();
        let other = tool(&report, OTHER);
        assert_eq!((other.calls.failed, other.calls.abandoned, other.runs), (1, 1, 1));
        assert_eq!(other.latency_ms.mean, None, "neither run is timed: {other:?}");
    }

    #[tokio::test]
    async fn a_tool_earns_an_entry_by_a_result_that_is_not_a_tool_error() {
        let clock = ManualClock::new();
        let b = bridge(&clock);
        for (name, result) in
            [("missing", r#"{"content":[],"isError":true}"#), ("real", r#"{"isError":false}"#)]
        {
            let run = ToolRun::for_tool(&b, Some(name));
            run.serve(Served::Direct);
            run.end(&complete(result));
        }
        let report = b.metrics.tools.snapshot();
        assert!(b.metrics.tools.has_entry("real") && !b.metrics.tools.has_entry("missing"), "{report:?}");
        assert_eq!(tool(&report, OTHER).calls.completed, 1, "the tool error is counted without an entry");
        assert!(!is_tool_error(&RawValue::from_string("{}".to_owned()).unwrap()));
    }

    #[tokio::test]
    async fn an_unreported_run_records_nothing_and_a_dropped_one_is_abandoned() {
        let clock = ManualClock::new();
        let b = bridge(&clock);
        ToolRun::unreported(&b).end(&complete("{}"));
        drop(ToolRun::unreported(&b));
        assert!(b.metrics.tools.snapshot().tools.is_empty());
        let run = ToolRun::for_tool(&b, Some("t"));
        run.serve(Served::Direct);
        drop(run);
        let report = b.metrics.tools.snapshot();
        assert_eq!(tool(&report, OTHER).calls.abandoned, 1);
    }
}
