//! When a round stops gathering questions. The first unanswered question opens a gather window
//! (`mrtr.gather_window_ms`), the upper bound. Inside it the round ends as soon as the upstream
//! has been quiet for the idle gap (`mrtr.gather_idle_ms`) after its latest question. When this
//! replica remembers that the tool asked N questions at once in this round before, the round
//! waits for N (so concurrent questions that come slowly still share it) and then ends at once:
//! the idle gap would only catch a question this tool has never asked at once, and it costs a
//! gap on every round (most of a round on loopback). A recheck round (see `memory.rs`) still
//! waits the gap after N, so a tool that now asks more is learned. A question that comes after
//! the round ended is not lost: it is asked in the next round. Pure arithmetic on instants, so
//! it is tested without any clock.

use std::time::Duration;

use tokio::time::Instant;

use super::memory::Expected;

/// The gathering of one round, from its first unanswered question on.
#[derive(Debug, Clone, Copy)]
pub(super) struct Gathering {
    window_end: Instant,
    /// When the latest question (answered from the journal or not) arrived.
    last: Instant,
    /// Questions the tool asked at once in this round last time.
    expected: Option<Expected>,
}

// === impl Gathering ===

impl Gathering {
    pub(super) fn start(now: Instant, window: Duration, expected: Option<Expected>) -> Self {
        Self { window_end: now + window, last: now, expected }
    }

    /// Another question arrived at `now`.
    pub(super) fn heard(&mut self, now: Instant) {
        self.last = now;
    }

    /// Questions waited for before the round may end.
    pub(super) fn expected(self) -> Option<usize> {
        self.expected.map(|e| e.count)
    }

    /// When the latest question arrived.
    pub(super) fn last(&self) -> Instant {
        self.last
    }

    /// When the round ends, with `open` questions gathered so far.
    pub(super) fn deadline(&self, open: usize, idle: Duration) -> Instant {
        match self.expected {
            Some(e) if open < e.count => self.window_end,
            Some(e) if !e.recheck => self.window_end.min(self.last),
            _ => self.window_end.min(self.last + idle),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOW: Duration = Duration::from_millis(50);
    const IDLE: Duration = Duration::from_millis(3);

    #[test]
    fn unknown_tools_end_on_the_idle_gap_after_the_latest_question() {
        let t0 = Instant::now();
        let mut g = Gathering::start(t0, WINDOW, None);
        assert_eq!(g.deadline(1, IDLE), t0 + IDLE);
        g.heard(t0 + Duration::from_millis(2));
        assert_eq!(g.deadline(2, IDLE), t0 + Duration::from_millis(5));
    }

    #[test]
    fn the_window_bounds_the_idle_gap() {
        let t0 = Instant::now();
        let mut g = Gathering::start(t0, WINDOW, None);
        g.heard(t0 + Duration::from_millis(49));
        assert_eq!(g.deadline(9, IDLE), t0 + WINDOW);
    }

    #[test]
    fn a_remembered_count_is_waited_for_then_the_round_ends_at_once() {
        let t0 = Instant::now();
        let mut g = Gathering::start(t0, WINDOW, Some(Expected { count: 2, recheck: false }));
        assert_eq!(g.deadline(1, IDLE), t0 + WINDOW);
        g.heard(t0 + Duration::from_millis(7));
        assert_eq!(g.deadline(2, IDLE), t0 + Duration::from_millis(7), "the count is in: no gap");
        g.heard(t0 + Duration::from_millis(60));
        assert_eq!(g.deadline(3, IDLE), t0 + WINDOW, "still bounded by the window");
    }

    #[test]
    fn the_count_waited_for_is_given_back_to_lower_the_memory() {
        let memory = super::super::memory::GatherMemory::new(8, &[], 1_000);
        memory.record("tools/call t", 0, 3, None);
        let t0 = Instant::now();
        let expected = memory.expected("tools/call t", 0);
        let g = Gathering::start(t0, WINDOW, expected);
        assert_eq!(g.expected(), Some(3));
        assert_eq!(Gathering::start(t0, WINDOW, None).expected(), None);
        // The tool asked one question in the whole window: what it waited for lowers the memory.
        memory.record("tools/call t", 0, 1, g.expected());
        assert_eq!(memory.expected("tools/call t", 0).map(|e| e.count), Some(1));
    }

    #[test]
    fn a_recheck_waits_for_the_count_then_the_idle_gap_applies() {
        let t0 = Instant::now();
        let mut g = Gathering::start(t0, WINDOW, Some(Expected { count: 3, recheck: true }));
        assert_eq!(g.deadline(1, IDLE), t0 + WINDOW);
        g.heard(t0 + Duration::from_millis(10));
        assert_eq!(g.deadline(2, IDLE), t0 + WINDOW);
        g.heard(t0 + Duration::from_millis(20));
        assert_eq!(g.deadline(3, IDLE), t0 + Duration::from_millis(23));
        assert_eq!(
            g.deadline(4, IDLE),
            t0 + Duration::from_millis(23),
            "more than remembered: still the gap"
        );
    }
}
