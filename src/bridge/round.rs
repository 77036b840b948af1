//! One run of a legacy call: the event loop that answers replayed questions from the journal,
//! gathers new ones, enforces the client's capabilities and the time bounds, and ends the round.

use std::sync::OnceLock;

use serde_json::value::RawValue;
use serde_json::Value;
use tokio::time::Instant;

use super::checks::Screened;
use super::gather::Gathering;
use super::guard::CallGuard;
use super::notes::{align_level, Notes};
use super::park::{OpenQuestion, Parked};
use super::{memory, url};
use super::{Bridge, MrtrRequest, Reply};
use crate::capabilities::ClientCaps;
use crate::clock::Clock;
use crate::error::{map_read_error, map_upstream_error, FrontError};
use crate::mrtr::{
    next_round, Binding, Decision, Journal, Offered, ParkHandle, Replay, ReplayError, RoundOutcome,
    StateCodec, UrlVerdict,
};
use crate::protocol::jsonrpc::{ErrorObject, Outcome};
use crate::protocol::methods::MrtrMethod;
use crate::protocol::{codes, methods, RequestId};
use crate::upstream::{Lease, Session, UpstreamError, UpstreamEvent};

pub(super) const ASKED_REASON: &str =
    "mrtr-gateway returned this request to its client as input_required; the call will be replayed";

/// Why a call is cancelled after one of its questions was refused.
const REFUSED_REASON: &str =
    "mrtr-gateway refused a question of this call (not valid MCP 2026-07-28, or asking for a secret)";

/// The state of one run.
pub(super) struct Run<'a> {
    pub bridge: &'a Bridge,
    /// Over the ring current when the request started.
    pub codec: StateCodec,
    pub req: &'a MrtrRequest,
    /// Filled when a state was opened, else on the first seal (see [`MrtrRequest::binding`]).
    pub binding: OnceLock<Binding>,
    /// Round of the incoming state (0 on a first call).
    pub round: u32,
    /// The request's stream for progress and log messages, when it has one.
    pub notes: Option<Notes>,
    /// The session was told the client's roots. Legacy servers cache roots per session (they
    /// expect `notifications/roots/list_changed`, which a 2026-07-28 client never sends), so such
    /// a session must not serve another request: it is evicted when the run ends.
    pub tainted: bool,
    /// The questions asked this round, kept for parking the call (see `park.rs`).
    pub waiting: Vec<OpenQuestion>,
    /// The call was parked before: its next round parks again whatever the mode, since it
    /// cannot be replayed from where it stands without running it again.
    pub resumed: bool,
    /// What the migration report learns of this run (a divergence).
    pub report: &'a super::report::ToolRun<'a>,
}

/// A call in flight, as the event loop takes it over.
pub(super) struct Live {
    pub session: Session,
    pub guard: CallGuard,
    pub replay: Replay,
    pub open: Vec<RequestId>,
    pub gather: Option<Gathering>,
    /// When the call (or its resumption) started, for the upstream duration.
    pub started: Instant,
}

/// What the loop decided about one event.
enum Step {
    Continue,
    /// The upstream answered the call.
    Finished(Outcome),
    /// End the front request with this error: cancel the call and refuse `open` upstream.
    Abort {
        refuse: RequestId,
        error: FrontError,
    },
    /// A question was refused by the schema checks or the sensitive-forms policy, and answered
    /// upstream: cancel the call, refuse `open` upstream, and reply this.
    Refused(Result<Reply, FrontError>),
}

/// Why the loop woke up without an event.
enum Wake {
    Gathered,
    Silent,
    Total,
}

// === impl Run ===

impl<'a> Run<'a> {
    pub(super) fn new(
        bridge: &'a Bridge,
        codec: StateCodec,
        req: &'a MrtrRequest,
        binding: OnceLock<Binding>,
        round: u32,
        notes: Option<Notes>,
        report: &'a super::report::ToolRun<'a>,
    ) -> Self {
        let (tainted, waiting, resumed) = (false, Vec::new(), false);
        Self { bridge, codec, req, binding, round, notes, tainted, waiting, resumed, report }
    }

