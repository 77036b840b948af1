//! Admission to the session pool: at most `pool_max_sessions` calls hold a session at once,
//! the others wait in one first-come first-served queue of bounded length for a bounded time.
//!
//! Waking every waiter whenever a session came back (the herd) let a newcomer overtake calls
//! that had waited for seconds, and burnt a wake-up per waiter per call. A semaphore hands each
//! freed slot to the oldest waiter instead. Past the queue bound a call fails at once with
//! [`UpstreamError::QueueFull`], which the front answers with 503: waiting longer would only
//! turn an overload into timeouts for everyone.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use prometheus::{IntCounterVec, IntGauge, Opts};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::UpstreamError;

/// The metrics of one pool, registered by the caller (or detached, for tests).
#[derive(Debug, Clone)]
pub struct PoolMetrics {
    /// Upstream TCP connections open.
    pub connections: IntGauge,
    /// Calls waiting for a session.
    pub queued: IntGauge,
    /// Calls refused for overload, by reason (`queue_full`, `pool_exhausted`).
    pub rejections: IntCounterVec,
}

/// The slots and the queue in front of them.
pub(crate) struct Admission {
    slots: Arc<Semaphore>,
    waiting: AtomicUsize,
    max_queued: usize,
    wait: Duration,
    metrics: PoolMetrics,
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
        })
    }

    /// Registers every metric on `registry`.
    pub fn register(&self, registry: &prometheus::Registry) -> Result<(), prometheus::Error> {
        registry.register(Box::new(self.connections.clone()))?;
        registry.register(Box::new(self.queued.clone()))?;
        registry.register(Box::new(self.rejections.clone()))
    }
}

// === impl Admission ===

impl Admission {
    pub(crate) fn new(slots: usize, max_queued: usize, wait: Duration, metrics: PoolMetrics) -> Self {
        let slots = Arc::new(Semaphore::new(slots.max(1)));
        Self { slots, waiting: AtomicUsize::new(0), max_queued, wait, metrics }
    }

    pub(crate) fn metrics(&self) -> &PoolMetrics {
        &self.metrics
    }

    /// Calls waiting now.
    pub(crate) fn queued(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    /// A slot at once if one is free, else after the calls queued before this one.
    pub(crate) async fn admit(&self) -> Result<OwnedSemaphorePermit, UpstreamError> {
        if let Ok(permit) = self.slots.clone().try_acquire_owned() {
            return Ok(permit);
        }
        let _place = self.enqueue()?;
        match tokio::time::timeout(self.wait, self.slots.clone().acquire_owned()).await {
            Ok(Ok(permit)) => Ok(permit),
            Ok(Err(_)) => Err(UpstreamError::Closed("the session pool shut down".to_owned())),
            Err(_) => Err(self.reject(UpstreamError::PoolExhausted(self.wait))),
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

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::Relaxed);
        self.0.metrics.queued.dec();
    }
}
