//! How a front request ended, and the one place that records it: the outcome label (a fixed
//! enum, so a metric label can never come from input), the request counter, the duration
//! histogram, the upstream error counter and the one log line of the request, which alone
//! carries the full error detail (upstream error bodies included) that the client never sees.

use http::Response;
use tokio::time::Instant;

use super::body::FrontBody;
use super::respond;
use crate::error::FrontError;
use crate::metrics::Metrics;
use crate::protocol::RequestId;
use crate::telemetry::Ended;

/// Every outcome label a front request can be counted under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OutcomeLabel {
    Complete,
    InputRequired,
    /// Committed as an SSE stream before its outcome was known (recorded again when it ends).
    Streamed,
    /// An accepted notification.
    Accepted,
    ParseError,
    InvalidRequest,
    MethodNotFound,
    InvalidParams,
    HeaderMismatch,
    UnsupportedVersion,
    MissingCapability,
    InvalidState,
    TooManyRounds,
    TooManyQuestions,
    StateTooLarge,
    UpstreamError,
    UpstreamUnavailable,
    UpstreamTimeout,
    RequestTimeout,
    Unauthorized,
    ForbiddenOrigin,
    /// Refused by the authorization rules.
    Forbidden,
    PayloadTooLarge,
    BodyTimeout,
    HttpMethodNotAllowed,
    PathNotFound,
    UnsupportedMediaType,
    NotAcceptable,
    Overloaded,
    Internal,
    /// The client closed its connection (or its stream) before the response was complete.
    Abandoned,
    /// Refused by a `[limits]` rate limit (429).
    RateLimited,
    /// A single-use state could not be checked: the state store did not answer (503).
    StateStoreUnavailable,
    /// A `subscriptions/listen` past a bound on listen streams (429, 503), or during shutdown.
    ListenRefused,
}

/// What the log line and the counters need of a failed request.
pub(super) struct Failure {
    /// [`crate::upstream::UpstreamError::label`] of the upstream failure behind it, if any.
    upstream: Option<&'static str>,
    /// The error with its whole source chain (see [`FrontError::detail`]).
    detail: String,
    server_side: bool,
    /// The JSON-RPC error code the client got.
    code: i64,
}

/// How a request ended, for the log line and metrics.
pub(super) struct Outcome {
    pub label: OutcomeLabel,
    pub round: Option<u32>,
    pub response: Response<FrontBody>,
    pub failure: Option<Failure>,
}

// === impl OutcomeLabel ===

impl OutcomeLabel {
    /// The metric label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Complete => "complete",
            Self::InputRequired => "input_required",
            Self::Streamed => "streamed",
            Self::Accepted => "accepted",
            Self::ParseError => "parse_error",
            Self::InvalidRequest => "invalid_request",
            Self::MethodNotFound => "method_not_found",
            Self::InvalidParams => "invalid_params",
            Self::HeaderMismatch => "header_mismatch",
            Self::UnsupportedVersion => "unsupported_version",
            Self::MissingCapability => "missing_capability",
            Self::InvalidState => "invalid_state",
            Self::TooManyRounds => "too_many_rounds",
            Self::StateTooLarge => "state_too_large",
            Self::TooManyQuestions => "too_many_questions",
            Self::UpstreamError => "upstream_error",
            Self::UpstreamUnavailable => "upstream_unavailable",
            Self::UpstreamTimeout => "upstream_timeout",
            Self::RequestTimeout => "request_timeout",
            Self::Unauthorized => "unauthorized",
            Self::ForbiddenOrigin => "forbidden_origin",
            Self::Forbidden => "forbidden",
            Self::PayloadTooLarge => "payload_too_large",
            Self::BodyTimeout => "body_timeout",
            Self::HttpMethodNotAllowed => "http_method_not_allowed",
            Self::PathNotFound => "path_not_found",
            Self::UnsupportedMediaType => "unsupported_media_type",
            Self::NotAcceptable => "not_acceptable",
            Self::Overloaded => "overloaded",
            Self::Internal => "internal",
            Self::Abandoned => "abandoned",
            Self::RateLimited => "rate_limited",
            Self::StateStoreUnavailable => "state_store_unavailable",
            Self::ListenRefused => "listen_refused",
        }
    }
}

// === impl Outcome ===

impl Outcome {
    pub(super) fn plain(label: OutcomeLabel, response: Response<FrontBody>) -> Self {
        Self { label, round: None, response, failure: None }
    }

    pub(super) fn error(id: Option<&RequestId>, e: &FrontError) -> Self {
        let failure = Failure {
            upstream: e.upstream_failure().map(|u| u.label()),
            detail: e.detail(),
            server_side: e.is_server_side(),
            code: e.code(),
        };
        Self { label: e.label(), round: None, response: respond::error(id, e), failure: Some(failure) }
    }

    /// The outcome as the request's span records it.
    pub(super) fn ended(&self) -> Ended {
        Ended {
            outcome: self.label.as_str(),
            http_status: self.response.status().as_u16(),
            code: self.failure.as_ref().map(|f| f.code),
            round: self.round,
        }
    }

    /// Counts the request and writes its one log line. `method` is a fixed label.
    pub(super) fn record(&self, metrics: &Metrics, method: &'static str, started: Instant) {
        let elapsed = started.elapsed();
        metrics.requests.with_label_values(&[method, self.label.as_str()]).inc();
        metrics.front_duration.with_label_values(&[method]).observe(elapsed.as_secs_f64());
        if let Some(kind) = self.failure.as_ref().and_then(|f| f.upstream) {
            metrics.upstream_errors.with_label_values(&[kind]).inc();
        }
        let error = self.failure.as_ref().map(|f| f.detail.as_str());
        let (outcome, status) = (self.label.as_str(), self.response.status().as_u16());
        let duration_us = elapsed.as_micros() as u64;
        macro_rules! line {
            ($level:ident) => {
                tracing::$level!(method, outcome, round = self.round, status, duration_us, error, "request")
            };
        }
        if self.failure.as_ref().is_some_and(|f| f.server_side) {
            line!(warn);
        } else {
            line!(info);
        }
    }
}

/// Counts a request whose client went away before its response was complete, and writes its
/// one log line: nothing else would, since no response exists to record.
pub(super) fn record_abandoned(metrics: &Metrics, method: &'static str, started: Instant) {
    let elapsed = started.elapsed();
    let outcome = OutcomeLabel::Abandoned.as_str();
    metrics.requests.with_label_values(&[method, outcome]).inc();
    metrics.front_duration.with_label_values(&[method]).observe(elapsed.as_secs_f64());
    let duration_us = elapsed.as_micros() as u64;
    tracing::info!(method, outcome, duration_us, "request");
}

#[cfg(test)]
mod tests;
