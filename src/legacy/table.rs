//! The legacy sessions one replica relays: bounded in number, in all and per principal, each
//! ended once it has gone without a request or an open stream for the idle limit.
//!
//! The bound per principal (`legacy.max_sessions_per_principal`) keeps one client from taking
//! every place: past its share its `initialize` is refused while other principals still open
//! sessions. Places being filled (reservations) count against both bounds.
//!
//! The table is this replica's view only. A session opened elsewhere whose upstream is shared
//! is *adopted* on its first request here (it counts against the bound like any other); only
//! the replica that opened a session ends it upstream on expiry, so an adopted copy idling out
//! here never cuts a session another replica is still serving.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use http::HeaderValue;
use parking_lot::Mutex;
use prometheus::IntGauge;
use tokio::sync::watch;
use tokio::time::Instant;

use super::error::LegacyError;
use crate::mrtr::SessionClaims;

/// What carries a session upstream.
pub(super) enum Link {
    /// A transparent HTTP relay to a Streamable HTTP server: the session is the server's own.
    Http,
    /// A session driven through the upstream seam (stdio, HTTP+SSE).
    Seam(super::seam::SeamSession),
}

/// One relayed session.
pub(super) struct Entry {
    pub(super) claims: SessionClaims,
    pub(super) link: Link,
    /// True when this replica opened the session (and so ends it upstream on expiry).
    pub(super) owned: bool,
    active: AtomicUsize,
    last: Mutex<Instant>,
    ended: watch::Sender<bool>,
    /// The protocol version the client last named, for the requests the gateway sends on its
    /// own (the DELETE of an expired session).
    version: Mutex<Option<HeaderValue>>,
    /// GET streams on their way upstream, not yet answered ([`Entry::opening_stream`]).
    opening: watch::Sender<usize>,
}

/// Keeps its session from idling out while held (a request being relayed, a stream open).
pub(super) struct Active(Arc<Entry>);

/// A GET stream of the session on its way upstream: the session's later requests wait until it
/// is answered (or given up), see [`Entry::streams_opened`].
pub(super) struct Opening(Arc<Entry>);

/// A place in the table, taken before the upstream is asked for a session.
pub(super) struct Reservation {
    table: Arc<Table>,
    principal: String,
    used: bool,
}

#[derive(Default)]
struct State {
    sessions: HashMap<String, Arc<Entry>>,
    reserved: usize,
    /// Sessions and reservations of each principal that holds any (no entry at zero).
    held: HashMap<String, usize>,
}

/// The sessions of this replica.
pub(super) struct Table {
    state: Mutex<State>,
    max: usize,
    /// Most sessions and reservations of one principal.
    per_principal: usize,
    idle: Duration,
    gauge: IntGauge,
}

// === impl Entry ===

impl Entry {
    pub(super) fn new(claims: SessionClaims, link: Link, owned: bool) -> Arc<Self> {
        let (ended, _) = watch::channel(false);
        let (opening, _) = watch::channel(0);
        Arc::new(Self {
            claims,
            link,
            owned,
            active: AtomicUsize::new(0),
            last: Mutex::new(Instant::now()),
            ended,
            version: Mutex::new(None),
            opening,
        })
    }

    pub(super) fn set_version(&self, version: Option<HeaderValue>) {
        if version.is_some() {
            *self.version.lock() = version;
        }
    }

    pub(super) fn version(&self) -> Option<HeaderValue> {
        self.version.lock().clone()
    }

    pub(super) fn begin(self: &Arc<Self>) -> Active {
        self.active.fetch_add(1, Ordering::AcqRel);
        Active(self.clone())
    }

    /// Marks a GET stream of the session as on its way upstream until the guard drops.
    pub(super) fn opening_stream(self: &Arc<Self>) -> Opening {
        self.opening.send_modify(|n| *n += 1);
        Opening(self.clone())
    }

