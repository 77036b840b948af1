//! Admission to the session pool: at most `pool_max_sessions` calls hold a session at once,
//! and at most `pool_max_per_key` of one pool key (principal, capability fingerprint); the
//! others wait, first come first served, in one queue of bounded length for a bounded time.
//!
//! Above both, a principal's share (`pool_max_per_principal`): the calls of one principal that
//! hold or wait for a session, whatever their capabilities. A call past it is refused at once
//! with [`UpstreamError::PrincipalShare`] rather than queued: a principal varying its
//! capabilities has a key per set, and waiting calls hold places of the shared queue, so
//! without it one principal could hold every session and fill the queue behind them.
//!
//! A call takes its key's slot first, then a slot of the total: waiting for its own key while
//! holding a slot of the total would let one busy client starve every other. Both waits share
//! one place in the queue (a call counts once against `pool_max_queued`) and one deadline
//! (`pool_acquire_timeout` in all). Past it the call fails with [`UpstreamError::KeyExhausted`]
//! or [`UpstreamError::PoolExhausted`], each counted by its reason. A key's semaphore exists
//! only while a call holds or waits for it, so many principals cost no memory at rest.
//!
//! Waking every waiter whenever a session came back (the herd) let a newcomer overtake calls
//! that had waited for seconds, and burnt a wake-up per waiter per call. A semaphore hands each
//! freed slot to the oldest waiter instead. Past the queue bound a call fails at once with
//! [`UpstreamError::QueueFull`], which the front answers with 503: waiting longer would only
//! turn an overload into timeouts for everyone.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use prometheus::{IntCounterVec, IntGauge, Opts};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::pool::PoolKey;
use super::UpstreamError;

/// The metrics of one pool, registered by the caller (or detached, for tests).
#[derive(Debug, Clone)]
pub struct PoolMetrics {
    /// Upstream TCP connections open.
    pub connections: IntGauge,
    /// Calls waiting for a session.
    pub queued: IntGauge,
    /// Calls refused for overload, by reason (`queue_full`, `pool_exhausted`, `key_exhausted`).
    pub rejections: IntCounterVec,
    /// Stdio processes spawned and waiting for their first call.
    pub warm: IntGauge,
    /// Sessions opened for a call, by how: `warm` (a waiting process initialised) or `cold`
    /// (started for the call).
    pub opened: IntCounterVec,
    /// The gateway's `share_refusals_total` (registered by [`crate::metrics::Metrics`], not by
    /// [`PoolMetrics::register`]).
    pub share_refusals: IntCounterVec,
}

/// The slots and the queue in front of them.
pub(crate) struct Admission {
    /// `None` when the share is the total.
    shares: Option<Arc<Shares>>,
    slots: Arc<Semaphore>,
    /// `None` when the bound per key is the total's.
    per_key: Option<Arc<PerKey>>,
    waiting: AtomicUsize,
    max_queued: usize,
    wait: Duration,
    metrics: PoolMetrics,
}

/// The calls of each principal that hold or wait for a slot now (no entry at zero).
struct Shares {
    max: usize,
    held: Mutex<HashMap<Arc<str>, usize>>,
}

/// One call's place in its principal's share; dropping it gives the place back.
struct ShareSlot {
    principal: Arc<str>,
    shares: Arc<Shares>,
}

/// The semaphores of the keys that hold or wait for a slot now.
struct PerKey {
    max: usize,
    gates: Mutex<HashMap<PoolKey, Arc<Semaphore>>>,
}

/// One key's semaphore, taken from the map; dropping the last one out removes it.
struct KeyGate {
    semaphore: Arc<Semaphore>,
    key: PoolKey,
    per_key: Arc<PerKey>,
}

/// A call's right to a session: a slot of the total and, when keys are bounded, one of its
/// key. Dropping it frees both.
pub(crate) struct Admitted {
    _slot: OwnedSemaphorePermit,
    _key: Option<KeySlot>,
    _share: Option<ShareSlot>,
}

/// Fields drop in order: the permit before the gate that may remove its semaphore.
struct KeySlot {
    _permit: OwnedSemaphorePermit,
    _gate: KeyGate,
}

