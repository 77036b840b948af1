//! Keeps an upstream call honest when the front request goes away: if the run is dropped
//! before the call ended (the client closed its connection, which 2026-07-28 defines as
//! cancellation), the upstream is told with `notifications/cancelled` and the session is
//! released. A legacy server does not read a disconnect as a cancel, so this must be explicit.
//! A replayed round's call is ended the same way, but after its reply ([`CallGuard::wind_down`]):
//! the two upstream exchanges are no longer part of the round the client waits for.

use tokio::time::Instant;

use super::round::refuse_all;
use crate::protocol::RequestId;
use crate::upstream::{Call, Lease, Session, UpstreamError, UpstreamEvent};

const DROPPED: &str = "the client went away";

/// A leased session with its call in flight.
pub(super) struct CallGuard {
    lease: Option<Lease>,
    call: Option<Call>,
}

// === impl CallGuard ===

impl CallGuard {
    pub(super) fn new(lease: Lease, call: Call) -> Self {
        Self { lease: Some(lease), call: Some(call) }
    }

    /// The leased session. A guard always holds its lease until it is consumed.
    pub(super) fn session(&self) -> &Session {
        match &self.lease {
            Some(lease) => lease.session(),
            None => unreachable!("a CallGuard holds its lease until it is consumed"),
        }
    }

    /// The principal whose pool key the lease is of.
    pub(super) fn principal(&self) -> &std::sync::Arc<str> {
        match &self.lease {
            Some(lease) => &lease.key().0,
            None => unreachable!("a CallGuard holds its lease until it is consumed"),
        }
    }

    /// The next event of the call; `Ok(None)` once it has ended.
    pub(super) async fn next_event(&mut self) -> Result<Option<UpstreamEvent>, UpstreamError> {
        match self.call.as_mut() {
            Some(call) => call.next_event().await,
            None => Ok(None),
        }
    }

    /// The next event of the call, or `None` once `limit` has passed first (see
    /// [`Call::next_event_within`]).
    pub(super) async fn next_event_within(
        &mut self,
        limit: Instant,
    ) -> Option<Result<Option<UpstreamEvent>, UpstreamError>> {
        match self.call.as_mut() {
            Some(call) => call.next_event_within(limit).await,
            None => Some(Ok(None)),
        }
    }

    /// Keeps the call's stream read while nobody polls it (see [`Call::detach`]).
    pub(super) fn detach(&mut self) {
        if let Some(call) = self.call.as_mut() {
            call.detach();
        }
    }

    /// Issues the call again on the same session, after the last one ended upstream.
    pub(super) fn restart(&mut self, call: Call) {
        self.call = Some(call);
    }

    /// The call finished upstream: release the session for reuse.
    pub(super) fn finished(mut self) {
        self.call = None;
        self.lease = None;
    }

    /// Cancels the call upstream and returns the lease, so pending requests can still be answered.
    pub(super) async fn cancel(self, reason: &str) -> Option<Lease> {
        let (lease, call) = self.into_parts()?;
        cancel_call(&lease, call, reason).await;
        Some(lease)
    }

    /// Cancels the call and refuses `open` upstream, in that order, then releases the session,
    /// or retires it when `retire` is set (it learned the client's roots).
    pub(super) async fn end(self, open: &[RequestId], reason: &str, retire: bool) {
        let Some((lease, call)) = self.into_parts() else { return };
        tell_end(&lease, call, open, reason).await;
        if retire {
            lease.poison();
        }
    }