    /// Runs the call on `lease` from its start, answering from `journal` and, for a request
    /// without a state, from the answers it `offered`.
    pub(super) async fn execute(
        self,
        lease: Lease,
        journal: Journal,
        offered: Option<Offered>,
    ) -> Result<Reply, FrontError> {
        let session = lease.session().clone();
        // Boxed like the other rare paths (it sends a request upstream only when the level
        // changes), and only for a request that asked for logs.
        if let Some(level) = self.notes.as_ref().and_then(|n| n.log_level) {
            Box::pin(align_level(&session, Some(level))).await;
        }
        let started = self.bridge.clock.now();
        let call = session.call_text(self.req.method.name(), &self.req.upstream_params);
        let guard = CallGuard::new(lease, call);
        let mut replay = Replay::new(journal, self.bridge.limits.max_questions_per_round);
        if let Some(offered) = offered {
            replay = replay.with_offered(offered);
        }
        self.drive(Box::new(Live { session, guard, replay, open: Vec::new(), gather: None, started })).await
    }

    /// The event loop of a call in flight, from its start or from where it was parked. `live`
    /// comes boxed: by value it would be laid out twice in this future (the argument's slot
    /// and its fields'), which lives as long as the call.
    pub(super) async fn drive(mut self, live: Box<Live>) -> Result<Reply, FrontError> {
        let limits = &self.bridge.limits;
        let clock = &self.bridge.clock;
        let total_deadline = clock.now() + limits.total_timeout;
        let Live { session, mut guard, mut replay, mut open, mut gather, started } = *live;
        let mut reissued = false;
        loop {
            let now = clock.now();
            let gathered = gather.map(|g| g.deadline(open.len(), limits.gather_idle));
            let (deadline, wake) = next_wake(gathered, now + limits.round_timeout, total_deadline);
            // An event already queued when the deadline passes is taken first (a response that
            // has arrived is not thrown away for a timeout), but a deadline that has passed
            // ends the loop before the next one, so a chatty upstream cannot starve it.
            // The round-ending paths (`on_wake`, `abort`) are boxed: they run once per round,
            // and inline they would make this future, which lives as long as the call, several
            // times larger.
            if now >= deadline {
                return Box::pin(self.on_wake(guard, replay, open, gather, wake)).await;
            }
            let Some(event) = next_event(clock, &mut guard, deadline).await else {
                return Box::pin(self.on_wake(guard, replay, open, gather, wake)).await;
            };
            let event = match event {
                Ok(Some(ev)) => ev,
                Ok(None) => return Err(failed(guard, "the upstream call ended without a response")),
                Err(e) => {
                    guard.poison();
                    return Err(e.into());
                }
            };
            let question = matches!(event, UpstreamEvent::Request { .. });
            match self.on_event(&session, &mut replay, &mut open, event).await {
                Step::Continue => {}
                Step::Finished(outcome) => {
                    self.bridge.metrics.observe_upstream(
                        self.req.method.name(),
                        clock.now().saturating_duration_since(started),
                    );
                    if let Some(reply) = self.url_refusal(&outcome) {
                        return self.settle(guard, reply);
                    }
                    match self.url_verdict(&outcome, &mut replay, reissued) {
                        None => return self.settle(guard, complete(outcome, self.req)),
                        Some(Ok(UrlVerdict::Reissue)) => {
                            // The client did what the error asked: the call goes again, once.
                            replay.restart();
                            reissued = true;
                            guard.restart(
                                session.call_text(self.req.method.name(), &self.req.upstream_params),
                            );
                        }
                        Some(Ok(UrlVerdict::Ask)) => {
                            return self.settle(guard, Ok(())).and_then(|()| self.seal(replay))
                        }
                        Some(Ok(UrlVerdict::Refused)) => return self.settle(guard, Err(url::refused())),
                        Some(Err(e)) => return self.settle(guard, Err(e)),
                    }
                }
                Step::Abort { refuse, error } => {
                    open.push(refuse);
                    return Err(Box::pin(self.abort(guard, &open, error)).await);
                }
                Step::Refused(reply) => {
                    // Boxed like the other round-ending paths: inline, ending the call upstream
                    // would size the future of every call.
                    Box::pin(guard.end(&open, REFUSED_REASON, self.tainted)).await;
                    return reply;
                }
            }
            if question {
                self.heard(&mut gather, &open, clock.now());
            }
        }
    }

