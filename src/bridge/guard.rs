//! Keeps an upstream call honest when the front request goes away: if the run is dropped
//! before the call ended (the client closed its connection, which 2026-07-28 defines as
//! cancellation), the upstream is told with `notifications/cancelled` and the session is
//! released. A legacy server does not read a disconnect as a cancel, so this must be explicit.

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

    /// The next event of the call; `Ok(None)` once it has ended.
    pub(super) async fn next_event(&mut self) -> Result<Option<UpstreamEvent>, UpstreamError> {
        match self.call.as_mut() {
            Some(call) => call.next_event().await,
            None => Ok(None),
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
    pub(super) async fn cancel(mut self, reason: &str) -> Option<Lease> {
        let lease = self.lease.take()?;
        if let Some(call) = self.call.take() {
            if let Err(e) = lease.session().cancel(call, reason).await {
                tracing::debug!(error = %e, "could not send notifications/cancelled upstream");
            }
        }
        Some(lease)
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
