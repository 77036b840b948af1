//! The park registry: upstream calls whose round ended without cancelling them (park mode),
//! each waiting on this replica, with its lease (session or process, whatever the transport)
//! and its open server requests, for the retry that answers them.
//!
//! Bounded three times: at most `mrtr.max_parked` calls at once (a round beyond that is
//! replayed, and counted `full`), at most `mrtr.max_parked_per_principal` of one principal (a
//! round beyond that is replayed too, counted `share` and in `share_refusals_total`, so that one
//! client cannot take every place and pin as many upstream sessions), and each for at most
//! `mrtr.park_timeout_ms`, after which a timer cancels it
//! upstream, refuses its open requests and releases its lease (counted `timed_out`). A call is
//! taken out at most once. The registry also remembers, boundedly, which call ids it handed to
//! a retry, so that a second retry of an already-answered state is refused instead of replaying
//! side effects (see [`Found::Answered`] and docs/src/park-mode.md).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::Value;
use tokio::task::AbortHandle;

use super::guard::CallGuard;
use super::Clock;
use crate::config::ParkConfig;
use crate::metrics::Metrics;
use crate::mrtr::journal::Pending;
use crate::mrtr::{CallId, Replay};
use crate::protocol::RequestId;

/// The reason sent upstream with `notifications/cancelled` when a parked call times out.
pub(super) const PARK_EXPIRED: &str =
    "mrtr-gateway parked this call for its retry, which did not come in time";

/// What became of a round or a retry that park mode concerns; each is one metric label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParkOutcome {
    /// A round ended with its call parked here.
    Parked,
    /// A retry found its call parked here and continued it.
    Resumed,
    /// A parked call waited past the park timeout and was cancelled upstream.
    TimedOut,
    /// The registry was full: the round was replayed instead.
    Full,
    /// The call's principal held its share of the registry: the round was replayed instead.
    Share,
    /// A parked state's call could not be reached (expired, owner gone): replayed from the journal.
    Fallback,
    /// A retry was forwarded to the replica holding its call, which answered it.
    Forwarded,
    /// A second retry of a state whose parked call was already answered: refused.
    Refused,
    /// A forwarded retry arrived with a bad, missing or stale MAC: refused.
    Unauthenticated,
}

/// A question a parked call is waiting on.
#[derive(Debug)]
pub(super) struct OpenQuestion {
    pub id: RequestId,
    pub pending: Pending,
    pub method: String,
    pub params: Option<Value>,
}

/// A call parked between two rounds.
pub(super) struct Parked {
    pub guard: CallGuard,
    pub replay: Replay,
    pub open: Vec<OpenQuestion>,
    /// The session learned the client's roots (see [`super::round::Run::tainted`]).
    pub tainted: bool,
}

/// What a retry finds under its call id.
pub(super) enum Found {
    Parked(Box<Parked>),
    /// Taken by an earlier retry: answering it again would need a replay, which repeats what
    /// park mode exists not to repeat.
    Answered,
    /// Never parked here, or expired: replay from the journal.
    Unknown,
}

/// The calls parked on this replica.
pub struct ParkRegistry {
    entries: Mutex<Entries>,
    answered: Mutex<Remembered>,
    max: usize,
    /// Most calls of one principal.
    per_principal: usize,
    timeout: Duration,
    clock: Clock,
    metrics: Arc<Metrics>,
}

/// The parked calls, and how many each principal has (no entry at zero).
#[derive(Default)]
struct Entries {
    calls: HashMap<CallId, Entry>,
    held: HashMap<Arc<str>, usize>,
}

struct Entry {
    parked: Box<Parked>,
    timer: Option<AbortHandle>,
}

/// Call ids handed to a retry, oldest first, bounded.
#[derive(Default)]
struct Remembered {
    order: VecDeque<CallId>,
    ids: HashSet<CallId>,
}

// === impl ParkOutcome ===

impl ParkOutcome {
    pub fn label(self) -> &'static str {
        match self {
            Self::Parked => "parked",
            Self::Resumed => "resumed",
            Self::TimedOut => "timed_out",
            Self::Full => "full",
            Self::Share => "share",
            Self::Fallback => "fallback",
            Self::Forwarded => "forwarded",
            Self::Refused => "refused",
            Self::Unauthenticated => "unauthenticated",
        }
    }
}