    /// [`CallGuard::end`], after the client had its reply: the lease,
    /// marked as winding down (so the key's next call waits for this session rather than
    /// opening one), returns to the pool when both were sent, or is retired when that takes
    /// longer than [`crate::defaults::WIND_DOWN`] or `retire` is set. In order: a server that
    /// honours the cancel never sees the refusal reach the tool.
    pub(super) fn wind_down(self, open: Vec<RequestId>, reason: &'static str, retire: bool) {
        let Some((mut lease, call)) = self.into_parts() else { return };
        if !retire {
            // A session that will be retired is not worth waiting for.
            lease.wind_down();
        }
        let ended = async move {
            let told =
                tokio::time::timeout(crate::defaults::WIND_DOWN, tell_end(&lease, call, &open, reason));
            if told.await.is_err() {
                tracing::warn!(after = ?crate::defaults::WIND_DOWN, "the upstream took too long to take a round's cancel; its session is retired");
                lease.poison();
            } else if retire {
                lease.poison();
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => drop(rt.spawn(ended)),
            Err(_) => tracing::debug!("no runtime to end an upstream call on"),
        }
    }

    /// The lease and the call, taken out for a caller that ends the call itself.
    fn into_parts(mut self) -> Option<(Lease, Option<Call>)> {
        let lease = self.lease.take()?;
        Some((lease, self.call.take()))
    }

    /// Cancels the call and evicts the session (it may be wedged).
    pub(super) async fn poison_after_cancel(self, reason: &str) {
        if let Some(lease) = self.cancel(reason).await {
            lease.poison();
        }
    }

    /// The upstream failed: the session is not reused.
    pub(super) fn poison(mut self) {
        self.call = None;
        if let Some(lease) = self.lease.take() {
            lease.poison();
        }
    }
}

/// Tells the upstream the call ended: `notifications/cancelled`, then a refusal of each of its
/// open requests, so a server that honours the cancel never lets a refusal reach the tool.
async fn tell_end(lease: &Lease, call: Option<Call>, open: &[RequestId], reason: &str) {
    cancel_call(lease, call, reason).await;
    refuse_all(lease, open, reason).await;
}

async fn cancel_call(lease: &Lease, call: Option<Call>, reason: &str) {
    if let Some(call) = call {
        if let Err(e) = lease.session().cancel(call, reason).await {
            tracing::debug!(error = %e, "could not send notifications/cancelled upstream");
        }
    }
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        let (Some(lease), Some(call)) = (self.lease.take(), self.call.take()) else { return };
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let _ = lease.session().cancel(call, DROPPED).await;
                drop(lease);
            });
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::demo::{spawn_loopback, DemoHandle, DemoOptions};
    use crate::upstream::{Pool, UpstreamSettings};

    pub(in crate::bridge) fn upstream() -> (DemoHandle, Pool) {
        let demo = spawn_loopback(DemoOptions::default()).unwrap();
        let pool = Pool::new(UpstreamSettings::new(demo.url().parse().unwrap())).unwrap();
        (demo, pool)
    }

    /// A guard over a call of the demo's `greet` for principal `p`, which has asked the
    /// client's name (the id returned) and waits for the answer.
    pub(in crate::bridge) async fn asking_for(pool: &Pool, p: &str) -> (CallGuard, RequestId) {
        let lease = pool.lease((Arc::from(p), 0), &json!({"elicitation": {}})).await.unwrap();
        let mut call =
            lease.session().call_with("tools/call", Some(&json!({"name": "greet", "arguments": {}})));
        match call.next_event().await.unwrap() {
            Some(UpstreamEvent::Request { id, method, .. }) if method == "elicitation/create" => {
                (CallGuard::new(lease, call), id)
            }
            other => panic!("greet asks a question first, not {other:?}"),
        }
    }

    async fn asking(pool: &Pool) -> (CallGuard, RequestId) {
        asking_for(pool, "p").await
    }

    /// Waits until `done` holds, at most 5 s.
    pub(in crate::bridge) async fn until(what: &str, done: impl FnMut() -> bool) {
        crate::clock::eventually(what, Duration::from_secs(5), done).await
    }

    /// The demo took one cancel with `reason`, then the question's refusal (an error answer).
    async fn told_end(demo: &DemoHandle, reason: &str) {
        let s = &demo.stats;
        until("the cancel and the refusal arrive", || s.cancellations() == 1 && s.errors() == 1).await;
        assert_eq!((s.last_cancel_reason(), s.answers()), (reason.to_owned(), 0));
    }

    #[tokio::test]
    async fn ending_a_call_cancels_it_refuses_its_questions_and_keeps_or_retires_the_session() {
        let (demo, pool) = upstream();
        let (guard, asked) = asking(&pool).await;
        guard.end(&[asked], "the round ended", false).await;
        told_end(&demo, "the round ended").await;
        assert_eq!((pool.stats().idle, demo.stats.deletes()), (1, 0), "the session goes back to the pool");

        let (guard, asked) = asking(&pool).await;
        guard.end(&[asked], "roots were learnt", true).await;
        until("the retired session is deleted", || demo.stats.deletes() == 1).await;
        assert_eq!((pool.stats().idle, demo.stats.cancellations()), (0, 2));
    }

    #[tokio::test]
    async fn a_wound_down_call_is_ended_after_the_reply_and_its_key_waits_for_its_session() {
        let (demo, pool) = upstream();
        let (guard, asked) = asking(&pool).await;
        guard.wind_down(vec![asked], "replayed", false);
        // Leased before the wind-down ran: the key waits for the session winding down rather
        // than opening another.
        let lease = pool.lease((Arc::from("p"), 0), &json!({"elicitation": {}})).await.unwrap();
        told_end(&demo, "replayed").await;
        assert_eq!(demo.stats.initializes(), 1, "the winding session is reused");
        drop(lease);

        let (guard, asked) = asking(&pool).await;
        guard.wind_down(vec![asked], "replayed", true);
        until("the retired session is deleted", || demo.stats.deletes() == 1).await;
        assert_eq!(demo.stats.cancellations(), 2);
    }

    #[tokio::test]
    async fn a_dropped_guard_cancels_its_call_as_the_client_gone() {
        let (demo, pool) = upstream();
        let (guard, _asked) = asking(&pool).await;
        drop(guard);
        until("the cancel arrives", || demo.stats.cancellations() == 1).await;
        assert_eq!(demo.stats.last_cancel_reason(), DROPPED);
        until("the session is back", || pool.stats().idle == 1).await;
    }

    #[tokio::test]
    async fn a_cancel_hands_the_lease_back_and_a_poisoning_one_retires_it() {
        let (demo, pool) = upstream();
        let (guard, _asked) = asking(&pool).await;
        let lease = guard.cancel("timed out").await.expect("the guard held its lease");
        until("the cancel arrives", || demo.stats.cancellations() == 1).await;
        assert_eq!(demo.stats.last_cancel_reason(), "timed out");
        drop(lease);
        until("the session is back", || pool.stats().idle == 1).await;

        let (guard, _asked) = asking(&pool).await;
        guard.poison_after_cancel("wedged").await;
        until("the cancel arrives and the session is deleted", || {
            demo.stats.cancellations() == 2 && demo.stats.deletes() == 1
        })
        .await;
        assert_eq!((demo.stats.last_cancel_reason(), pool.stats().idle), ("wedged".to_owned(), 0));
    }
}
