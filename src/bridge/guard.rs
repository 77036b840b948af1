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
