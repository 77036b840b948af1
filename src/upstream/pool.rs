//! The pool of legacy sessions, and the lease that gives one session to one call at a time.
//!
//! Sessions are keyed by (principal, capability fingerprint): a legacy server fixes a client's
//! capabilities at `initialize` and may expose different tools per client, so a session is never
//! shared across principals or capability sets. A session is *leased* to one call at a time so
//! that requests the server sends on the GET stream are attributed to that call. List methods
//! lease like any other call: they are short, and one rule is easier to trust than two.
//!
//! Bounds: at most `pool_max_sessions` sessions exist (idle + leased + starting + warm), and at
//! most `pool_max_per_key` of one key. A call first takes its key's slot and one of the
//! total's ([`super::admission`]): in arrival order, behind at most `pool_max_queued` others,
//! for at most `pool_acquire_timeout`. Holding them, it reuses an idle session of its key, or
//! initialises a warm process, or starts a session, evicting the least recently used idle
//! session of another key when the pool is full. A new session of a key is only started when
//! none of its own is idle, so the key's slots bound its sessions too. Idle sessions expire
//! after `pool_idle_timeout`.
//!
//! A lease may be *winding down*: its call ended for the client, which already has its reply,
//! while the end is still being told upstream (a replayed round's cancel and refusals). A call
//! of the same key that finds no idle session waits for such a session, up to
//! [`crate::defaults::WIND_DOWN`], rather than opening another: the client's retry of a round
//! usually arrives during the wind-down, and a second session per key (a second process, for
//! stdio) would be opened for every chain that does.
//!
//! Warm processes (stdio, `pool_min_warm`) are started and left waiting for `initialize`; see
//! [`warm`] for why that, and not an initialised session, is what is kept ready. A session a
//! long-lived holder keeps outside the pool may be lent back to its key's calls, which then
//! lease it first; see [`home`].

use std::collections::VecDeque;
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::admission::{Admission, Admitted, Bounds, PoolMetrics};
use super::event::EventTx;
use super::session::{Connector, Session, Spare};
use super::{InitializeResult, UpstreamError, UpstreamSettings};

mod home;
mod warm;

pub use home::Lending;

/// (principal, capability fingerprint).
pub type PoolKey = (Arc<str>, u8);

/// Bound on the background DELETE of an evicted session.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// Counts for metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    pub idle: usize,
    pub leased: usize,
    pub starting: usize,
    /// Stdio processes started ahead of demand, waiting for their first call.
    pub warm: usize,
}

/// A shareable handle on the pool.
#[derive(Clone)]
pub struct Pool {
    inner: Arc<PoolInner>,
}

struct PoolInner {
    transport: Connector,
    state: Mutex<State>,
    admission: Admission,
    initialize: Mutex<Option<Arc<InitializeResult>>>,
    /// Wakes the task that keeps processes warm: one was taken or capacity freed.
    rewarm: Arc<Notify>,
    /// Sessions held outside the pool and lent to their key's calls ([`home`]).
    homes: home::Homes,
    /// Wakes the calls waiting for a winding-down session: one went back to the pool.
    wound: Notify,
}

#[derive(Default)]
struct State {
    /// Least recently used first.
    idle: VecDeque<Idle>,
    leased: usize,
    starting: usize,
    /// Oldest first.
    warm: VecDeque<Spare>,
    /// Warm processes found dead by calls since the last refill (it backs off for them).
    warm_died: usize,
    /// Set at shutdown: nothing more is kept warm.
    closed: bool,
    /// The key of each leased session winding down (one entry per lease; few at once).
    winding: Vec<PoolKey>,
}

struct Idle {
    key: PoolKey,
    session: Session,
    since: Instant,
}

enum Step {
    /// The key's lent session ([`home`]).
    Home(Arc<home::Home>, Session),
    Reuse(Session),
    /// Initialise this warm process.
    Warm(Spare),
    Start,
    /// None idle, but one of the key's sessions is winding down: wait for it.
    Wait,
}

/// A session leased to one call; dropping it returns the session to the pool (or to the holder
/// that lent it), or retires it if it is unhealthy or was poisoned.
pub struct Lease {
    session: Session,
    key: PoolKey,
    pool: Arc<PoolInner>,
    /// Set when the session is a lent one, which goes back to its holder, not to the pool.
    home: Option<Arc<home::Home>>,
    /// Its list changes go to the key's lent session while this lease lasts.
    tapped: bool,
    /// Counted in [`State::winding`] until it drops.
    winding: bool,
    poisoned: bool,
    /// Freed after the session is back in the pool, so the next caller finds it there.
    _slot: Admitted,
}