/// A place in the queue; leaving it (served, timed out or cancelled) frees it.
struct Queued<'a>(&'a Admission);

// === impl PoolMetrics ===

impl PoolMetrics {
    /// Metrics registered nowhere.
    pub fn detached() -> Result<Self, prometheus::Error> {
        Ok(Self {
            connections: IntGauge::new("upstream_connections", "Upstream TCP connections open.")?,
            queued: IntGauge::new("upstream_queued_calls", "Calls waiting for an upstream session.")?,
            rejections: IntCounterVec::new(
                Opts::new("upstream_rejections_total", "Calls refused for upstream overload, by reason."),
                &["reason"],
            )?,
            warm: IntGauge::new("upstream_warm_processes", "Stdio processes waiting for their first call.")?,
            opened: IntCounterVec::new(
                Opts::new("upstream_sessions_opened_total", "Upstream sessions opened for a call, by how."),
                &["how"],
            )?,
            share_refusals: crate::limits::share::detached_counter()?,
        })
    }

    /// Every series to register (`share_refusals` is the gateway's, not among them).
    pub fn collectors(&self) -> Vec<Box<dyn prometheus::core::Collector>> {
        vec![
            Box::new(self.connections.clone()),
            Box::new(self.queued.clone()),
            Box::new(self.rejections.clone()),
            Box::new(self.warm.clone()),
            Box::new(self.opened.clone()),
        ]
    }
}

// === impl Admission ===

impl Admission {
    pub(crate) fn new(bounds: Bounds, metrics: PoolMetrics) -> Self {
        let total = bounds.total.max(1);
        let slots = Arc::new(Semaphore::new(total));
        let per_key = (bounds.per_key < total)
            .then(|| Arc::new(PerKey { max: bounds.per_key.max(1), gates: Mutex::new(HashMap::new()) }));
        let shares = (bounds.per_principal < total)
            .then(|| Arc::new(Shares { max: bounds.per_principal.max(1), held: Mutex::new(HashMap::new()) }));
        let (max_queued, wait) = (bounds.max_queued, bounds.wait);
        Self { shares, slots, per_key, waiting: AtomicUsize::new(0), max_queued, wait, metrics }
    }

    pub(crate) fn metrics(&self) -> &PoolMetrics {
        &self.metrics
    }

    /// Calls waiting now.
    pub(crate) fn queued(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    /// Slots at once if they are free, else after the calls queued before this one.
    pub(crate) async fn admit(&self, key: &PoolKey) -> Result<Admitted, UpstreamError> {
        let share = match &self.shares {
            Some(shares) => Some(shares.take(&key.0).ok_or_else(|| self.refuse_share(shares.max))?),
            None => None,
        };
        let deadline = Instant::now() + self.wait;
        let mut place = None;
        let key_slot = match &self.per_key {
            Some(per_key) => {
                let gate = per_key.gate(key);
                let over = UpstreamError::KeyExhausted(self.wait);
                let permit = self.take(&gate.semaphore, &mut place, deadline, over).await?;
                Some(KeySlot { _permit: permit, _gate: gate })
            }
            None => None,
        };
        let over = UpstreamError::PoolExhausted(self.wait);
        let slot = self.take(&self.slots, &mut place, deadline, over).await?;
        Ok(Admitted { _slot: slot, _key: key_slot, _share: share })
    }

    /// A call refused because its principal holds its share: counted as a rejection and as a
    /// share refusal.
    fn refuse_share(&self, limit: usize) -> UpstreamError {
        let share = crate::limits::share::UPSTREAM_LEASES;
        self.metrics.share_refusals.with_label_values(&[share]).inc();
        self.reject(UpstreamError::PrincipalShare { limit })
    }

    /// One permit of `semaphore`, queueing (once per call) when none is free.
    async fn take<'a>(
        &'a self,
        semaphore: &Arc<Semaphore>,
        place: &mut Option<Queued<'a>>,
        deadline: Instant,
        over: UpstreamError,
    ) -> Result<OwnedSemaphorePermit, UpstreamError> {
        if let Ok(permit) = semaphore.clone().try_acquire_owned() {
            return Ok(permit);
        }
        if place.is_none() {
            *place = Some(self.enqueue()?);
        }
        match tokio::time::timeout_at(deadline, semaphore.clone().acquire_owned()).await {
            Ok(Ok(permit)) => Ok(permit),
            Ok(Err(_)) => Err(UpstreamError::Closed("the session pool shut down".to_owned())),
            Err(_) => Err(self.reject(over)),
        }
    }