// === impl ParkRegistry ===

impl ParkRegistry {
    pub(super) fn new(cfg: &ParkConfig, clock: Clock, metrics: Arc<Metrics>) -> Self {
        Self {
            entries: Mutex::new(Entries::default()),
            answered: Mutex::new(Remembered::default()),
            max: cfg.max_parked,
            per_principal: cfg.max_parked_per_principal,
            timeout: cfg.timeout,
            clock,
            metrics,
        }
    }

    pub(super) fn count(&self, outcome: ParkOutcome) {
        self.metrics.park_outcomes.with_label_values(&[outcome.label()]).inc();
    }

    /// Parks `parked` under `id` and starts its timer; gives it back, with the outcome to
    /// count, when the registry is full or the call's principal holds its share.
    pub(super) fn park(
        self: &Arc<Self>,
        id: CallId,
        mut parked: Box<Parked>,
    ) -> Result<(), (Box<Parked>, ParkOutcome)> {
        let mut entries = self.entries.lock();
        if entries.calls.len() >= self.max {
            return Err((parked, ParkOutcome::Full));
        }
        let principal = parked.guard.principal().clone();
        if entries.held.get(&principal).is_some_and(|&n| n >= self.per_principal) {
            return Err((parked, ParkOutcome::Share));
        }
        // Nobody polls a parked call until its retry comes: its stream is read meanwhile.
        parked.guard.detach();
        let timer = tokio::runtime::Handle::try_current().ok().map(|rt| {
            let (registry, deadline) = (Arc::downgrade(self), self.clock.now() + self.timeout);
            let clock = self.clock.clone();
            rt.spawn(async move {
                clock.sleep_until(deadline).await;
                expire(registry, id).await;
            })
            .abort_handle()
        });
        entries.calls.insert(id, Entry { parked, timer });
        *entries.held.entry(principal).or_default() += 1;
        self.metrics.parked_calls.set(gauge(entries.calls.len()));
        Ok(())
    }

    /// Counts a round that was not parked (`full` or `share`) and says why in the log.
    pub(super) fn count_unparked(&self, outcome: ParkOutcome) {
        if outcome == ParkOutcome::Share {
            tracing::info!(max = self.per_principal, "principal holds its share of parked calls: replayed");
            self.metrics.share_refusals.with_label_values(&[crate::limits::share::PARKED_CALLS]).inc();
        } else {
            tracing::info!(max = self.max, "park registry full: this round is replayed");
        }
        self.count(outcome);
    }

    /// Takes the call parked under `id` out (at most once), stopping its timer.
    pub(super) fn take(&self, id: CallId) -> Found {
        let entry = {
            let mut entries = self.entries.lock();
            let entry = entries.remove(id);
            self.metrics.parked_calls.set(gauge(entries.calls.len()));
            entry
        };
        match entry {
            Some(entry) => {
                if let Some(timer) = entry.timer {
                    timer.abort();
                }
                Found::Parked(entry.parked)
            }
            None if self.answered.lock().ids.contains(&id) => Found::Answered,
            None => Found::Unknown,
        }
    }

    /// Remembers that a retry answered call `id`: a later retry of the same state is refused.
    pub(super) fn answered(&self, id: CallId) {
        let mut memory = self.answered.lock();
        if memory.ids.insert(id) {
            memory.order.push_back(id);
        }
        while memory.order.len() > crate::defaults::PARK_MEMORY {
            if let Some(old) = memory.order.pop_front() {
                memory.ids.remove(&old);
            }
        }
    }

    /// Cancels every parked call upstream and releases its lease (at shutdown).
    pub async fn cancel_all(&self) {
        let entries: Vec<Entry> = {
            let mut entries = self.entries.lock();
            entries.held.clear();
            entries.calls.drain().map(|(_, e)| e).collect()
        };
        self.metrics.parked_calls.set(0);
        for entry in entries {
            if let Some(timer) = entry.timer {
                timer.abort();
            }
            cancel(*entry.parked, "mrtr-gateway is shutting down").await;
        }
    }
}

// === impl Entries ===

