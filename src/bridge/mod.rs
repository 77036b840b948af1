//! The bridge: runs one MRTR-capable front request (`tools/call`, `prompts/get`,
//! `resources/read`) against a leased legacy session, and turns the server's requests into an
//! `input_required` round by deterministic replay with an encrypted journal: the answers so far
//! travel sealed in the `requestState`, and each retry runs the call again, answering the
//! repeated questions from them (docs/src/how-it-works.md).
//!
//! Each front request is one *run* of the legacy call: the incoming `requestState` (if any) is
//! opened and checked against the request, the client's answers are moved into the journal, and
//! the call is replayed upstream. Questions the journal answers are answered at once; the first
//! unanswered one starts gathering concurrent ones (until the upstream is quiet for a short idle
//! gap, bounded by the gather window; see `gather.rs`), after which the upstream call is
//! cancelled and the questions go back to the client with a freshly sealed state. Nothing the
//! next round needs survives the request in this process, so any replica can serve it; the only
//! things a replica keeps are a bounded hint of how many questions each tool asks at once, and
//! the per-tool figures of the migration report (`report.rs`, [`crate::tool_report`]).
//!
//! Park mode (`policy.rs`, `park.rs`, `resume.rs`) is the exception, opt-in per tool: the round
//! ends without cancelling the call, which waits in this replica's bounded registry, and the
//! retry continues it; a retry elsewhere is forwarded to the owner through [`OwnerLink`], which the cluster link implements (`crate::cluster`).
//! How a retry is served (resumed, forwarded, refused, replayed as a fallback) is decided in
//! [`Bridge::run`]'s one `match`; whether a round parks, in `round.rs`'s `end_round`.
//!
//! Progress and log messages the upstream sends during a run go to the request's stream when
//! it asked for them (`notes.rs`, which also sets the session's upstream log level); a legacy
//! `-32042` (URL elicitation required) ends the call with URL-mode questions instead of an
//! error (`url.rs`).

mod checks;
mod gather;
mod guard;
mod memory;
mod notes;
mod owner;
mod params;
mod park;
mod policy;
mod report;
mod resume;
mod round;
mod url;

use std::sync::{Arc, OnceLock};

use opentelemetry::context::FutureExt as _;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

pub use crate::clock::{Clock, ManualClock};
pub use notes::Notes;
pub use owner::{Forwarded, Forwarding, OwnerLink};
pub use params::{upstream_params, upstream_raw};
pub use park::{ParkOutcome, ParkRegistry};

use crate::capabilities::ClientCaps;
use crate::config::MrtrConfig;
use crate::error::FrontError;
use crate::metrics::Metrics;
use crate::mrtr::{
    AnswerLimits, Binding, CodecSettings, Journal, LegacyVersion, LiveRing, Offered, ParkHandle, StateCodec,
};
use crate::protocol::methods::MrtrMethod;
use crate::protocol::params::JsonText;
use crate::schema::{OutputSchema, SensitivePolicy};
use crate::state_store::StateStore;
use crate::telemetry::RoundTrace;
use crate::tool_report::Served;
use crate::upstream::Pool;
use park::Found;

/// A run's incoming state, opened: what the rest of the run needs of it.
struct Opened {
    codec: StateCodec,
    /// Filled when a state was opened, else on the first seal.
    binding: OnceLock<Binding>,
    round: u32,
    journal: Journal,
}

/// One MRTR front request, validated.
#[derive(Debug)]
pub struct MrtrRequest {
    pub principal: Arc<str>,
    pub caps: ClientCaps,
    pub method: MrtrMethod,
    /// Tool name, prompt name or resource URI.
    pub target: String,
    /// The params to send upstream (retry fields and 2026 `_meta` removed), as JSON text:
    /// copied from the client's, never parsed on the way through.
    pub upstream_params: JsonText,
    pub state: Option<String>,
    pub responses: Option<Map<String, Value>>,
    /// A `tools/call`'s tool's compiled `outputSchema`, when the front's catalogue knows it:
    /// the result's `structuredContent` is checked against it.
    pub output: Option<Arc<OutputSchema>>,
}

/// Who sent a request to the bridge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hop {
    /// A client, through the front.
    Client,
    /// Another replica, forwarding a retry whose parked call this one holds.
    Replica,
}

