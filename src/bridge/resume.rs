//! Park mode in the bridge: parking a call at the end of its round, and continuing it when the
//! retry comes: the upstream call keeps running on this replica between rounds, so nothing of it
//! runs twice (docs/src/park-mode.md).
//!
//! A round that parks seals a state with a [`ParkHandle`] and leaves the call running in the
//! [`ParkRegistry`]. The retry that finds it there answers the parked server requests from the
//! client's responses (through the same journal and replay cursor a replay would use, so the
//! answers are validated and translated alike) and goes on reading the same upstream call:
//! nothing is run twice. A retry that cannot find its call replays from the journal, which the
//! state still carries in full; one that finds it already answered is refused.

use std::sync::Arc;

use super::owner::Forwarded;
use super::park::{self, Found, ParkOutcome, ParkRegistry, Parked};
use super::round::{raw_value, respond, Live, Run, ASKED_REASON};
use super::{MrtrRequest, Notes, Reply};
use crate::error::FrontError;
use crate::mrtr::{Decision, Journal, LegacyVersion, ParkHandle, RoundOutcome};
use crate::protocol::methods;

// === impl Run ===

impl Run<'_> {
    /// Parks the call of a round that ended with `outcome`; when the registry is full the
    /// round ends as in replay mode (the call is cancelled, the state replays it).
    pub(super) async fn park(
        &self,
        parks: &Arc<ParkRegistry>,
        parked: Box<Parked>,
        outcome: RoundOutcome,
    ) -> Result<Reply, FrontError> {
        let handle = ParkHandle::new(&self.bridge.advertise);
        if let Err((parked, why)) = parks.park(handle.call, parked) {
            parks.count_unparked(why);
            park::cancel(*parked, ASKED_REASON).await;
            return self.seal_outcome(outcome, None);
        }
        match self.seal_outcome(outcome, Some(&handle)) {
            Ok(reply) => {
                tracing::debug!(call = %handle.call, "round ended with its call parked");
                parks.count(ParkOutcome::Parked);
                Ok(reply)
            }
            Err(e) => {
                if let Found::Parked(parked) = parks.take(handle.call) {
                    park::cancel(*parked, &e.to_string()).await;
                }
                Err(e)
            }
        }
    }

    /// Continues a parked call with the retry's journal (its responses accepted): answers the
    /// parked requests it can, asks the others again, and drives the call on.
    pub(super) async fn resume(mut self, parked: Parked, journal: Journal) -> Result<Reply, FrontError> {
        let Parked { guard, mut replay, open: waiting, tainted } = parked;
        self.tainted = tainted;
        self.resumed = true;
        replay.resume(journal);
        let session = guard.session().clone();
        let now = self.bridge.clock.now();
        let mut open = Vec::new();
        for question in waiting {
            match replay.redecide(&question.pending, &question.method, question.params.as_ref()) {
                Ok(Decision::Answer(raw)) => {
                    self.tainted |= question.method == methods::ROOTS_LIST;
                    respond(&session, &question.id, Ok(raw_value(&raw))).await;
                }
                Ok(Decision::Ask { .. }) => {
                    open.push(question.id.clone());
                    self.waiting.push(question);
                }
                Err(e) => {
                    // It was asked once under the same bounds; it fits again.
                    tracing::warn!(error = %e, "a parked question could not be asked again");
                    return Err(FrontError::internal(e));
                }
            }
        }
        let mut gather = None;
        if !open.is_empty() {
            self.heard(&mut gather, &open, now);
        }
        self.drive(Box::new(Live { session, guard, replay, open, gather, started: now })).await
    }
}

// === impl Bridge ===

impl super::Bridge {
    /// Takes the call a retry's state names out of this replica's registry.
    pub(super) fn find_parked(&self, handle: &ParkHandle) -> Found {
        match &self.parks {
            Some(parks) => parks.take(handle.call),
            None => Found::Unknown,
        }
    }

    /// Forwards a retry to the replica that parked its call, when that is another one and
    /// `[cluster]` is configured; `None`: it cannot answer, replay here.
    pub(super) async fn forward_to_owner(
        &self,
        handle: &ParkHandle,
        req: &MrtrRequest,
        notes: Option<&Notes>,
    ) -> Option<Result<Reply, FrontError>> {
        let forwarder = self.forwarder.as_ref()?;
        if handle.is_local_to(&self.advertise) {
            return None;
        }
        let state = req.state.as_deref()?;
        match forwarder.forward(&handle.owner, req, state, notes).await {
            Forwarded::Served(reply) => {
                self.count_park(ParkOutcome::Forwarded);
                Some(reply)
            }
            Forwarded::NotHeld => {
                tracing::info!(owner = %handle.owner, call = %handle.call, "the owner no longer holds the parked call");
                None
            }
            Forwarded::Failed(e) => {
                tracing::warn!(owner = %handle.owner, call = %handle.call, error = %e, "could not forward a retry to the owner of its parked call");
                None
            }
        }
    }

    pub(super) fn count_park(&self, outcome: ParkOutcome) {
        self.metrics.park_outcomes.with_label_values(&[outcome.label()]).inc();
    }

    /// Accepts the retry's responses for the parked call and continues it. Invalid responses
    /// leave the call parked (under the same id), so a corrected retry can still reach it.
    pub(super) async fn resume(
        &self,
        run: Run<'_>,
        handle: &ParkHandle,
        parked: Box<Parked>,
        journal: Journal,
    ) -> Result<Reply, FrontError> {
        let version = LegacyVersion::parse(parked.guard.session().protocol_version())
            .ok_or_else(|| FrontError::internal("upstream negotiated an unknown version"));
        let accepted = version.and_then(|v| self.accept(journal, run.req.responses.as_ref(), v));
        let parks =
            self.parks.as_ref().ok_or_else(|| FrontError::internal("a call parked without a registry"))?;
        match accepted {
            Ok(journal) => {
                parks.answered(handle.call);
                self.count_park(ParkOutcome::Resumed);
                run.resume(*parked, journal).await
            }
            Err(e) => {
                if let Err((parked, _)) = parks.park(handle.call, parked) {
                    park::cancel(*parked, ASKED_REASON).await;
                }
                Err(e)
            }
        }
    }
}