/// Undoes a `starting` reservation if initialisation fails or is cancelled.
struct Starting<'a>(&'a PoolInner);

// === impl Pool ===

impl Pool {
    /// Builds the pool and its connector, with metrics registered nowhere.
    pub fn new(settings: UpstreamSettings) -> Result<Self, UpstreamError> {
        let metrics = PoolMetrics::detached().map_err(|e| UpstreamError::Settings(e.to_string()))?;
        Self::with_metrics(settings, metrics)
    }

    /// Builds the pool and its connector. Inside a Tokio runtime it also starts the task that
    /// closes expired idle sessions; [`Pool::evict_idle`] does the same on demand.
    pub fn with_metrics(settings: UpstreamSettings, metrics: PoolMetrics) -> Result<Self, UpstreamError> {
        let bounds = Bounds {
            total: settings.pool_max_sessions,
            per_key: settings.pool_max_per_key,
            per_principal: settings.pool_max_per_principal,
            max_queued: settings.pool_max_queued,
            wait: settings.pool_acquire_timeout,
        };
        let admission = Admission::new(bounds, metrics);
        let transport = Connector::new(Arc::new(settings), admission.metrics().connections.clone())?;
        let inner = Arc::new(PoolInner {
            transport,
            state: Mutex::new(State::default()),
            admission,
            initialize: Mutex::new(None),
            rewarm: Arc::new(Notify::new()),
            homes: home::Homes::default(),
            wound: Notify::new(),
        });
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(reap(Arc::downgrade(&inner)));
            if inner.settings().pool_min_warm > 0 {
                handle.spawn(warm::keep_warm(Arc::downgrade(&inner), inner.rewarm.clone()));
            }
        }
        Ok(Self { inner })
    }

    /// Leases an idle session of `key`, or initialises a new one declaring `capabilities`.
    pub async fn lease(&self, key: PoolKey, capabilities: &Value) -> Result<Lease, UpstreamError> {
        self.lease_with(key, || capabilities.clone()).await
    }

    /// [`Pool::lease`], building the declared capabilities only when a session must be
    /// initialised: the common case reuses an idle session and never needs them.
    pub async fn lease_with(
        &self,
        key: PoolKey,
        capabilities: impl FnOnce() -> Value,
    ) -> Result<Lease, UpstreamError> {
        let slot = self.inner.admission.admit(&key).await?;
        let (step, tap) = match self.inner.acquire(&key, true) {
            // Rare, and its future holds a timer: boxed like the opening paths below.
            (Step::Wait, _) => Box::pin(self.inner.wait_for_winding(&key)).await,
            chosen => chosen,
        };
        // Opening a session is the rare path and its future is large: boxed, so every call's
        // future (held for as long as the call runs) stays small.
        let mut lease = match step {
            Step::Home(home, session) => {
                let mut lease = self.lease_of(key, session, slot);
                lease.home = Some(home);
                lease
            }
            Step::Reuse(session) => self.lease_of(key, session, slot),
            Step::Warm(spare) => Box::pin(self.start(key, &capabilities(), slot, Some(spare))).await?,
            Step::Start => Box::pin(self.start(key, &capabilities(), slot, None)).await?,
            Step::Wait => unreachable!("wait_for_winding never answers Wait"),
        };
        if let Some(tap) = tap {
            lease.session.set_tap(Some(tap));
            lease.tapped = true;
        }
        Ok(lease)
    }

    async fn start(
        &self,
        key: PoolKey,
        capabilities: &Value,
        slot: Admitted,
        spare: Option<Spare>,
    ) -> Result<Lease, UpstreamError> {
        let reservation = Starting(&self.inner);
        let session = self.inner.open(capabilities, spare).await?;
        // The reservation becomes a lease below; its drop would undo the count.
        std::mem::forget(reservation);
        {
            let mut state = self.inner.state.lock();
            state.starting -= 1;
            state.leased += 1;
        }
        *self.inner.initialize.lock() = Some(session.initialize_result().clone());
        Ok(self.lease_of(key, session, slot))
    }

    fn lease_of(&self, key: PoolKey, session: Session, slot: Admitted) -> Lease {
        Lease {
            session,
            key,
            pool: self.inner.clone(),
            home: None,
            tapped: false,
            winding: false,
            poisoned: false,
            _slot: slot,
        }
    }

    /// Lends `session` (taken with [`Pool::take_unpooled`]) to the calls of `key`: until the
    /// returned [`Lending`] is withdrawn or dropped, a call of that key leases it first whenever
    /// no other call has it. See [`home`] for why.
    pub fn lend(&self, key: &PoolKey, session: Session) -> Lending {
        Lending::start(&self.inner, key.clone(), session)
    }

    /// A session of `key` for a holder that keeps it for a long time, such as the
    /// `subscriptions/listen` bridge: an idle session of the key is taken out of the pool (it
    /// costs no handshake, and for stdio no process start), or else one is opened on the
    /// pool's connector (its HTTP client or command) declaring `capabilities`. Either way it
    /// leaves the pool: it counts against no pool bound, its holder closes it, and leases see it
    /// only if the holder lends it back ([`Pool::lend`]).
    pub async fn take_unpooled(&self, key: &PoolKey, capabilities: &Value) -> Result<Session, UpstreamError> {
        if let Some(session) = self.inner.take_idle(key) {
            return Ok(session);
        }
        let session = self.inner.transport.connect(capabilities).await?;
        *self.inner.initialize.lock() = Some(session.initialize_result().clone());
        Ok(session)
    }

    /// The upstream's `initialize` answer for `server/discover`: the cached one, or the one of
    /// a session opened (and returned to the pool) for the purpose.
    pub async fn discover(
        &self,
        key: PoolKey,
        capabilities: &Value,
    ) -> Result<Arc<InitializeResult>, UpstreamError> {
        if let Some(init) = self.initialize_result() {
            return Ok(init);
        }
        let lease = self.lease(key, capabilities).await?;
        Ok(lease.initialize_result().clone())
    }

    /// Current counts (poll this for metrics).
    pub fn stats(&self) -> PoolStats {
        let state = self.inner.state.lock();
        PoolStats {
            idle: state.idle.len(),
            leased: state.leased,
            starting: state.starting,
            warm: state.warm.len(),
        }
    }

    /// The count of the upstream's `notifications/tools/list_changed`, shared by its sessions.
    pub fn tools_changed(&self) -> &crate::upstream::ToolsChanged {
        &self.inner.settings().tools_changed
    }

    /// The leases winding down, one entry each.
    #[cfg(test)]
    pub(crate) fn winding(&self) -> usize {
        self.inner.state.lock().winding.len()
    }

    /// Sessions open or opening.
    pub fn size(&self) -> usize {
        let s = self.stats();
        s.idle + s.leased + s.starting + s.warm
    }

    /// Calls waiting for a session.
    pub fn queued(&self) -> usize {
        self.inner.admission.queued()
    }

    /// The bound the upstream's network connections count against, for the other clients of
    /// the same upstream (the legacy relay) to share; `None` for a stdio upstream.
    pub fn connection_bound(&self) -> Option<crate::outbound::Bound> {
        self.inner.transport.bound().cloned()
    }

    /// The latest `initialize` answer of the upstream, if any session was ever opened.
    pub fn initialize_result(&self) -> Option<Arc<InitializeResult>> {
        self.inner.initialize.lock().clone()
    }

    /// Closes every idle session and warm process at once (at shutdown), keeps no more warm,
    /// and returns how many sessions it closed; leased ones close when their lease drops.
    pub async fn close_idle(&self) -> usize {
        let (idle, warm): (Vec<_>, Vec<_>) = {
            let mut state = self.inner.state.lock();
            state.closed = true;
            (state.idle.drain(..).collect(), state.warm.drain(..).collect())
        };
        self.inner.admission.metrics().warm.set(0);
        let count = idle.len();
        // Concurrently: each close is bounded, and child processes take seconds to stop.
        let closes = idle
            .into_iter()
            .map(|e| tokio::time::timeout(CLOSE_TIMEOUT, async move { e.session.close().await }));
        let stops = warm.into_iter().map(|spare| tokio::time::timeout(CLOSE_TIMEOUT, spare.close()));
        futures_util::future::join(
            futures_util::future::join_all(closes),
            futures_util::future::join_all(stops),
        )
        .await;
        count
    }
}