/// How a run ended.
#[derive(Debug)]
pub enum Reply {
    /// The upstream result, as raw JSON text.
    Complete(Box<RawValue>),
    /// Questions for the client, and the state to echo.
    InputRequired { requests: Map<String, Value>, state: String, round: u32 },
}

/// Runs MRTR front requests; built once, shared by every request.
pub struct Bridge {
    pool: Arc<Pool>,
    /// The key ring in use; each run reads it once (rotation never splits a run).
    keys: Arc<LiveRing>,
    codec_settings: CodecSettings,
    metrics: Arc<Metrics>,
    limits: MrtrConfig,
    /// The protocol version proposed upstream, which shapes the declared capabilities.
    upstream_version: LegacyVersion,
    clock: Clock,
    memory: memory::GatherMemory,
    /// Records consumed states when `state.single_use` is on.
    single_use: Option<Arc<StateStore>>,
    /// The calls parked here; `None` when no tool may park.
    parks: Option<Arc<ParkRegistry>>,
    policy: policy::ParkPolicy,
    /// Reaches the parked calls of other replicas, when `[cluster]` is configured.
    forwarder: Option<Arc<dyn OwnerLink>>,
    /// This replica's advertised URL (`cluster.advertise_url`), the owner in its park handles;
    /// empty when it advertises none.
    advertise: String,
    /// `elicitation.sensitive`: what a question that asks for a secret gets.
    sensitive: SensitivePolicy,
}

// === impl MrtrRequest ===

impl MrtrRequest {
    /// What this request's states are bound to. The arguments digest (canonical JSON and
    /// SHA-256) is only needed to open or seal a state, so a call that completes in its first
    /// round never computes it. `upstream_params` keeps `arguments` verbatim.
    ///
    /// Params that name a member twice, at any depth, may read one way here and another in
    /// the server, which receives their text: they are bound to nothing a retry can match, so
    /// such a call never continues past its first round.
    pub(crate) fn binding(&self) -> Binding {
        match crate::protocol::params::tree_without_repeats(self.upstream_params.as_str()) {
            Ok(params) => Binding::new(&self.principal, self.method, &self.target, Some(&params)),
            Err(_) => Binding::unmatchable(&self.principal, self.method, &self.target),
        }
    }
}

// === impl Bridge ===

impl Bridge {
    pub fn new(
        pool: Arc<Pool>,
        keys: Arc<LiveRing>,
        codec_settings: CodecSettings,
        metrics: Arc<Metrics>,
        limits: MrtrConfig,
        upstream_version: LegacyVersion,
    ) -> Self {
        let memory = memory::GatherMemory::new(
            limits.gather_memory_tools,
            &limits.gather_expect,
            limits.gather_recheck_every,
        );
        let parks = limits.park.may_park().then(|| {
            let registry = ParkRegistry::new(&limits.park, Clock::System, metrics.clone());
            Arc::new(registry)
        });
        let policy = policy::ParkPolicy::new(limits.park.clone());
        Self {
            pool,
            keys,
            codec_settings,
            metrics,
            limits,
            upstream_version,
            clock: Clock::System,
            memory,
            single_use: None,
            parks,
            policy,
            advertise: String::new(),
            forwarder: None,
            sensitive: SensitivePolicy::default(),
        }
    }

    /// Applies `policy` to questions that ask for a secret (`elicitation.sensitive`).
    pub fn with_sensitive(mut self, policy: SensitivePolicy) -> Self {
        self.sensitive = policy;
        self
    }

    /// Names this replica `url` in the park handles it seals, so other replicas forward to it.
    pub fn with_advertise_url(mut self, url: &str) -> Self {
        self.advertise = url.trim_end_matches('/').to_owned();
        self
    }

    /// The key ring in use.
    pub fn keys(&self) -> &Arc<LiveRing> {
        &self.keys
    }

    /// The calls parked here, when park mode is configured for any tool.
    pub fn parks(&self) -> Option<&Arc<ParkRegistry>> {
        self.parks.as_ref()
    }

    /// Accepts each state once across every replica sharing `store`.
    pub fn with_single_use(mut self, store: Arc<StateStore>) -> Self {
        self.single_use = Some(store);
        self
    }