    /// A question arrived at `now`: the first unanswered one starts gathering, later ones
    /// restart the idle gap.
    pub(super) fn heard(&self, gather: &mut Option<Gathering>, open: &[RequestId], now: Instant) {
        match gather {
            Some(g) => {
                tracing::debug!(
                    open = open.len(),
                    since_last_us = micros(now - g.last()),
                    "question gathered"
                );
                g.heard(now);
            }
            None if !open.is_empty() => {
                let expected = self.bridge.memory.expected(&self.memory_key(), self.round);
                tracing::debug!(?expected, "first unanswered question: gathering");
                *gather = Some(Gathering::start(now, self.bridge.limits.gather_window, expected));
            }
            None => {}
        }
    }

    fn memory_key(&self) -> String {
        memory::key(self.req.method.name(), &self.req.target)
    }

    /// A deadline passed: the gather window ends the round, the others end the call.
    async fn on_wake(
        &mut self,
        guard: CallGuard,
        replay: Replay,
        open: Vec<RequestId>,
        gather: Option<Gathering>,
        wake: Wake,
    ) -> Result<Reply, FrontError> {
        match wake {
            Wake::Gathered => {
                let expected = gather.and_then(Gathering::expected);
                self.bridge.memory.record(&self.memory_key(), self.round, open.len(), expected);
                self.end_round(guard, replay, open).await
            }
            Wake::Silent | Wake::Total => Err(self.timed_out(guard, wake).await),
        }
    }

    async fn on_event(
        &mut self,
        session: &Session,
        replay: &mut Replay,
        open: &mut Vec<RequestId>,
        event: UpstreamEvent,
    ) -> Step {
        match event {
            UpstreamEvent::Request { id, method, params } => {
                self.on_request(session, replay, open, id, &method, params.as_ref()).await
            }
            UpstreamEvent::Notification { method, params } => {
                self.on_notification(&method, params).await;
                Step::Continue
            }
            UpstreamEvent::Response(outcome) => Step::Finished(outcome),
        }
    }

    async fn on_request(
        &mut self,
        session: &Session,
        replay: &mut Replay,
        open: &mut Vec<RequestId>,
        id: RequestId,
        method: &str,
        params: Option<&Value>,
    ) -> Step {
        if open.contains(&id) {
            // Two open requests with one id cannot be answered apart: the answer to one would
            // reach the other. The upstream broke JSON-RPC; end the call rather than guess.
            let what = "the upstream sent two requests with the same id".to_owned();
            return Step::Abort { refuse: id, error: UpstreamError::Protocol(what).into() };
        }
        if !methods::is_input_method(method) {
            let e = error(codes::METHOD_NOT_FOUND, format!("{method} is not supported by mrtr-gateway"));
            respond(session, &id, Err(e)).await;
            return Step::Continue;
        }
        let required = match ClientCaps::required_for(method, params) {
            Ok(r) => r,
            Err(e) => {
                respond(session, &id, Err(error(codes::INVALID_PARAMS, e.to_string()))).await;
                return Step::Continue;
            }
        };
        if let Some(missing) = self.req.caps.missing(&required) {
            // An `inputRequests` the client cannot serve must never be sent: fail with -32021.
            let label = crate::capabilities::label(method);
            self.bridge.metrics.capability_denials.with_label_values(&[label]).inc();
            return Step::Abort { refuse: id, error: FrontError::MissingCapability { required: missing } };
        }
        let checked = crate::schema::question::check(method, params);
        if let Screened::End(reply) = self.screen(session, &id, &checked).await {
            return Step::Refused(reply);
        }
        let params = checked.repaired.as_ref().or(params);
        match replay.decide(method, params) {
            Ok(Decision::Answer(raw)) => {
                self.tainted |= method == methods::ROOTS_LIST;
                respond(session, &id, Ok(raw_value(&raw))).await;
            }
            Ok(Decision::Ask { key }) => {
                self.asked(&checked);
                if self.bridge.parks.is_some() {
                    if let Some(pending) = replay.asked_under(&key) {
                        let (pending, method) = (pending.clone(), method.to_owned());
                        self.waiting.push(OpenQuestion {
                            id: id.clone(),
                            pending,
                            method,
                            params: params.cloned(),
                        });
                    }
                }
                open.push(id);
            }
            Err(ReplayError::TooManyQuestions { limit }) => {
                return Step::Abort { refuse: id, error: FrontError::TooManyQuestions { limit } };
            }
            // The client's own answer, offered without a state, is not a valid one: its error.
            Err(ReplayError::Answer(e)) => return Step::Abort { refuse: id, error: e.into() },
            Err(e) => {
                tracing::warn!(error = %e, method, "upstream request cannot be embedded; refused upstream");
                respond(session, &id, Err(error(codes::INVALID_PARAMS, e.to_string()))).await;
            }
        }
        Step::Continue
    }

