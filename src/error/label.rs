//! The outcome labels a request can be counted under: a fixed enum, so a metric label can never
//! come from input. Every entrance records its requests with these (see `front::outcome`).

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
    /// A legacy session's id the gateway does not know, or the upstream no longer does (404).
    SessionNotFound,
    /// What the upstream sent was refused by the 2026-07-28 schema checks or the
    /// sensitive-forms policy.
    Refused,
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
            Self::SessionNotFound => "session_not_found",
            Self::Refused => "refused",
        }
    }
}
