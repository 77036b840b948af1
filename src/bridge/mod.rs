//! The bridge: runs one MRTR-capable front request (`tools/call`, `prompts/get`,
//! `resources/read`) against a leased legacy session, and turns the server's requests into an
//! `input_required` round (design.md, "deterministic replay with an encrypted journal").
//!
//! Each front request is one *run* of the legacy call: the incoming `requestState` (if any) is
//! opened and checked against the request, the client's answers are moved into the journal, and
//! the call is replayed upstream. Questions the journal answers are answered at once; the first
//! unanswered one starts gathering concurrent ones (until the upstream is quiet for a short idle
//! gap, bounded by the gather window; see `gather.rs`), after which the upstream call is
//! cancelled and the questions go back to the client with a freshly sealed state. Nothing the
//! next round needs survives the request in this process, so any replica can serve it; the only
//! thing a replica keeps is a bounded hint of how many questions each tool asks at once.
//!
//! Progress and log messages the upstream sends during a run go to the request's stream when
//! it asked for them (`notes.rs`, which also sets the session's upstream log level); a legacy
//! `-32042` (URL elicitation required) ends the call with URL-mode questions instead of an
//! error (`url.rs`).

mod clock;
mod gather;
mod guard;
mod memory;
mod notes;
mod params;
mod round;
mod url;

use std::sync::{Arc, OnceLock};

use opentelemetry::context::FutureExt as _;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

pub use clock::{Clock, ManualClock};
pub use notes::Notes;
pub use params::upstream_params;

use crate::capabilities::ClientCaps;
use crate::config::MrtrConfig;
use crate::error::FrontError;
use crate::metrics::Metrics;
use crate::mrtr::{AnswerLimits, Binding, CodecSettings, Journal, LegacyVersion, LiveRing, StateCodec};
use crate::protocol::methods::MrtrMethod;
use crate::state_store::StateStore;
use crate::telemetry::RoundTrace;
use crate::upstream::Pool;

/// One MRTR front request, validated.
#[derive(Debug)]
pub struct MrtrRequest {
    pub principal: Arc<str>,
    pub caps: ClientCaps,
    pub method: MrtrMethod,
    /// Tool name, prompt name or resource URI.
    pub target: String,
    /// The params to send upstream (retry fields and 2026 `_meta` removed).
    pub upstream_params: Value,
    pub state: Option<String>,
    pub responses: Option<Map<String, Value>>,
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
}

// === impl MrtrRequest ===

impl MrtrRequest {
    /// What this request's states are bound to. The arguments digest (canonical JSON and
    /// SHA-256) is only needed to open or seal a state, so a call that completes in its first
    /// round never computes it. `upstream_params` keeps `arguments` verbatim.
    pub(crate) fn binding(&self) -> Binding {
        Binding::new(&self.principal, self.method, &self.target, Some(&self.upstream_params))
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
        let memory = memory::GatherMemory::new(limits.gather_memory_tools, &limits.gather_expect);
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
        }
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
        self.clock = clock;
        self
    }

    /// Runs one round of `req`; progress and log notifications go to `notes` when given.
    pub async fn run(&self, req: MrtrRequest, notes: Option<Notes>) -> Result<Reply, FrontError> {
        let binding = OnceLock::new();
        // The ring current now opens this request's state and seals its next one, whatever
        // reload happens meanwhile.
        let codec = StateCodec::shared(self.keys.current(), self.codec_settings);
        let (round, journal) = match req.state.as_deref() {
            None => (0, Journal::new()),
            Some(token) => self.open_state(&codec, token, binding.get_or_init(|| req.binding())).await?,
        };
        let Some(trace) = RoundTrace::start(req.method.name(), &req.target, round) else {
            return self.run_round(&req, notes, codec, binding, round, journal).await;
        };
        let run = self.run_round(&req, notes, codec, binding, round, journal);
        let reply = Box::pin(run.with_context(trace.context())).await;
        match &reply {
            Ok(Reply::Complete(_)) => trace.end("complete", None, None),
            Ok(Reply::InputRequired { round, .. }) => trace.end("input_required", Some(*round), None),
            Err(e) => trace.end(e.label().as_str(), None, Some(e.code())),
        }
        reply
    }

    /// The round after the state is open: lease a session, take the answers, replay the call.
    async fn run_round(
        &self,
        req: &MrtrRequest,
        notes: Option<Notes>,
        codec: StateCodec,
        binding: OnceLock<Binding>,
        round: u32,
        journal: Journal,
    ) -> Result<Reply, FrontError> {
        let key = (req.principal.clone(), req.caps.fingerprint());
        let (caps, version) = (req.caps, self.upstream_version);
        let lease = self.pool.lease_with(key, || caps.legacy_initialize(version)).await?;
        let version = LegacyVersion::parse(lease.session().protocol_version())
            .ok_or_else(|| FrontError::internal("upstream negotiated an unknown version"))?;
        let journal = self.accept(journal, req.responses.as_ref(), version, req.state.is_some())?;
        let run = round::Run { bridge: self, codec, req, binding, round, notes, tainted: false };
        run.execute(lease, journal).await
    }

    /// Opens the incoming state, counting the open under the key that sealed it, and with
    /// single use on consumes it once its checks pass.
    async fn open_state(
        &self,
        codec: &StateCodec,
        token: &str,
        binding: &Binding,
    ) -> Result<(u32, Journal), FrontError> {
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
        if let Some(store) = &self.single_use {
            if let Err(e) = store.consume(token, claims.expires_at, now).await {
                self.count_store_failure(&e);
                return Err(e.into());
            }
        }
        Ok((claims.round, claims.journal))
    }

    fn count_store_failure(&self, e: &crate::state_store::StoreError) {
        match e {
            crate::state_store::StoreError::Replayed => {
                self.metrics.state_rejections.with_label_values(&[e.label()]).inc();
            }
            _ => self.metrics.state_store_errors.with_label_values(&["consume", e.label()]).inc(),
        }
    }

    /// Moves the client's answers into the journal. Answers without a state are never trusted:
    /// with no state there is no question they could answer.
    fn accept(
        &self,
        mut journal: Journal,
        responses: Option<&Map<String, Value>>,
        version: LegacyVersion,
        has_state: bool,
    ) -> Result<Journal, FrontError> {
        if !has_state {
            return Ok(journal);
        }
        let limits =
            AnswerLimits { max_answer_bytes: self.limits.max_answer_bytes, ..AnswerLimits::default() };
        journal.accept_responses(responses, version, &limits)?;
        Ok(journal)
    }
}