    async fn on_notification(&mut self, method: &str, params: Option<Value>) {
        let Some(notes) = &self.notes else { return };
        let Some(note) = notes.relay(method, params) else { return };
        if notes.tx.send(note).await.is_err() {
            self.notes = None;
        }
    }

    /// What a call that ended with `outcome` means when it is a `-32042` (URL elicitation
    /// required); `None` for any other outcome. See `url.rs` and [`UrlVerdict`].
    fn url_verdict(
        &self,
        outcome: &Outcome,
        replay: &mut Replay,
        reissued: bool,
    ) -> Option<Result<UrlVerdict, FrontError>> {
        let Outcome::Error(e) = outcome else { return None };
        let elicitations = match url::required(e, &self.req.caps)? {
            Ok(list) => list,
            Err(e) => return Some(Err(e)),
        };
        Some(replay.url_required(&elicitations, reissued).map_err(url::unusable))
    }

    /// Releases the session of a call that ended upstream (evicted if it learned the roots),
    /// then passes `reply` on.
    fn settle<T>(&self, guard: CallGuard, reply: Result<T, FrontError>) -> Result<T, FrontError> {
        if self.tainted {
            guard.poison();
        } else {
            guard.finished();
        }
        reply
    }

    async fn end_round(
        &mut self,
        guard: CallGuard,
        mut replay: Replay,
        open: Vec<RequestId>,
    ) -> Result<Reply, FrontError> {
        let outcome = replay.end_round();
        self.noticed(&outcome);
        if let Some(parks) = self.bridge.parks.clone() {
            if self.resumed || self.bridge.policy.parks(&self.req.target) {
                let waiting = std::mem::take(&mut self.waiting);
                let parked = Box::new(Parked { guard, replay, open: waiting, tainted: self.tainted });
                return Box::pin(self.park(&parks, parked, outcome)).await;
            }
        }
        // The reply does not wait for the call's end upstream (a cancel and a refusal, two
        // exchanges that were most of a replayed round against a Python server): it is sent
        // while the lease winds down, and the retry's lease waits for that session.
        let reply = self.seal_outcome(outcome, None);
        guard.wind_down(open, ASKED_REASON, self.tainted);
        reply
    }

    /// Ends the round: the questions asked, and a freshly sealed state.
    fn seal(&self, replay: Replay) -> Result<Reply, FrontError> {
        let outcome = replay.finish();
        self.noticed(&outcome);
        self.seal_outcome(outcome, None)
    }

    /// Counts a divergence the round showed, and tells the park policy.
    fn noticed(&self, outcome: &RoundOutcome) {
        if outcome.diverged {
            self.bridge.metrics.record_divergence(&self.req.target);
            self.report.diverged();
            self.bridge.policy.diverged(&self.req.target);
        }
    }