impl Entries {
    /// Takes call `id` out, giving its principal's place back.
    fn remove(&mut self, id: CallId) -> Option<Entry> {
        let entry = self.calls.remove(&id)?;
        let principal = entry.parked.guard.principal();
        if let Some(n) = self.held.get_mut(principal) {
            *n -= 1;
            if *n == 0 {
                self.held.remove(principal);
            }
        }
        Some(entry)
    }
}

/// The timer of call `id` fired: if it is still parked, cancel it.
async fn expire(registry: Weak<ParkRegistry>, id: CallId) {
    let Some(registry) = registry.upgrade() else { return };
    let entry = {
        let mut entries = registry.entries.lock();
        let entry = entries.remove(id);
        registry.metrics.parked_calls.set(gauge(entries.calls.len()));
        entry
    };
    if let Some(entry) = entry {
        tracing::info!(call = %id, timeout = ?registry.timeout, "parked call timed out: cancelled upstream");
        registry.count(ParkOutcome::TimedOut);
        cancel(*entry.parked, PARK_EXPIRED).await;
    }
}

/// Cancels a parked call upstream, refuses its open requests, and releases its lease (evicted
/// if it learned the client's roots).
pub(super) async fn cancel(parked: Parked, reason: &str) {
    let Parked { guard, open, tainted, .. } = parked;
    let ids: Vec<RequestId> = open.into_iter().map(|q| q.id).collect();
    guard.end(&ids, reason, tainted).await;
}