    fn enqueue(&self) -> Result<Queued<'_>, UpstreamError> {
        if self.waiting.fetch_add(1, Ordering::Relaxed) >= self.max_queued {
            self.waiting.fetch_sub(1, Ordering::Relaxed);
            return Err(self.reject(UpstreamError::QueueFull { limit: self.max_queued }));
        }
        self.metrics.queued.inc();
        Ok(Queued(self))
    }

    fn reject(&self, error: UpstreamError) -> UpstreamError {
        self.metrics.rejections.with_label_values(&[error.label()]).inc();
        error
    }
}

/// What [`Admission::new`] enforces.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    pub(crate) total: usize,
    pub(crate) per_key: usize,
    /// Calls of one principal holding or waiting for a slot.
    pub(crate) per_principal: usize,
    pub(crate) max_queued: usize,
    pub(crate) wait: Duration,
}

// === impl Shares ===

impl Shares {
    /// A place of `principal`'s, or `None` when it holds its share.
    fn take(self: &Arc<Self>, principal: &Arc<str>) -> Option<ShareSlot> {
        let mut held = self.held.lock();
        let n = held.entry(principal.clone()).or_default();
        if *n >= self.max {
            return None;
        }
        *n += 1;
        Some(ShareSlot { principal: principal.clone(), shares: self.clone() })
    }
}

impl Drop for ShareSlot {
    fn drop(&mut self) {
        let mut held = self.shares.held.lock();
        if let Some(n) = held.get_mut(&self.principal) {
            *n -= 1;
            if *n == 0 {
                held.remove(&self.principal);
            }
        }
    }
}

// === impl PerKey ===

impl PerKey {
    /// The key's semaphore, made when no call holds or waits for one.
    fn gate(self: &Arc<Self>, key: &PoolKey) -> KeyGate {
        let semaphore = self
            .gates
            .lock()
            .entry(key.clone())
            .or_insert_with(|| Arc::new(Semaphore::new(self.max)))
            .clone();
        KeyGate { semaphore, key: key.clone(), per_key: self.clone() }
    }

    /// Keys with a semaphore now (tests check that they do not pile up).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.gates.lock().len()
    }
}