    /// The single-use state store, when there is one.
    pub fn single_use(&self) -> Option<&Arc<StateStore>> {
        self.single_use.as_ref()
    }

    /// Reads deadlines and state times from `clock` instead of the system's.
    pub fn with_clock(mut self, clock: Clock) -> Self {
        if self.parks.is_some() {
            let p = &self.limits.park;
            let registry = ParkRegistry::new(p, clock.clone(), self.metrics.clone());
            self.parks = Some(Arc::new(registry));
        }
        self.clock = clock;
        self
    }

    /// Forwards retries whose parked call another replica holds to that replica.
    pub fn with_forwarder(mut self, forwarder: Arc<dyn OwnerLink>) -> Self {
        self.forwarder = Some(forwarder);
        self
    }

    /// Runs one round of `req`; progress and log notifications go to `notes` when given.
    pub async fn run(&self, req: MrtrRequest, notes: Option<Notes>) -> Result<Reply, FrontError> {
        let report = report::ToolRun::start(self, &req);
        let reply = match self.serve(&req, notes, Hop::Client, &report).await {
            Ok(served) => served.ok_or_else(|| FrontError::internal("a client's retry was left unserved")),
            Err(e) => Err(e),
        };
        let reply = self.checked_output(&req, reply);
        report.end(&reply);
        reply
    }

    /// Serves a retry another replica forwarded here (see [`OwnerLink`]): only when its call
    /// is parked here (or was answered here); `None` tells that replica to replay it itself.
    /// What its client may see goes to `notes`, which that replica relays.
    /// Its state was consumed by that replica when single use is on. The migration report
    /// counts the run on the replica the client reached (as `forwarded`), not here.
    pub async fn run_forwarded(
        &self,
        req: MrtrRequest,
        notes: Option<Notes>,
    ) -> Result<Option<Reply>, FrontError> {
        let report = report::ToolRun::unreported(self);
        self.serve(&req, notes, Hop::Replica, &report).await
    }

    /// Serves one run of `req`, telling `report` what the migration report needs to know.
    async fn serve(
        &self,
        req: &MrtrRequest,
        notes: Option<Notes>,
        hop: Hop,
        report: &report::ToolRun<'_>,
    ) -> Result<Option<Reply>, FrontError> {
        let binding = OnceLock::new();
        // The ring current now opens this request's state and seals its next one, whatever
        // reload happens meanwhile.
        let codec = StateCodec::shared(self.keys.current(), self.codec_settings);
        let (round, journal, park) = match req.state.as_deref() {
            None => (0, Journal::new(), None),
            Some(token) => self.open_state(&codec, token, binding.get_or_init(|| req.binding()), hop).await?,
        };
        let opened = Opened { codec, binding, round, journal };
        let Some(trace) = RoundTrace::start(req.method.name(), &req.target, round) else {
            return self.serve_open(req, notes, hop, report, opened, park).await;
        };
        let run = self.serve_open(req, notes, hop, report, opened, park);
        let reply = Box::pin(run.with_context(trace.context())).await;
        match &reply {
            Ok(Some(Reply::Complete(_))) => trace.end("complete", None, None),
            Ok(Some(Reply::InputRequired { round, .. })) => trace.end("input_required", Some(*round), None),
            Ok(None) => trace.end("not_held", None, None),
            Err(e) => trace.end(e.label().as_str(), None, Some(e.code())),
        }
        reply
    }