    /// Seals the state of a round that ended with `outcome`, with the handle of its parked call.
    pub(super) fn seal_outcome(
        &self,
        outcome: RoundOutcome,
        park: Option<&ParkHandle>,
    ) -> Result<Reply, FrontError> {
        let limit = self.bridge.limits.max_rounds;
        let round = next_round(self.round, limit)?;
        for pending in &outcome.journal.pending {
            self.bridge.metrics.input_required.with_label_values(&[pending.kind.method()]).inc();
        }
        let state = self.codec.seal_parked_at(
            self.binding.get_or_init(|| self.req.binding()),
            round,
            &outcome.journal,
            park,
            self.bridge.clock.unix_now(),
        )?;
        self.bridge.metrics.record_seal(self.codec.sealing_key());
        Ok(Reply::InputRequired { requests: outcome.input_requests, state, round })
    }

    /// Cancels the call, refuses its open requests upstream, and returns `e`.
    async fn abort(&self, guard: CallGuard, open: &[RequestId], e: FrontError) -> FrontError {
        guard.end(open, &e.to_string(), self.tainted).await;
        e
    }

    async fn timed_out(&self, guard: CallGuard, wake: Wake) -> FrontError {
        let (what, limit) = match wake {
            Wake::Total => ("the request took longer than", self.bridge.limits.total_timeout),
            _ => ("the upstream sent nothing for", self.bridge.limits.round_timeout),
        };
        // A silent upstream may be wedged: do not hand this session to the next call.
        guard.poison_after_cancel(&format!("{what} {limit:?}")).await;
        UpstreamError::Timeout(limit).into()
    }
}