// === impl PoolInner ===

impl PoolInner {
    fn settings(&self) -> &UpstreamSettings {
        self.transport.settings()
    }

    /// One decision under the lock, by a caller holding a slot: reuse, take a warm process, or
    /// reserve a new session. Slots bound leased + starting sessions, and warm processes only
    /// fill free room, so a full pool without a warm one always has an idle one to evict.
    /// Also returns the lent session's tap when a pooled session is chosen while one is lent.
    /// With `may_wait`, answers [`Step::Wait`] instead of opening a session while one of the
    /// key's sessions is winding down.
    fn acquire(&self, key: &PoolKey, may_wait: bool) -> (Step, Option<EventTx>) {
        let tap = match self.lent(key) {
            Ok(step) => return (step, None),
            Err(tap) => tap,
        };
        (self.acquire_pooled(key, may_wait), tap)
    }

    /// Acquires once a winding-down session of `key` is back, or opens one when none is back
    /// within [`crate::defaults::WIND_DOWN`] (its wind-down then retires it).
    async fn wait_for_winding(&self, key: &PoolKey) -> (Step, Option<EventTx>) {
        let deadline = Instant::now() + crate::defaults::WIND_DOWN;
        loop {
            // Registered before the state is looked at, so a release in between still wakes it.
            let wound = self.wound.notified();
            tokio::pin!(wound);
            wound.as_mut().enable();
            match self.acquire(key, Instant::now() < deadline) {
                (Step::Wait, _) => {
                    let _ = tokio::time::timeout_at(deadline, wound).await;
                }
                chosen => return chosen,
            }
        }
    }

