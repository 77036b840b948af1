//! Whether this replica should get traffic: the upstream has answered an `initialize`, no
//! shutdown has begun, the single-use state store answers, and any further condition set at
//! start (the token keys are loaded). Set by the pieces that know, read by `/readyz`; a leaf of
//! its own so that those pieces need not import the admin listener.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Shared readiness, set once the upstream answered `initialize` and withdrawn for good when
/// shutdown begins (a late `initialize` answer cannot make a draining gateway ready again).
#[derive(Debug, Clone, Default)]
pub struct Readiness(Arc<ReadinessFlags>);

#[derive(Debug, Default)]
struct ReadinessFlags {
    upstream: AtomicBool,
    draining: AtomicBool,
    /// Set while the single-use state store does not answer (never set without one).
    state_store_down: AtomicBool,
    /// A further condition (the token keys are loaded), set at most once at start.
    extra: std::sync::OnceLock<ReadyCheck>,
}

/// A condition `/readyz` also requires.
#[derive(Clone)]
pub struct ReadyCheck(pub Arc<dyn Fn() -> bool + Send + Sync>);

impl std::fmt::Debug for ReadyCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReadyCheck")
    }
}

impl Readiness {
    pub fn set_ready(&self) {
        self.0.upstream.store(true, Ordering::Release);
    }

    /// Withdraws readiness: shutdown has begun, send no new traffic here.
    pub fn set_unready(&self) {
        self.0.draining.store(true, Ordering::Release);
    }

    pub fn is_ready(&self) -> bool {
        self.0.upstream.load(Ordering::Acquire)
            && !self.0.draining.load(Ordering::Acquire)
            && self.extra_holds()
            && !self.is_state_store_down()
    }

    /// Makes readiness also require `check` (the token keys are loaded); set once.
    pub fn require(&self, check: Arc<dyn Fn() -> bool + Send + Sync>) {
        let _ = self.0.extra.set(ReadyCheck(check));
    }

    /// Whether the further condition set at start (if any) holds.
    pub fn extra_holds(&self) -> bool {
        self.0.extra.get().is_none_or(|c| (c.0)())
    }

    /// Records whether the single-use state store answered its latest ping.
    pub fn set_state_store(&self, up: bool) {
        self.0.state_store_down.store(!up, Ordering::Release);
    }

    pub fn is_state_store_down(&self) -> bool {
        self.0.state_store_down.load(Ordering::Acquire)
    }

    pub fn is_draining(&self) -> bool {
        self.0.draining.load(Ordering::Acquire)
    }
}