fn micros(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

fn failed(guard: CallGuard, what: &str) -> FrontError {
    guard.poison();
    UpstreamError::Closed(what.to_owned()).into()
}

/// The call's next event, or `None` once `deadline` has passed first; an event already queued
/// is taken first. On the system clock the call's own timer serves both deadlines (one timer
/// wheel entry per wait, not two); a manual clock, which only its owner moves, is waited on
/// beside the call.
async fn next_event(
    clock: &Clock,
    guard: &mut CallGuard,
    deadline: Instant,
) -> Option<Result<Option<UpstreamEvent>, UpstreamError>> {
    match clock {
        Clock::System => guard.next_event_within(deadline).await,
        Clock::Manual(_) => tokio::select! {
            biased;
            ev = guard.next_event() => Some(ev),
            () = clock.sleep_until(deadline) => None,
        },
    }
}

fn next_wake(gather: Option<Instant>, silent: Instant, total: Instant) -> (Instant, Wake) {
    let mut best = (silent, Wake::Silent);
    if total < best.0 {
        best = (total, Wake::Total);
    }
    if let Some(g) = gather {
        if g <= best.0 {
            best = (g, Wake::Gathered);
        }
    }
    best
}

/// Answers an upstream request. The answer's send is boxed: it is an HTTP exchange (or a pipe
/// write) whose future would otherwise sit inline in every call's future.
pub(super) async fn respond(session: &Session, id: &RequestId, outcome: Result<Value, ErrorObject>) {
    if let Err(e) = Box::pin(session.respond(id, outcome)).await {
        tracing::debug!(error = %e, "could not answer an upstream request");
    }
}

pub(super) async fn refuse_all(lease: &Lease, open: &[RequestId], reason: &str) {
    for id in open {
        respond(lease.session(), id, Err(error(codes::INTERNAL_ERROR, reason.to_owned()))).await;
    }
}

fn error(code: i64, message: String) -> ErrorObject {
    ErrorObject { code, message, data: None }
}

pub(super) fn raw_value(raw: &RawValue) -> Value {
    serde_json::from_str(raw.get()).unwrap_or(Value::Null)
}

/// Turns the upstream's final outcome into the run's reply.
fn complete(outcome: Outcome, req: &MrtrRequest) -> Result<Reply, FrontError> {
    match outcome {
        Outcome::Result(raw) => Ok(Reply::Complete(raw)),
        Outcome::Error(e) if req.method == MrtrMethod::ResourcesRead => {
            Err(FrontError::Upstream(map_read_error(e, &req.target)))
        }
        Outcome::Error(e) => Err(FrontError::Upstream(map_upstream_error(e))),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn wake_order() {
        let now = Instant::now();
        let s = now + Duration::from_secs(5);
        let t = now + Duration::from_secs(9);
        assert!(matches!(next_wake(None, s, t).1, Wake::Silent));
        assert!(matches!(next_wake(Some(now), s, t).1, Wake::Gathered));
        assert!(matches!(next_wake(None, t, s).1, Wake::Total));
    }

    #[test]
    fn a_gap_is_whole_microseconds_saturating() {
        assert_eq!(micros(Duration::from_nanos(2_999)), 2);
        assert_eq!(micros(Duration::from_secs(3)), 3_000_000);
        assert_eq!(micros(Duration::MAX), u64::MAX);
    }

    #[test]
    fn a_recorded_answer_is_sent_as_the_json_it_holds() {
        let raw = RawValue::from_string(r#"{"action":"accept","content":{"n":1}}"#.to_owned()).unwrap();
        assert_eq!(raw_value(&raw), serde_json::json!({"action": "accept", "content": {"n": 1}}));
    }

    fn request(method: MrtrMethod, target: &str) -> MrtrRequest {
        MrtrRequest {
            principal: "p".into(),
            caps: ClientCaps::default(),
            method,
            target: target.to_owned(),
            upstream_params: RawValue::from_string("null".into()).unwrap().into(),
            state: None,
            responses: None,
            output: None,
        }
    }

    #[test]
    fn arguments_that_name_a_member_twice_bind_to_nothing_a_retry_matches() {
        let with = |params: &str| MrtrRequest {
            upstream_params: RawValue::from_string(params.to_owned()).unwrap().into(),
            ..request(MrtrMethod::ToolsCall, "t")
        };
        // The same arguments, spelled another way, bind alike: the digest is canonical.
        let plain = with(r#"{"name":"t","arguments":{"a":1,"b":{"c":2}}}"#).binding();
        assert_eq!(plain, with(r#"{"arguments":{"b":{"c":2},"a":1},"name":"t"}"#).binding());
        assert_ne!(plain, with(r#"{"name":"t","arguments":{"a":1,"b":{"c":3}}}"#).binding());
        for twice in [r#"{"arguments":{"a":1,"a":2}}"#, r#"{"arguments":{"b":{"c":2,"c":3}}}"#] {
            let req = with(twice);
            assert_ne!(req.binding(), req.binding(), "{twice}");
        }
    }

    #[test]
    fn only_a_read_turns_a_missing_resource_into_the_uri_it_asked_for() {
        let missing = || {
            let message = "Unknown resource: demo://gone".to_owned();
            Outcome::Error(ErrorObject { code: codes::LEGACY_RESOURCE_NOT_FOUND, message, data: None })
        };
        let Err(FrontError::Upstream(read)) =
            complete(missing(), &request(MrtrMethod::ResourcesRead, "demo://x"))
        else {
            panic!("a read's upstream error is relayed")
        };
        assert_eq!(
            (read.message.as_str(), read.data),
            ("Resource not found", Some(serde_json::json!({"uri": "demo://x"})))
        );
        // A tool or a prompt that fails on a resource keeps the upstream's answer, only its code
        // mapped: the URI of a read is not what it asked for.
        for method in [MrtrMethod::ToolsCall, MrtrMethod::PromptsGet] {
            let Err(FrontError::Upstream(e)) = complete(missing(), &request(method, "t")) else {
                panic!("{method:?}: the upstream error is relayed")
            };
            assert_eq!(
                (e.code, e.message.as_str(), e.data),
                (codes::INVALID_PARAMS, "Unknown resource: demo://gone", None)
            );
        }
    }
}
