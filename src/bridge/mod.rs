//! The bridge: runs one MRTR-capable front request (`tools/call`, `prompts/get`,
//! `resources/read`) against a leased legacy session, and turns the server's requests into an
//! `input_required` round (design.md, "deterministic replay with an encrypted journal").
//!
//! Each front request is one *run* of the legacy call: the incoming `requestState` (if any) is
//! opened and checked against the request, the client's answers are moved into the journal, and
//! the call is replayed upstream. Questions the journal answers are answered at once; the first
//! unanswered one starts a short gather window for concurrent ones, after which the upstream call
//! is cancelled and the questions go back to the client with a freshly sealed state. Nothing
//! survives the request in this process, so any replica can serve the next round.

mod guard;
mod params;
mod round;

use std::sync::{Arc, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::value::RawValue;
use serde_json::{Map, Value};

pub use params::upstream_params;
pub use round::Progress;

use crate::capabilities::ClientCaps;
use crate::config::MrtrConfig;
use crate::error::FrontError;
use crate::metrics::Metrics;
use crate::mrtr::{AnswerLimits, Binding, Journal, LegacyVersion, StateCodec};
use crate::protocol::methods::MrtrMethod;
use crate::upstream::{Pool, UpstreamError};

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
    codec: StateCodec,
    metrics: Arc<Metrics>,
    limits: MrtrConfig,
    /// The protocol version proposed upstream, which shapes the declared capabilities.
    upstream_version: LegacyVersion,
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
        codec: StateCodec,
        metrics: Arc<Metrics>,
        limits: MrtrConfig,
        upstream_version: LegacyVersion,
    ) -> Self {
        Self { pool, codec, metrics, limits, upstream_version }
    }

    /// Runs one round of `req`; progress notifications go to `progress` when given.
    pub async fn run(&self, req: MrtrRequest, progress: Option<Progress>) -> Result<Reply, FrontError> {
        let binding = OnceLock::new();
        let (round, journal) = match req.state.as_deref() {
            None => (0, Journal::new()),
            Some(token) => self.open_state(token, binding.get_or_init(|| req.binding()))?,
        };
        let key = (req.principal.clone(), req.caps.fingerprint());
        let (caps, version) = (req.caps, self.upstream_version);
        let lease =
            self.pool.lease_with(key, || caps.legacy_initialize(version)).await.map_err(upstream_error)?;
        let version = LegacyVersion::parse(lease.session().protocol_version())
            .ok_or_else(|| FrontError::Internal("upstream negotiated an unknown version".into()))?;
        let journal = self.accept(journal, req.responses.as_ref(), version, req.state.is_some())?;
        let run = round::Run { bridge: self, req: &req, binding, round, progress, tainted: false };
        run.execute(lease, journal).await
    }

    /// Opens the incoming state.
    fn open_state(&self, token: &str, binding: &Binding) -> Result<(u32, Journal), FrontError> {
        match self.codec.open_at(token, binding, unix_now()) {
            Ok(claims) => Ok((claims.round, claims.journal)),
            Err(e) => {
                let reason = e.reason();
                self.metrics.state_rejections.with_label_values(&[reason]).inc();
                tracing::info!(reason, error = %e, "refused requestState");
                Err(FrontError::InvalidState { reason })
            }
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
        journal
            .accept_responses(responses, version, &limits)
            .map_err(|e| FrontError::InvalidParams(format!("inputResponses: {e}")))?;
        Ok(journal)
    }
}

/// Maps an upstream failure to the front error a client sees.
pub fn upstream_error(e: UpstreamError) -> FrontError {
    match e {
        UpstreamError::Timeout(_) => FrontError::UpstreamTimeout(e.to_string()),
        UpstreamError::Settings(_) => FrontError::Internal(e.to_string()),
        e if e.is_overload() => FrontError::Overloaded,
        other => FrontError::UpstreamUnavailable(other.to_string()),
    }
}

/// Seconds since the Unix epoch (the sealed core takes time as an argument).
pub fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}
