//! Rate limits: token buckets (GCRA, crate `governor`) for each principal's requests and for
//! each principal's calls of a configured tool (`[limits]`). The front takes a token where it
//! dispatches a validated request, a retry of an MRTR chain (one carrying `requestState`)
//! included: a sealed state can be replayed until it expires, and each replay runs the upstream
//! call again, so a retry that took nothing would be an unlimited call. The default burst holds
//! one whole chain ([`crate::defaults::limit_burst`]), so a quiet client's chain is never cut.
//!
//! Memory stays bounded: the limiters are keyed by principal, and every
//! [`crate::defaults::LIMIT_SWEEP_EVERY`] checks the keys whose bucket has refilled (principals
//! gone quiet) are dropped with `retain_recent`, on the request path, so no task is needed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::DashMapStateStore;
use governor::{Quota, RateLimiter};

use crate::config::{LimitsConfig, Rate};
use crate::defaults;

/// The `share` label of `share_refusals_total`: the per-principal shares of bounds every client
/// shares. Beside the rate limits because a share is the other limit one principal meets; here,
/// below the upstream client and the legacy relay that count refusals with them.
pub mod share {
    /// `legacy.max_sessions_per_principal`.
    pub const LEGACY_SESSIONS: &str = "legacy_sessions";
    /// `upstream.pool_max_per_principal`.
    pub const UPSTREAM_LEASES: &str = "upstream_leases";
    /// `mrtr.max_parked_per_principal`.
    pub const PARKED_CALLS: &str = "parked_calls";

    /// Name and help of the `share_refusals_total` counter (its detached copies use them too).
    pub const COUNTER: (&str, &str) = (
        "share_refusals_total",
        "Requests refused, or calls not parked, because their principal held its share, by share.",
    );

    /// A share refusals counter registered nowhere, for the legacy relay's and the pool's
    /// detached metrics (`Metrics::new` replaces it with the registered one).
    pub fn detached_counter() -> Result<prometheus::IntCounterVec, prometheus::Error> {
        prometheus::IntCounterVec::new(prometheus::Opts::new(COUNTER.0, COUNTER.1), &["share"])
    }
}

/// The JSON-RPC code of a rate-limited request: JSON-RPC's implementation-defined server-error
/// range, outside the codes MCP reserves (-32020 and below).
pub const RATE_LIMITED_CODE: i64 = -32000;

/// A request refused by a limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("rate limit exceeded: {limit}")]
pub struct LimitError {
    pub limit: Limit,
    /// When the bucket next holds a token.
    pub retry_after: Duration,
}

/// Which limit refused a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Limit {
    Principal,
    /// A configured tool's name (from the config, never from a request).
    Tool(Arc<str>),
}

type Keyed<C> = RateLimiter<Arc<str>, DashMapStateStore<Arc<str>>, C, NoOpMiddleware<<C as Clock>::Instant>>;

/// Every configured limit; built once, shared by every request.
pub struct Limits<C: Clock + Clone = DefaultClock> {
    principal: Option<Keyed<C>>,
    tools: HashMap<Arc<str>, Keyed<C>>,
    clock: C,
    checks: AtomicU64,
}

// === impl Limit ===

impl Limit {
    /// The `limit` label of `rate_limited_total`: `principal`, or `tool:` and the tool's name
    /// (bounded by the config's tool table).
    pub fn label(&self) -> String {
        match self {
            Self::Principal => "principal".to_owned(),
            Self::Tool(name) => format!("tool:{name}"),
        }
    }
}

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Principal => f.write_str("principal"),
            Self::Tool(name) => write!(f, "tool {name:?}"),
        }
    }
}

// === impl LimitError ===

impl LimitError {
    /// `Retry-After` in whole seconds, rounded up (at least 1).
    pub fn retry_after_secs(&self) -> u64 {
        let d = self.retry_after;
        (d.as_secs() + u64::from(d.subsec_nanos() > 0)).max(1)
    }
}

// === impl Limits ===

impl Limits {
    /// The limits of `cfg`, on the system's monotonic clock.
    pub fn new(cfg: &LimitsConfig) -> Self {
        Self::with_clock(cfg, DefaultClock::default())
    }
}

impl<C: Clock + Clone> Limits<C> {
    /// The limits of `cfg`, timed by `clock` (tests move a fake one).
    pub fn with_clock(cfg: &LimitsConfig, clock: C) -> Self {
        let keyed = |rate: &Rate| Keyed::dashmap_with_clock(quota(rate), clock.clone());
        let principal = cfg.principal.as_ref().map(keyed);
        let tools = cfg.tools.iter().map(|(name, rate)| (Arc::from(name.as_str()), keyed(rate))).collect();
        Self { principal, tools, clock, checks: AtomicU64::new(0) }
    }

    /// True when no limit is configured.
    pub fn is_off(&self) -> bool {
        self.principal.is_none() && self.tools.is_empty()
    }

    /// Takes a token for one request of `principal` (and, for a `tools/call`, of `tool`). The
    /// principal's limit is checked first; a token it gave is not returned if the tool's
    /// limit then refuses.
    pub fn check(&self, principal: &Arc<str>, tool: Option<&str>) -> Result<(), LimitError> {
        if self.is_off() {
            return Ok(());
        }
        self.sweep_now_and_then();
        if let Some(limiter) = &self.principal {
            self.take(limiter, principal, || Limit::Principal)?;
        }
        if let Some((name, limiter)) = tool.and_then(|t| self.tools.get_key_value(t)) {
            self.take(limiter, principal, || Limit::Tool(name.clone()))?;
        }
        Ok(())
    }

    /// Keys held by every limiter (for tests and debugging).
    pub fn keys(&self) -> usize {
        self.principal.iter().chain(self.tools.values()).map(Keyed::len).sum()
    }

    /// Drops the keys of principals whose buckets are full again (indistinguishable from new).
    pub fn sweep(&self) {
        for limiter in self.principal.iter().chain(self.tools.values()) {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
    }

    fn take(
        &self,
        limiter: &Keyed<C>,
        key: &Arc<str>,
        limit: impl FnOnce() -> Limit,
    ) -> Result<(), LimitError> {
        limiter.check_key(key).map_err(|not_until| LimitError {
            limit: limit(),
            retry_after: not_until.wait_time_from(self.clock.now()),
        })
    }

    fn sweep_now_and_then(&self) {
        let n = self.checks.fetch_add(1, Ordering::Relaxed) + 1;
        if n.is_multiple_of(defaults::LIMIT_SWEEP_EVERY) {
            self.sweep();
        }
    }
}

fn quota(rate: &Rate) -> Quota {
    // The config layer guarantees a positive period; a zero one cannot reach here.
    Quota::with_period(rate.period).unwrap_or_else(|| Quota::per_second(rate.burst)).allow_burst(rate.burst)
}

#[cfg(test)]
mod tests;