impl Drop for KeyGate {
    fn drop(&mut self) {
        // Under the lock no new clone can appear: only the map's and this one means no call
        // holds a permit of it (a permit keeps its semaphore alive) or waits for one.
        let mut gates = self.per_key.gates.lock();
        if Arc::strong_count(&self.semaphore) == 2 {
            gates.remove(&self.key);
        }
    }
}

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::Relaxed);
        self.0.metrics.queued.dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admission(total: usize, per_key: usize, max_queued: usize, wait: Duration) -> Admission {
        let bounds = Bounds { total, per_key, per_principal: total, max_queued, wait };
        Admission::new(bounds, PoolMetrics::detached().unwrap())
    }

    fn key(principal: &str) -> PoolKey {
        (Arc::from(principal), 0)
    }

    #[test]
    fn the_pool_registers_its_five_series_and_never_the_shared_one() {
        let metrics = PoolMetrics::detached().unwrap();
        let registry = prometheus::Registry::new();
        for collector in metrics.collectors() {
            registry.register(collector).unwrap();
        }
        metrics.rejections.with_label_values(&["queue_full"]).inc();
        metrics.opened.with_label_values(&["cold"]).inc();
        let mut names: Vec<String> = registry.gather().iter().map(|f| f.name().to_owned()).collect();
        names.sort();
        let expected = [
            "upstream_connections",
            "upstream_queued_calls",
            "upstream_rejections_total",
            "upstream_sessions_opened_total",
            "upstream_warm_processes",
        ];
        assert_eq!(names, expected);
    }

    fn rejected(a: &Admission, reason: &str) -> u64 {
        a.metrics().rejections.with_label_values(&[reason]).get()
    }

    #[tokio::test]
    async fn a_key_at_its_bound_waits_while_another_key_is_served() {
        let a = Arc::new(admission(4, 1, 8, Duration::from_secs(30)));
        let held = a.admit(&key("alice")).await.unwrap();
        let waiter = tokio::spawn({
            let a = a.clone();
            async move { a.admit(&key("alice")).await.map(drop) }
        });
        while a.queued() == 0 {
            tokio::task::yield_now().await;
        }
        let bob = a.admit(&key("bob")).await.unwrap();
        assert!(!waiter.is_finished(), "alice's second call waits for her first");
        drop(held);
        waiter.await.unwrap().unwrap();
        drop(bob);
        assert_eq!(a.queued(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_past_its_bound_times_out_with_its_own_reason() {
        let a = admission(4, 1, 8, Duration::from_millis(100));
        let _held = a.admit(&key("alice")).await.unwrap();
        let err = a.admit(&key("alice")).await.map(drop).unwrap_err();
        assert!(matches!(err, UpstreamError::KeyExhausted(_)), "{err}");
        assert!(err.is_overload());
        assert_eq!(rejected(&a, "key_exhausted"), 1);
    }

    #[tokio::test]
    async fn waiters_of_keys_and_of_the_total_share_one_queue_bound() {
        let a = Arc::new(admission(2, 1, 1, Duration::from_secs(30)));
        let _alice = a.admit(&key("alice")).await.unwrap();
        let waiter = tokio::spawn({
            let a = a.clone();
            async move { a.admit(&key("alice")).await.map(drop) }
        });
        while a.queued() == 0 {
            tokio::task::yield_now().await;
        }
        let _bob = a.admit(&key("bob")).await.unwrap();
        let err = a.admit(&key("carol")).await.map(drop).unwrap_err();
        assert!(matches!(err, UpstreamError::QueueFull { limit: 1 }), "{err}");
        assert_eq!(rejected(&a, "queue_full"), 1);
        waiter.abort();
    }

    #[tokio::test]
    async fn a_keys_semaphore_lives_only_while_used() {
        let a = admission(4, 2, 8, Duration::from_secs(30));
        let per_key = a.per_key.clone().expect("keys are bounded");
        for principal in ["a", "b", "c"] {
            let first = a.admit(&key(principal)).await.unwrap();
            let second = a.admit(&key(principal)).await.unwrap();
            assert_eq!(per_key.len(), 1);
            drop(first);
            assert_eq!(per_key.len(), 1, "still held by the second call");
            drop(second);
            assert_eq!(per_key.len(), 0);
        }
        assert!(admission(4, 4, 8, Duration::from_secs(1)).per_key.is_none(), "no bound of its own");
    }

    #[tokio::test]
    async fn a_principal_past_its_share_is_refused_at_once_while_another_is_served() {
        let bounds =
            Bounds { total: 4, per_key: 4, per_principal: 2, max_queued: 8, wait: Duration::from_secs(30) };
        let a = Admission::new(bounds, PoolMetrics::detached().unwrap());
        // Two capability sets of one principal are two keys but one share.
        let first = a.admit(&key("alice")).await.unwrap();
        let _second = a.admit(&(Arc::from("alice"), 1)).await.unwrap();
        let err = a.admit(&(Arc::from("alice"), 2)).await.map(drop).unwrap_err();
        assert!(matches!(err, UpstreamError::PrincipalShare { limit: 2 }), "{err}");
        assert!(err.is_overload() && !err.poisons_session());
        assert_eq!(a.queued(), 0, "refused at once, never queued");
        assert_eq!(rejected(&a, "principal_share"), 1);
        assert_eq!(a.metrics().share_refusals.with_label_values(&["upstream_leases"]).get(), 1);
        let _bob = a.admit(&key("bob")).await.unwrap();
        drop(first);
        let _again = a.admit(&key("alice")).await.unwrap();
        assert_eq!(a.shares.as_ref().map(|s| s.held.lock().len()), Some(2));
    }
}