fn gauge(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::super::guard::tests::{asking_for, until, upstream};
    use super::*;
    use crate::clock::ManualClock;
    use crate::mrtr::journal::Journal;
    use crate::upstream::Pool;

    fn registry() -> ParkRegistry {
        let metrics = Arc::new(Metrics::new().expect("metrics"));
        ParkRegistry::new(&ParkConfig::default(), Clock::System, metrics)
    }

    fn id(n: usize) -> CallId {
        let mut id = CallId([0; crate::mrtr::park::CALL_ID_LEN]);
        id.0[..8].copy_from_slice(&(n as u64).to_le_bytes());
        id
    }

    #[test]
    fn answered_ids_are_remembered_up_to_the_bound_oldest_forgotten_first() {
        let r = registry();
        for n in 0..crate::defaults::PARK_MEMORY {
            r.answered(id(n));
        }
        // Answered again: still one place, not two.
        r.answered(id(0));
        assert!(matches!(r.take(id(0)), Found::Answered));
        assert!(matches!(r.take(id(crate::defaults::PARK_MEMORY - 1)), Found::Answered));
        r.answered(id(crate::defaults::PARK_MEMORY));
        assert!(matches!(r.take(id(0)), Found::Unknown), "the oldest goes when one more comes");
        assert!(matches!(r.take(id(1)), Found::Answered));
        assert!(matches!(r.take(id(crate::defaults::PARK_MEMORY)), Found::Answered));
        assert!(matches!(r.take(id(usize::MAX)), Found::Unknown));
    }

    #[test]
    fn each_outcome_is_counted_under_its_own_label() {
        let r = registry();
        let outcomes = [
            ParkOutcome::Parked,
            ParkOutcome::Resumed,
            ParkOutcome::TimedOut,
            ParkOutcome::Full,
            ParkOutcome::Share,
            ParkOutcome::Fallback,
            ParkOutcome::Forwarded,
            ParkOutcome::Refused,
            ParkOutcome::Unauthenticated,
        ];
        for (n, outcome) in outcomes.iter().enumerate() {
            for _ in 0..=n {
                r.count(*outcome);
            }
        }
        for (n, outcome) in outcomes.iter().enumerate() {
            let counted = r.metrics.park_outcomes.with_label_values(&[outcome.label()]).get();
            assert_eq!(counted, (n + 1) as u64, "{}", outcome.label());
        }
        r.count_unparked(ParkOutcome::Share);
        assert_eq!(r.metrics.park_outcomes.with_label_values(&["share"]).get(), 6);
        let share = r.metrics.share_refusals.with_label_values(&[crate::limits::share::PARKED_CALLS]).get();
        assert_eq!(share, 1, "a share refusal is counted as one too");
    }

    /// A registry of at most `max` calls, `share` of one principal, timing out after a minute.
    fn bounded(max: usize, share: usize, clock: Clock) -> Arc<ParkRegistry> {
        let metrics = Arc::new(Metrics::new().expect("metrics"));
        let cfg = ParkConfig {
            max_parked: max,
            max_parked_per_principal: share,
            timeout: Duration::from_secs(60),
            ..ParkConfig::default()
        };
        Arc::new(ParkRegistry::new(&cfg, clock, metrics))
    }

    /// A call of principal `p` on the demo, waiting on its question as a parked call does.
    async fn call_of(pool: &Pool, p: &str) -> Box<Parked> {
        let (guard, _asked) = asking_for(pool, p).await;
        Box::new(Parked {
            guard,
            replay: Replay::new(Journal::default(), 8),
            open: Vec::new(),
            tainted: false,
        })
    }

    fn refused(parked: Result<(), (Box<Parked>, ParkOutcome)>) -> ParkOutcome {
        match parked {
            Ok(()) => panic!("parked past a bound"),
            Err((_, outcome)) => outcome,
        }
    }

    #[tokio::test]
    async fn the_registry_keeps_its_bound_and_each_principals_share() {
        let (_demo, pool) = upstream();
        let r = bounded(3, 2, Clock::System);
        r.park(id(1), call_of(&pool, "a").await).ok().expect("room for a's first call");
        r.park(id(2), call_of(&pool, "a").await).ok().expect("room for a's second call");
        assert_eq!(refused(r.park(id(3), call_of(&pool, "a").await)), ParkOutcome::Share);
        // A call taken gives its principal one place back, and only one.
        assert!(matches!(r.take(id(1)), Found::Parked(_)));
        r.park(id(3), call_of(&pool, "a").await).ok().expect("a's place back");
        assert_eq!(refused(r.park(id(4), call_of(&pool, "a").await)), ParkOutcome::Share);
        r.park(id(5), call_of(&pool, "b").await).ok().expect("b has a share of its own");
        assert_eq!(refused(r.park(id(6), call_of(&pool, "c").await)), ParkOutcome::Full);
        assert_eq!(r.metrics.parked_calls.get(), 3);
        // Every call out, every share is whole again.
        for n in [2, 3, 5] {
            assert!(matches!(r.take(id(n)), Found::Parked(_)), "call {n}");
        }
        assert!(matches!(r.take(id(2)), Found::Unknown), "taken once");
        r.park(id(7), call_of(&pool, "a").await).ok().expect("a holds nothing");
        r.park(id(8), call_of(&pool, "a").await).ok().expect("a holds one");
    }

    #[tokio::test]
    async fn a_parked_call_waits_its_timeout_then_is_cancelled_upstream() {
        let (demo, pool) = upstream();
        let manual = ManualClock::new();
        let r = bounded(4, 4, Clock::Manual(manual.clone()));
        r.park(id(1), call_of(&pool, "a").await).ok().expect("parked");
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(matches!(r.take(id(1)), Found::Parked(_)), "not expired before its timeout");

        r.park(id(2), call_of(&pool, "a").await).ok().expect("parked");
        manual.advance(Duration::from_secs(61));
        until("the expired call is cancelled upstream", || demo.stats.cancellations() == 2).await;
        assert_eq!(demo.stats.last_cancel_reason(), PARK_EXPIRED);
        assert!(matches!(r.take(id(2)), Found::Unknown));
        assert_eq!(r.metrics.park_outcomes.with_label_values(&["timed_out"]).get(), 1);
    }

    #[tokio::test]
    async fn shutting_down_cancels_every_parked_call_upstream() {
        let (demo, pool) = upstream();
        let r = bounded(4, 4, Clock::System);
        r.park(id(1), call_of(&pool, "a").await).ok().expect("parked");
        r.cancel_all().await;
        until("the call is cancelled upstream", || demo.stats.cancellations() == 1).await;
        assert_eq!(demo.stats.last_cancel_reason(), "mrtr-gateway is shutting down");
        assert_eq!(r.metrics.parked_calls.get(), 0);
    }

    #[test]
    fn the_gauge_saturates() {
        assert_eq!(gauge(0), 0);
        assert_eq!(gauge(3), 3);
        assert_eq!(gauge(usize::MAX), i64::MAX);
    }
}
