//! How a front request ended, and the one place that records it: the outcome label (a fixed
//! enum, so a metric label can never come from input), the request counter, the duration
//! histogram, the upstream error counter and the one log line of the request, which alone
//! carries the full error detail (upstream error bodies included) that the client never sees.

use http::Response;
use tokio::time::Instant;

use super::respond;
use crate::body::FrontBody;
use crate::error::FrontError;
pub use crate::error::OutcomeLabel;
use crate::metrics::Metrics;
use crate::protocol::RequestId;
use crate::telemetry::Ended;

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

// === impl Outcome ===

impl Outcome {
    pub(super) fn plain(label: OutcomeLabel, response: Response<FrontBody>) -> Self {
        Self { label, round: None, response, failure: None }
    }

    /// A legacy session's response, relayed as the upstream (or the relay) made it: its outcome
    /// is read off its HTTP status, and it is recorded when its head is sent (a stream's end is
    /// the upstream's business). The relay logs the detail of its own refusals.
    pub(super) fn relayed(response: Response<FrontBody>) -> Self {
        use http::StatusCode as S;
        let label = match response.status() {
            S::ACCEPTED => OutcomeLabel::Accepted,
            s if s.is_success() => OutcomeLabel::Complete,
            S::UNAUTHORIZED => OutcomeLabel::Unauthorized,
            S::FORBIDDEN => OutcomeLabel::Forbidden,
            S::NOT_FOUND => OutcomeLabel::SessionNotFound,
            S::METHOD_NOT_ALLOWED => OutcomeLabel::HttpMethodNotAllowed,
            S::NOT_ACCEPTABLE => OutcomeLabel::NotAcceptable,
            S::PAYLOAD_TOO_LARGE => OutcomeLabel::PayloadTooLarge,
            S::UNSUPPORTED_MEDIA_TYPE => OutcomeLabel::UnsupportedMediaType,
            S::TOO_MANY_REQUESTS => OutcomeLabel::RateLimited,
            S::BAD_GATEWAY => OutcomeLabel::UpstreamError,
            S::SERVICE_UNAVAILABLE => OutcomeLabel::Overloaded,
            S::GATEWAY_TIMEOUT => OutcomeLabel::UpstreamTimeout,
            s if s.is_client_error() => OutcomeLabel::InvalidRequest,
            _ => OutcomeLabel::Internal,
        };
        Self::plain(label, response)
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