    /// Completes once no GET stream of the session is on its way upstream, or after `within`.
    /// A client opens its GET stream before the call whose server requests the upstream sends
    /// there (a Streamable HTTP server drops a request it has no stream for, and the call
    /// hangs); the stream may open upstream over a new connection while the call takes a
    /// pooled one, so without this wait the call could overtake it. An upstream slow to answer
    /// a GET delays the session's other requests by `within` at most.
    pub(super) async fn streams_opened(&self, within: Duration) {
        if *self.opening.borrow() == 0 {
            return;
        }
        let mut opening = self.opening.subscribe();
        // The sender lives as long as `self`, so the wait ends only when the count is zero.
        let _ = tokio::time::timeout(within, opening.wait_for(|n| *n == 0)).await;
    }

    /// Completes once the session has ended (deleted, expired or forgotten upstream).
    pub(super) fn ended(&self) -> watch::Receiver<bool> {
        self.ended.subscribe()
    }

    pub(super) fn is_ended(&self) -> bool {
        *self.ended.borrow()
    }

    fn end(&self) {
        self.ended.send_replace(true);
    }

    fn idle_since(&self, now: Instant) -> Option<Duration> {
        if self.active.load(Ordering::Acquire) > 0 {
            return None;
        }
        Some(now.saturating_duration_since(*self.last.lock()))
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        *self.0.last.lock() = Instant::now();
        self.0.active.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Drop for Opening {
    fn drop(&mut self) {
        self.0.opening.send_modify(|n| *n -= 1);
    }
}

// === impl Reservation ===

impl Reservation {
    /// Puts the new session in the reserved place and returns the table's entry for it (an
    /// earlier one, when two requests adopted the same session at once).
    pub(super) fn fill(mut self, entry: Arc<Entry>) -> Arc<Entry> {
        self.used = true;
        let mut state = self.table.state.lock();
        state.reserved -= 1;
        let kept = state.sessions.entry(entry.claims.handle.clone()).or_insert(entry.clone()).clone();
        if !Arc::ptr_eq(&kept, &entry) {
            // The table already held it: this reservation's place is given back.
            state.release(&self.principal);
        }
        self.table.gauge.set(state.sessions.len() as i64);
        kept
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if !self.used {
            let mut state = self.table.state.lock();
            state.reserved -= 1;
            state.release(&self.principal);
        }
    }
}

// === impl State ===

impl State {
    /// Takes a place of `principal`'s, or says it holds `max` already.
    fn hold(&mut self, principal: &str, max: usize) -> bool {
        let held = self.held.entry(principal.to_owned()).or_default();
        if *held >= max {
            return false;
        }
        *held += 1;
        true
    }

    /// Gives one of `principal`'s places back.
    fn release(&mut self, principal: &str) {
        if let Some(held) = self.held.get_mut(principal) {
            *held -= 1;
            if *held == 0 {
                self.held.remove(principal);
            }
        }
    }

    fn forget(&mut self, handle: &str) -> Option<Arc<Entry>> {
        let entry = self.sessions.remove(handle)?;
        self.release(&entry.claims.principal);
        Some(entry)
    }
}

// === impl Table ===

impl Table {
    pub(super) fn new(max: usize, per_principal: usize, idle: Duration, gauge: IntGauge) -> Arc<Self> {
        Arc::new(Self { state: Mutex::new(State::default()), max, per_principal, idle, gauge })
    }

    /// Takes a place for a new session of `principal`, or refuses when the table is full or
    /// the principal holds its share.
    pub(super) fn reserve(self: &Arc<Self>, principal: &str) -> Result<Reservation, LegacyError> {
        let mut state = self.state.lock();
        if state.sessions.len() + state.reserved >= self.max {
            return Err(LegacyError::TooManySessions(self.max));
        }
        if !state.hold(principal, self.per_principal) {
            return Err(LegacyError::PrincipalShare(self.per_principal));
        }
        state.reserved += 1;
        Ok(Reservation { table: self.clone(), principal: principal.to_owned(), used: false })
    }

    /// The session named by `claims`; a shared one opened elsewhere is adopted with `adopt`.
    pub(super) fn find_or_adopt(
        self: &Arc<Self>,
        claims: SessionClaims,
        adopt: impl FnOnce(SessionClaims) -> Option<Link>,
    ) -> Result<Arc<Entry>, LegacyError> {
        if let Some(entry) = self.state.lock().sessions.get(&claims.handle) {
            return Ok(entry.clone());
        }
        let reservation = self.reserve(&claims.principal)?;
        let link = adopt(claims.clone()).ok_or(LegacyError::NotHere)?;
        Ok(reservation.fill(Entry::new(claims, link, false)))
    }

    /// Forgets a session and ends its streams; `None` if it was not here.
    pub(super) fn remove(&self, handle: &str) -> Option<Arc<Entry>> {
        let mut state = self.state.lock();
        let entry = state.forget(handle)?;
        self.gauge.set(state.sessions.len() as i64);
        drop(state);
        entry.end();
        Some(entry)
    }

    /// Forgets every session idle past the limit and returns them.
    fn expire(&self, now: Instant) -> Vec<Arc<Entry>> {
        let mut state = self.state.lock();
        let expired: Vec<String> = state
            .sessions
            .iter()
            .filter(|(_, e)| e.idle_since(now).is_some_and(|d| d >= self.idle))
            .map(|(h, _)| h.clone())
            .collect();
        let out: Vec<_> = expired.iter().filter_map(|h| state.forget(h)).collect();
        self.gauge.set(state.sessions.len() as i64);
        drop(state);
        out.iter().for_each(|e| e.end());
        out
    }

    /// Every session, forgotten (at shutdown).
    pub(super) fn drain(&self) -> Vec<Arc<Entry>> {
        let mut state = self.state.lock();
        let out: Vec<_> = state.sessions.drain().map(|(_, e)| e).collect();
        out.iter().for_each(|e| state.release(&e.claims.principal));
        self.gauge.set(0);
        drop(state);
        out.iter().for_each(|e| e.end());
        out
    }

    /// Sessions held now (the gauge says the same to operators).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.state.lock().sessions.len()
    }

    /// How often the reaper looks: a quarter of the idle limit, within [100 ms, 30 s].
    fn sweep_every(&self) -> Duration {
        (self.idle / 4).clamp(Duration::from_millis(100), Duration::from_secs(30))
    }
}

/// Ends expired sessions until the table is dropped; `end` ends one upstream.
pub(super) async fn reap<F, Fut>(table: Weak<Table>, end: F)
where
    F: Fn(Arc<Entry>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let Some(every) = table.upgrade().map(|t| t.sweep_every()) else { return };
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(table) = table.upgrade() else { return };
        let expired = table.expire(Instant::now());
        drop(table);
        for entry in expired {
            tracing::info!(session = %entry.claims.handle, owned = entry.owned, "legacy session idled out");
            if entry.owned {
                end(entry).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mrtr::Reach;

    fn claims() -> SessionClaims {
        claims_of("p")
    }

    fn claims_of(principal: &str) -> SessionClaims {
        SessionClaims::new(Some("u".into()), Reach::Shared, principal, 0)
    }

    fn table(max: usize) -> Arc<Table> {
        shared_table(max, max)
    }

    fn shared_table(max: usize, per_principal: usize) -> Arc<Table> {
        Table::new(max, per_principal, Duration::from_secs(10), IntGauge::new("g", "g").unwrap())
    }

    #[test]
    fn the_reaper_looks_four_times_per_idle_limit_within_its_bounds() {
        let every = |idle| Table::new(1, 1, idle, IntGauge::new("g", "g").unwrap()).sweep_every();
        assert_eq!(every(Duration::from_secs(2)), Duration::from_millis(500));
        assert_eq!(every(Duration::from_millis(200)), Duration::from_millis(100));
        assert_eq!(every(Duration::from_secs(600)), Duration::from_secs(30));
    }

    /// The session's protocol version is the last one a request named; a request that names
    /// none (a GET, say) keeps it, so that ending the session upstream can name it.
    #[test]
    fn a_session_keeps_the_last_version_a_request_named() {
        let entry = Entry::new(claims(), Link::Http, true);
        assert_eq!(entry.version(), None);
        entry.set_version(Some(HeaderValue::from_static("2025-03-26")));
        entry.set_version(Some(HeaderValue::from_static("2025-06-18")));
        entry.set_version(None);
        assert_eq!(entry.version(), Some(HeaderValue::from_static("2025-06-18")));
    }

    /// A request waits for the session's GET streams on their way upstream: until the last
    /// is answered, or for its bound when one never is; with none opening, not at all.
    #[tokio::test(start_paused = true)]
    async fn a_request_waits_for_the_streams_being_opened_within_its_bound() {
        let within = Duration::from_secs(1);
        let entry = Entry::new(claims(), Link::Http, true);
        let start = Instant::now();
        entry.streams_opened(within).await;
        assert_eq!(start.elapsed(), Duration::ZERO, "nothing opening");

        let (first, second) = (entry.opening_stream(), entry.opening_stream());
        let waiter = tokio::spawn({
            let entry = entry.clone();
            async move {
                entry.streams_opened(within).await;
                Instant::now()
            }
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
        drop(first);
        tokio::time::sleep(Duration::from_millis(100)).await;
        drop(second);
        let done = waiter.await.unwrap();
        assert_eq!(done - start, Duration::from_millis(300), "until the last stream is answered");

        let _stuck = entry.opening_stream();
        let start = Instant::now();
        entry.streams_opened(within).await;
        assert_eq!(start.elapsed(), within, "a stream never answered");
    }

    #[test]
    fn the_bound_counts_reservations_and_sessions() {
        let t = table(2);
        let r1 = t.reserve("p").unwrap();
        let _r2 = t.reserve("p").unwrap();
        assert!(matches!(t.reserve("p"), Err(LegacyError::TooManySessions(2))));
        let _ = r1.fill(Entry::new(claims(), Link::Http, true));
        assert!(t.reserve("p").is_err());
        drop(_r2);
        assert!(t.reserve("p").is_ok());
        assert_eq!(t.len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_principal_past_its_share_is_refused_while_another_is_served() {
        let t = shared_table(4, 2);
        let (a1, a2) = (claims_of("alice"), claims_of("alice"));
        let _ = t.reserve("alice").unwrap().fill(Entry::new(a1.clone(), Link::Http, true));
        let pending = t.reserve("alice").unwrap();
        assert!(matches!(t.reserve("alice"), Err(LegacyError::PrincipalShare(2))), "a reservation counts");
        assert!(matches!(
            t.find_or_adopt(claims_of("alice"), |_| Some(Link::Http)),
            Err(LegacyError::PrincipalShare(2))
        ));
        let _ = t.reserve("bob").unwrap().fill(Entry::new(claims_of("bob"), Link::Http, true));
        drop(pending);
        let kept = t.reserve("alice").unwrap().fill(Entry::new(a2.clone(), Link::Http, true));
        assert!(t.reserve("alice").is_err());
        // A place comes back when its session ends: deleted, or idled out.
        assert!(t.remove(&kept.claims.handle).is_some());
        let _ = t.reserve("alice").unwrap().fill(Entry::new(claims_of("alice"), Link::Http, true));
        tokio::time::advance(Duration::from_secs(11)).await;
        assert_eq!(t.expire(Instant::now()).len(), 3);
        assert!(t.state.lock().held.is_empty(), "no count outlives its sessions");
        let _r = t.reserve("alice").unwrap();
        let _s = t.reserve("alice").unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn only_idle_sessions_expire_and_removal_ends_streams() {
        let t = table(4);
        let (idle, busy) = (Entry::new(claims(), Link::Http, true), Entry::new(claims(), Link::Http, true));
        let _ = t.reserve("p").unwrap().fill(idle.clone());
        let _ = t.reserve("p").unwrap().fill(busy.clone());
        let _held = busy.begin();
        let mut ended = idle.ended();
        tokio::time::advance(Duration::from_secs(11)).await;
        let expired = t.expire(Instant::now());
        assert_eq!(expired.len(), 1);
        assert_eq!(expired[0].claims.handle, idle.claims.handle);
        ended.changed().await.unwrap();
        assert!(idle.is_ended() && !busy.is_ended());
        assert!(t.remove(&busy.claims.handle).is_some());
        assert!(busy.is_ended());
        assert_eq!(t.len(), 0);
    }

    #[test]
    fn adoption_refuses_a_local_session_from_elsewhere() {
        let t = table(4);
        let r = t.find_or_adopt(claims(), |_| None);
        assert!(matches!(r, Err(LegacyError::NotHere)));
        assert_eq!(t.len(), 0);
        let adopted = t.find_or_adopt(claims(), |_| Some(Link::Http)).unwrap();
        assert!(!adopted.owned);
        assert_eq!(t.len(), 1);
    }
}