    /// The run after its state is open: find its parked call (park mode), or lease a session,
    /// take the answers and replay the call.
    async fn serve_open(
        &self,
        req: &MrtrRequest,
        notes: Option<Notes>,
        hop: Hop,
        report: &report::ToolRun<'_>,
        opened: Opened,
        park: Option<ParkHandle>,
    ) -> Result<Option<Reply>, FrontError> {
        let Opened { codec, binding, round, journal } = opened;
        report.resumed(round);
        let mut fallback = false;
        // The park-mode paths (resume here, forward to the owner) are boxed: inline they would
        // make this future, and with it every front request's, about 2 KB larger, for paths a
        // replayed call never takes. hyper keeps one such future per client connection.
        if let Some(handle) = park {
            // Where a parked state's retry is served is decided here: resumed on this replica,
            // refused (already answered), forwarded to its owner, or replayed from the journal
            // (fallback). A state without a handle is replayed (replay mode).
            match self.find_parked(&handle) {
                Found::Parked(parked) => {
                    report.serve(Served::Park);
                    let run = round::Run::new(self, codec, req, binding, round, notes, report);
                    return Box::pin(self.resume(run, &handle, parked, journal)).await.map(Some);
                }
                Found::Answered => {
                    self.count_park(ParkOutcome::Refused);
                    return Err(FrontError::ParkedCallAnswered);
                }
                Found::Unknown if hop == Hop::Replica => return Ok(None),
                Found::Unknown => {
                    if let Some(reply) = Box::pin(self.forward_to_owner(&handle, req, notes.as_ref())).await {
                        report.serve(Served::Forwarded);
                        return reply.map(Some);
                    }
                    tracing::info!(call = %handle.call, owner = %handle.owner, "parked call out of reach: replaying from the journal");
                    self.count_park(ParkOutcome::Fallback);
                    fallback = true;
                }
            }
        }
        let key = (req.principal.clone(), req.caps.fingerprint());
        let (caps, version) = (req.caps, self.upstream_version);
        let lease = self.pool.lease_with(key, || caps.legacy_initialize(version)).await?;
        let version = LegacyVersion::parse(lease.session().protocol_version())
            .ok_or_else(|| FrontError::internal("upstream negotiated an unknown version"))?;
        let (journal, offered) = match req.state {
            Some(_) => (self.accept(journal, req.responses.as_ref(), version)?, None),
            None => (journal, self.offer(req.responses.as_ref(), version)),
        };
        report.serve(match (req.state.is_some(), fallback) {
            (false, _) => Served::Direct,
            (true, false) => Served::Replay,
            (true, true) => Served::Fallback,
        });
        round::Run::new(self, codec, req, binding, round, notes, report)
            .execute(lease, journal, offered)
            .await
            .map(Some)
    }

    /// Opens the incoming state, counting the open under the key that sealed it, and with
    /// single use on consumes it once its checks pass.
    async fn open_state(
        &self,
        codec: &StateCodec,
        token: &str,
        binding: &Binding,
        hop: Hop,
    ) -> Result<(u32, Journal, Option<ParkHandle>), FrontError> {
        let key = codec.key_id_of(token);
        let now = self.clock.unix_now();
        let claims = match codec.open_at(token, binding, now) {
            Ok(claims) => {
                self.metrics.record_open(key, "ok");
                claims
            }
            Err(e) => {
                // The reason and the detail go on the request's log line with the error.
                self.metrics.state_rejections.with_label_values(&[e.reason()]).inc();
                self.metrics.record_open(key, e.reason());
                return Err(e.into());
            }
        };
        if let (Some(store), Hop::Client) = (&self.single_use, hop) {
            if let Err(e) = store.consume(token, claims.expires_at, now).await {
                self.count_store_failure(&e);
                return Err(e.into());
            }
        }
        Ok((claims.round, claims.journal, claims.park))
    }

    fn count_store_failure(&self, e: &crate::state_store::StoreError) {
        match e {
            crate::state_store::StoreError::Replayed => {
                self.metrics.state_rejections.with_label_values(&[e.label()]).inc();
            }
            _ => self.metrics.state_store_errors.with_label_values(&["consume", e.label()]).inc(),
        }
    }

    /// Moves the answers of a retry (a request with a state) into the journal.
    fn accept(
        &self,
        mut journal: Journal,
        responses: Option<&Map<String, Value>>,
        version: LegacyVersion,
    ) -> Result<Journal, FrontError> {
        journal.accept_responses(responses, version, &self.answer_limits())?;
        Ok(journal)
    }

    /// The answers of a request without a state: they answer no question the gateway asked
    /// (with no state there is none), and are only offered to the run, for the questions the
    /// server names itself ([`Offered`]).
    fn offer(&self, responses: Option<&Map<String, Value>>, version: LegacyVersion) -> Option<Offered> {
        let responses = responses.filter(|r| !r.is_empty())?;
        Some(Offered::new(responses.clone(), version, self.answer_limits()))
    }

    fn answer_limits(&self) -> AnswerLimits {
        AnswerLimits { max_answer_bytes: self.limits.max_answer_bytes, ..AnswerLimits::default() }
    }
}
