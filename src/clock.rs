//! The gateway's clock: what a round's deadlines (gather window, idle gap, silence and total
//! bounds), the sealed state's times, idle legacy sessions and parked calls are read from.
//!
//! Why a seam of its own: a round ends when time passes, so a test of gathering that runs on the
//! wall clock passes or fails with the machine's load. The sealed core already takes time as an
//! argument; the bridge takes a [`Clock`] the same way. [`Clock::System`] is tokio's clock and
//! the system time; [`Clock::Manual`] moves only when its owner calls [`ManualClock::advance`],
//! so a test decides exactly when a round's deadline passes. (tokio's paused time does not serve
//! here: it jumps to the next timer whenever every task waits, which with real loopback sockets
//! is between any two packets.)

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::watch;
use tokio::time::Instant;

/// Where the bridge reads the time.
#[derive(Debug, Clone, Default)]
pub enum Clock {
    /// tokio's clock for deadlines, the system time for the sealed state.
    #[default]
    System,
    /// Time that moves only when told to.
    Manual(ManualClock),
}

/// A clock that stands still until [`ManualClock::advance`] moves it.
#[derive(Debug, Clone)]
pub struct ManualClock {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    start: Instant,
    unix_start: Duration,
    /// How far the clock has been moved; sleepers wait for it to change.
    offset: watch::Sender<Duration>,
}

// === impl Clock ===

impl Clock {
    /// The monotonic time deadlines are measured in.
    pub fn now(&self) -> Instant {
        match self {
            Self::System => Instant::now(),
            Self::Manual(m) => m.now(),
        }
    }

    /// Seconds since the Unix epoch, as the sealed core takes them.
    pub fn unix_now(&self) -> u64 {
        match self {
            Self::System => system_unix().as_secs(),
            Self::Manual(m) => (m.inner.unix_start + m.elapsed()).as_secs(),
        }
    }

    /// Waits until `deadline` has passed on this clock.
    pub async fn sleep_until(&self, deadline: Instant) {
        match self {
            Self::System => tokio::time::sleep_until(deadline).await,
            Self::Manual(m) => m.sleep_until(deadline).await,
        }
    }
}

// === impl ManualClock ===

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl ManualClock {
    /// A clock standing at the current time.
    pub fn new() -> Self {
        let (offset, _) = watch::channel(Duration::ZERO);
        Self { inner: Arc::new(Inner { start: Instant::now(), unix_start: system_unix(), offset }) }
    }

    /// Moves the clock forward by `by`, waking every sleeper whose deadline it passes.
    pub fn advance(&self, by: Duration) {
        self.inner.offset.send_modify(|offset| *offset += by);
    }

    fn elapsed(&self) -> Duration {
        *self.inner.offset.borrow()
    }

    fn now(&self) -> Instant {
        self.inner.start + self.elapsed()
    }

    async fn sleep_until(&self, deadline: Instant) {
        let mut moved = self.inner.offset.subscribe();
        while self.now() < deadline {
            // The sender lives as long as `self`, so `changed` cannot fail while we wait.
            if moved.changed().await.is_err() {
                return;
            }
        }
    }
}

fn system_unix() -> Duration {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default()
}

/// Test support: waits until `done` holds, looking every 10 ms; panics naming `what` once
/// `bound` has passed in looks.
#[cfg(test)]
pub(crate) async fn eventually(what: &str, bound: Duration, mut done: impl FnMut() -> bool) {
    const LOOK: Duration = Duration::from_millis(10);
    for _ in 0..=bound.as_millis() / LOOK.as_millis() {
        if done() {
            return;
        }
        tokio::time::sleep(LOOK).await;
    }
    panic!("gave up waiting for {what} (within {bound:?})");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn manual_sleepers_wake_only_when_advanced_past_their_deadline() {
        let manual = ManualClock::new();
        let clock = Clock::Manual(manual.clone());
        let deadline = clock.now() + Duration::from_millis(10);
        let sleeper = tokio::spawn({
            let clock = clock.clone();
            async move { clock.sleep_until(deadline).await }
        });
        manual.advance(Duration::from_millis(9));
        tokio::task::yield_now().await;
        assert!(!sleeper.is_finished(), "woke before its deadline");
        let unix = clock.unix_now();
        manual.advance(Duration::from_secs(5));
        sleeper.await.expect("sleeper");
        assert!(clock.now() >= deadline);
        assert_eq!(clock.unix_now(), unix + 5);
    }
}