    fn acquire_pooled(&self, key: &PoolKey, may_wait: bool) -> Step {
        let mut evicted = self.take_stale();
        let (step, dead) = {
            let mut state = self.state.lock();
            let pos = state.idle.iter().rposition(|e| &e.key == key);
            let (step, dead) = if let Some(entry) = pos.and_then(|pos| state.idle.remove(pos)) {
                state.leased += 1;
                (Step::Reuse(entry.session), Vec::new())
            } else if may_wait && state.winding.contains(key) {
                (Step::Wait, Vec::new())
            } else {
                let (spare, dead) = state.take_warm();
                let step = if let Some(spare) = spare {
                    Step::Warm(spare)
                } else if state.total() < self.settings().pool_max_sessions {
                    Step::Start
                } else {
                    evicted.extend(state.idle.pop_front().map(|lru| lru.session));
                    Step::Start
                };
                state.starting += 1;
                (step, dead)
            };
            self.admission.metrics().warm.set(state.warm.len() as i64);
            (step, dead)
        };
        if matches!(step, Step::Warm(_)) || !dead.is_empty() || !evicted.is_empty() {
            self.rewarm.notify_one();
        }
        warm::log_dead(&dead);
        close_in_background(evicted);
        step
    }

    /// The lent session of `key`, when there is one and no call has it; else the tap of the
    /// one lent, if any.
    fn lent(&self, key: &PoolKey) -> Result<Step, Option<EventTx>> {
        let Some(home) = self.homes.lock().get(key).cloned() else { return Err(None) };
        match home.lend() {
            Some(session) => Ok(Step::Home(home, session)),
            None => Err(home.tap()),
        }
    }

    /// Takes the most recently used healthy idle session of `key` out of the pool.
    fn take_idle(&self, key: &PoolKey) -> Option<Session> {
        let mut state = self.state.lock();
        let pos = state.idle.iter().rposition(|e| &e.key == key && e.session.is_healthy())?;
        state.idle.remove(pos).map(|e| e.session)
    }

    /// Initialises `spare`, or a new session when there is none or it died meanwhile.
    async fn open(&self, capabilities: &Value, spare: Option<Spare>) -> Result<Session, UpstreamError> {
        let opened = &self.admission.metrics().opened;
        if let Some(spare) = spare {
            let pid = spare.pid();
            match self.transport.connect_spare(spare, capabilities).await {
                Ok(session) => {
                    opened.with_label_values(&["warm"]).inc();
                    return Ok(session);
                }
                Err(e) if e.is_dead() => {
                    tracing::warn!(pid, error = %e, "a warm upstream process failed its initialize; starting another");
                }
                Err(e) => return Err(e),
            }
        }
        let session = self.transport.connect(capabilities).await?;
        opened.with_label_values(&["cold"]).inc();
        Ok(session)
    }

    /// Removes idle sessions past the idle timeout or no longer healthy. Runs on every lease,
    /// so the usual case (nothing stale) only scans and allocates nothing.
    fn take_stale(&self) -> Vec<Session> {
        let ttl = self.settings().pool_idle_timeout;
        let now = Instant::now();
        let mut state = self.state.lock();
        let fresh = |e: &Idle| e.session.is_healthy() && now.duration_since(e.since) < ttl;
        if state.idle.iter().all(fresh) {
            return Vec::new();
        }
        let (keep, stale): (VecDeque<_>, VecDeque<_>) = state.idle.drain(..).partition(|e| fresh(e));
        state.idle = keep;
        stale.into_iter().map(|e| e.session).collect()
    }

