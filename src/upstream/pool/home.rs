//! Sessions a long-lived holder lends back to its key's calls.
//!
//! The `subscriptions/listen` bridge keeps one session per key outside the pool, for as long as
//! the key has listen streams. Many legacy servers tie what they notify to the session that
//! caused it: `server-everything`'s simulated resource updates, for one, reach only the session
//! that turned them on, and a per-session server tells a subscribed session of that session's
//! own changes only. A legacy client does everything on one session, so it hears of what its
//! calls changed; through a pool, the calls would run on other sessions and the listen streams
//! would hear nothing. So while the holder keeps its session *lent* ([`Lending`]), a call of that
//! key leases it first whenever no other call has it, and the pool's sessions otherwise.
//!
//! When the call runs on a pooled session instead (another call has the lent one), the list
//! changes that session hears are tapped into the lent session's listen queue for as long as the
//! lease lasts; resource updates are not, since a pooled session subscribes to nothing.
//!
//! The lease is exclusive as any other, so the server's requests on it still go to that one
//! call. A call that poisons it (it learned a client's roots, or it failed) ends the lending,
//! not the session: the holder keeps listening on it. A holder that withdraws the session while
//! a call has it leaves the close to that call's lease, so the call is never cut short.

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use super::{close_in_background, PoolInner, PoolKey};
use crate::upstream::event::EventTx;
use crate::upstream::Session;

/// The lent sessions of a pool, at most one per key.
pub(super) type Homes = Mutex<HashMap<PoolKey, Arc<Home>>>;

/// One lent session and who has it.
pub(super) struct Home {
    session: Session,
    /// Its listen queue: the list changes the key's pooled sessions hear while it is lent go
    /// there too, since the call that changed a list may have run on one of them.
    tap: Option<EventTx>,
    state: Mutex<Lent>,
}

#[derive(Default)]
struct Lent {
    /// A call holds it now.
    busy: bool,
    /// A call poisoned it: no more calls get it.
    retired: bool,
    /// The holder took it back; a call still holding it closes it.
    withdrawn: bool,
}

/// The holder's side of a lent session; dropping it withdraws the session.
pub struct Lending {
    home: Arc<Home>,
    key: PoolKey,
    pool: Weak<PoolInner>,
}

// === impl Home ===

impl Home {
    /// The session for one call, unless a call has it, it was retired or withdrawn, or it is
    /// no longer healthy.
    pub(super) fn lend(&self) -> Option<Session> {
        let mut lent = self.state.lock();
        if lent.busy || lent.retired || lent.withdrawn || !self.session.is_healthy() {
            return None;
        }
        lent.busy = true;
        Some(self.session.clone())
    }

    pub(super) fn tap(&self) -> Option<EventTx> {
        self.tap.clone()
    }

    /// A call's lease ended; `poisoned` retires the session from calls.
    pub(super) fn give_back(&self, poisoned: bool) {
        let close = {
            let mut lent = self.state.lock();
            lent.busy = false;
            lent.retired |= poisoned;
            lent.withdrawn
        };
        if close {
            close_in_background(vec![self.session.clone()]);
        }
    }

    /// Ends the lending; true when no call holds the session, so the holder closes it itself.
    fn withdraw(&self) -> bool {
        let mut lent = self.state.lock();
        lent.withdrawn = true;
        !lent.busy
    }
}

// === impl Lending ===

impl Lending {
    /// Lends `session` to the calls of `key` of `pool`, in place of any earlier lending of it.
    pub(super) fn start(pool: &Arc<PoolInner>, key: PoolKey, session: Session) -> Self {
        let tap = session.listener();
        let home = Arc::new(Home { session, tap, state: Mutex::new(Lent::default()) });
        pool.homes.lock().insert(key.clone(), home.clone());
        Self { home, key, pool: Arc::downgrade(pool) }
    }

    /// Takes the session back from the calls. True when the holder may close it now; false when
    /// a call holds it, whose lease then closes it as it ends.
    pub fn withdraw(self) -> bool {
        self.end()
    }

    fn end(&self) -> bool {
        if let Some(pool) = self.pool.upgrade() {
            let mut homes = pool.homes.lock();
            if homes.get(&self.key).is_some_and(|h| Arc::ptr_eq(h, &self.home)) {
                homes.remove(&self.key);
            }
        }
        self.home.withdraw()
    }
}

impl Drop for Lending {
    fn drop(&mut self) {
        self.end();
    }
}

impl std::fmt::Debug for Lending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lending").field("key", &self.key).finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::super::warm::tests::{named, sh_pool};

    /// A call that found the lent session just before its holder withdrew it gets nothing from
    /// it: the call then takes a pooled session, and the holder closes its own.
    #[tokio::test]
    async fn a_session_withdrawn_after_a_call_found_it_is_lent_to_no_call() {
        let pool = sh_pool(2, Duration::from_secs(60));
        let held = pool.take_unpooled(&named("a"), &json!({})).await.unwrap();
        let lending = pool.lend(&named("a"), held);
        let found = pool.inner.homes.lock().get(&named("a")).cloned().expect("the lent session");
        assert!(lending.withdraw(), "no call holds it");
        assert!(found.lend().is_none(), "withdrawn, it is lent to no call");
        pool.close_idle().await;
    }
}