    /// Closes idle sessions that expired or became unhealthy, and wakes the refill when any did.
    fn evict_idle(&self) {
        let stale = self.take_stale();
        if !stale.is_empty() {
            self.rewarm.notify_one();
        }
        close_in_background(stale);
    }

    fn release(&self, key: PoolKey, session: Session, poisoned: bool, winding: bool) {
        let retire = poisoned || !session.is_healthy();
        {
            let mut state = self.state.lock();
            state.leased -= 1;
            if winding {
                if let Some(pos) = state.winding.iter().position(|k| k == &key) {
                    state.winding.swap_remove(pos);
                }
            }
            if !retire {
                let since = Instant::now();
                state.idle.push_back(Idle { key, session: session.clone(), since });
            }
        }
        if winding {
            // Back idle, or retired: either way a waiter decides again.
            self.wound.notify_waiters();
        }
        if retire {
            self.rewarm.notify_one();
            close_in_background(vec![session]);
        }
    }
}

// === impl State ===

impl State {
    /// Sessions and processes counted against `pool_max_sessions`.
    fn total(&self) -> usize {
        self.idle.len() + self.leased + self.starting + self.warm.len()
    }

    /// The oldest warm process still alive, and the dead ones met on the way.
    fn take_warm(&mut self) -> (Option<Spare>, Vec<Spare>) {
        let mut dead = Vec::new();
        while let Some(spare) = self.warm.pop_front() {
            if spare.is_alive() {
                return (Some(spare), dead);
            }
            self.warm_died += 1;
            dead.push(spare);
        }
        (None, dead)
    }
}

impl Drop for Starting<'_> {
    fn drop(&mut self) {
        self.0.state.lock().starting -= 1;
        // A failed start freed room a warm process may take.
        self.0.rewarm.notify_one();
    }
}

/// DELETEs sessions without making the caller wait; outside a runtime they are just dropped
/// (which still stops their GET streams).
fn close_in_background(sessions: Vec<Session>) {
    if sessions.is_empty() {
        return;
    }
    let Ok(handle) = tokio::runtime::Handle::try_current() else {
        return;
    };
    handle.spawn(async move {
        for session in sessions {
            if let Err(e) = tokio::time::timeout(CLOSE_TIMEOUT, session.close())
                .await
                .unwrap_or(Err(UpstreamError::Timeout(CLOSE_TIMEOUT)))
            {
                tracing::debug!(error = %e, "closing an upstream session failed");
            }
        }
    });
}

/// Periodically closes expired idle sessions; ends with the pool.
async fn reap(pool: Weak<PoolInner>) {
    let period = match pool.upgrade() {
        Some(p) => {
            (p.settings().pool_idle_timeout / 2).clamp(Duration::from_millis(50), Duration::from_secs(30))
        }
        None => return,
    };
    loop {
        tokio::time::sleep(period).await;
        match pool.upgrade() {
            Some(p) => p.evict_idle(),
            None => return,
        };
    }
}

// === impl Lease ===

impl Lease {
    /// The leased session.
    pub fn session(&self) -> &Session {
        &self.session
    }

    pub fn key(&self) -> &PoolKey {
        &self.key
    }

    /// Retires the session: it is removed from the pool and DELETEd in the background.
    pub fn poison(mut self) {
        self.poisoned = true;
    }

    /// Marks the lease as winding down (see the module doc): until it drops, a call of its key
    /// that finds no idle session waits for this one. A lent session is not pooled, so marking
    /// one changes nothing.
    pub fn wind_down(&mut self) {
        if self.home.is_none() && !self.winding {
            self.pool.state.lock().winding.push(self.key.clone());
            self.winding = true;
        }
    }
}

impl std::ops::Deref for Lease {
    type Target = Session;

    fn deref(&self) -> &Session {
        self.session()
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if self.tapped {
            self.session.set_tap(None);
        }
        // A clone of the handle goes back; this one is dropped with the lease.
        match &self.home {
            Some(home) => home.give_back(self.poisoned || !self.session.is_healthy()),
            None => self.pool.release(self.key.clone(), self.session.clone(), self.poisoned, self.winding),
        }
    }
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease").field("key", &self.key).finish_non_exhaustive()
    }
}
