//! The front-facing error model: every way a 2026-07-28 request can fail, and the one mapping
//! from each to its JSON-RPC code, HTTP status and fixed metric label (protocol.md §4.2).
//!
//! Internal detail (why a `requestState` was refused, what the upstream said when it died) goes
//! to logs and metrics; the client sees a message that names the cause without leaking secrets.

use http::StatusCode;
use serde_json::{json, Value};

use crate::protocol::codes;
use crate::protocol::jsonrpc::ErrorObject;
use crate::protocol::FRONT_SUPPORTED_VERSIONS;

/// Why a front request failed.
#[derive(Debug, thiserror::Error)]
pub enum FrontError {
    #[error("parse error: {0}")]
    Parse(String),
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    #[error("method not found: {0}")]
    MethodNotFound(String),
    #[error("invalid params: {0}")]
    InvalidParams(String),
    #[error("header mismatch: {0}")]
    HeaderMismatch(String),
    #[error("unsupported protocol version {requested:?}")]
    UnsupportedVersion { requested: String },
    #[error("missing required client capability")]
    MissingCapability { required: Value },
    /// The state failed verification; `reason` is for metrics and logs only.
    #[error("invalid or expired requestState ({reason})")]
    InvalidState { reason: &'static str },
    #[error("too many input rounds (the limit is {limit})")]
    TooManyRounds { limit: u32 },
    #[error("too many questions in one round (the limit is {limit})")]
    TooManyQuestions { limit: usize },
    /// A JSON-RPC error from the upstream server, already mapped to 2026-07-28 codes.
    #[error("upstream error {}: {}", .0.code, .0.message)]
    Upstream(ErrorObject),
    #[error("upstream unavailable: {0}")]
    UpstreamUnavailable(String),
    #[error("upstream timed out: {0}")]
    UpstreamTimeout(String),
    #[error("unauthorized: {0}")]
    Unauthorized(String),
    #[error("origin not allowed: {0}")]
    ForbiddenOrigin(String),
    #[error("request body larger than {limit} bytes")]
    PayloadTooLarge { limit: usize },
    #[error("HTTP method {0} not allowed; use POST")]
    HttpMethodNotAllowed(String),
    #[error("not found: {0}")]
    PathNotFound(String),
    #[error("unsupported media type: {0}")]
    UnsupportedMediaType(String),
    #[error("not acceptable: {0}")]
    NotAcceptable(String),
    #[error("gateway overloaded")]
    Overloaded,
    #[error("internal error: {0}")]
    Internal(String),
}

// === impl FrontError ===

impl FrontError {
    /// The JSON-RPC error code sent to the client.
    pub fn code(&self) -> i64 {
        match self {
            Self::Parse(_) => codes::PARSE_ERROR,
            Self::InvalidRequest(_)
            | Self::Unauthorized(_)
            | Self::ForbiddenOrigin(_)
            | Self::PayloadTooLarge { .. }
            | Self::HttpMethodNotAllowed(_)
            | Self::PathNotFound(_)
            | Self::UnsupportedMediaType(_)
            | Self::NotAcceptable(_) => codes::INVALID_REQUEST,
            Self::MethodNotFound(_) => codes::METHOD_NOT_FOUND,
            Self::InvalidParams(_) | Self::InvalidState { .. } => codes::INVALID_PARAMS,
            Self::TooManyRounds { .. } | Self::TooManyQuestions { .. } => codes::INVALID_PARAMS,
            Self::HeaderMismatch(_) => codes::HEADER_MISMATCH,
            Self::UnsupportedVersion { .. } => codes::UNSUPPORTED_PROTOCOL_VERSION,
            Self::MissingCapability { .. } => codes::MISSING_CLIENT_CAPABILITY,
            Self::Upstream(e) => e.code,
            Self::UpstreamUnavailable(_)
            | Self::UpstreamTimeout(_)
            | Self::Overloaded
            | Self::Internal(_) => codes::INTERNAL_ERROR,
        }
    }

    /// The HTTP status of a JSON response carrying this error.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::MethodNotFound(_) | Self::PathNotFound(_) => StatusCode::NOT_FOUND,
            Self::Upstream(_) => StatusCode::OK,
            Self::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            Self::ForbiddenOrigin(_) => StatusCode::FORBIDDEN,
            Self::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::HttpMethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            Self::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::NotAcceptable(_) => StatusCode::NOT_ACCEPTABLE,
            Self::UpstreamUnavailable(_) => StatusCode::BAD_GATEWAY,
            Self::UpstreamTimeout(_) => StatusCode::GATEWAY_TIMEOUT,
            Self::Overloaded => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            _ => StatusCode::BAD_REQUEST,
        }
    }

    /// A fixed label for metrics and logs (never derived from user input).
    pub fn label(&self) -> &'static str {
        match self {
            Self::Parse(_) => "parse_error",
            Self::InvalidRequest(_) => "invalid_request",
            Self::MethodNotFound(_) => "method_not_found",
            Self::InvalidParams(_) => "invalid_params",
            Self::HeaderMismatch(_) => "header_mismatch",
            Self::UnsupportedVersion { .. } => "unsupported_version",
            Self::MissingCapability { .. } => "missing_capability",
            Self::InvalidState { .. } => "invalid_state",
            Self::TooManyRounds { .. } => "too_many_rounds",
            Self::TooManyQuestions { .. } => "too_many_questions",
            Self::Upstream(_) => "upstream_error",
            Self::UpstreamUnavailable(_) => "upstream_unavailable",
            Self::UpstreamTimeout(_) => "upstream_timeout",
            Self::Unauthorized(_) => "unauthorized",
            Self::ForbiddenOrigin(_) => "forbidden_origin",
            Self::PayloadTooLarge { .. } => "payload_too_large",
            Self::HttpMethodNotAllowed(_) => "http_method_not_allowed",
            Self::PathNotFound(_) => "path_not_found",
            Self::UnsupportedMediaType(_) => "unsupported_media_type",
            Self::NotAcceptable(_) => "not_acceptable",
            Self::Overloaded => "overloaded",
            Self::Internal(_) => "internal",
        }
    }

    /// The JSON-RPC error object sent to the client.
    pub fn to_object(&self) -> ErrorObject {
        match self {
            Self::Upstream(e) => e.clone(),
            Self::InvalidState { .. } => object(self.code(), "Invalid or expired requestState".into(), None),
            Self::UnsupportedVersion { requested } => object(
                self.code(),
                "Unsupported protocol version".into(),
                Some(json!({ "supported": FRONT_SUPPORTED_VERSIONS, "requested": requested })),
            ),
            Self::MissingCapability { required } => object(
                self.code(),
                "Missing required client capability".into(),
                Some(json!({ "requiredCapabilities": required })),
            ),
            // Internal errors are logged in full; the client only learns that one happened.
            Self::Internal(_) => object(self.code(), "Internal error".into(), None),
            _ => object(self.code(), self.to_string(), None),
        }
    }
}

fn object(code: i64, message: String, data: Option<Value>) -> ErrorObject {
    ErrorObject { code, message, data }
}

/// Maps a JSON-RPC error from a legacy upstream onto 2026-07-28 codes: `-32002` (resource not
/// found) becomes `-32602`, and no undefined code from the reserved `-32020..=-32099` range leaks
/// through (those become `-32603`, keeping the upstream's message).
pub fn map_upstream_error(mut error: ErrorObject) -> ErrorObject {
    match error.code {
        codes::LEGACY_RESOURCE_NOT_FOUND => error.code = codes::INVALID_PARAMS,
        -32099..=-32020 => {
            error.code = codes::INTERNAL_ERROR;
            error.data = None;
        }
        _ => {}
    }
    error
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_mandated_statuses() {
        assert_eq!(FrontError::MethodNotFound("ping".into()).status(), StatusCode::NOT_FOUND);
        assert_eq!(FrontError::MethodNotFound("ping".into()).code(), -32601);
        assert_eq!(FrontError::HeaderMismatch("x".into()).code(), -32020);
        let e = FrontError::MissingCapability { required: json!({"sampling": {}}) };
        assert_eq!((e.code(), e.status()), (-32021, StatusCode::BAD_REQUEST));
        assert_eq!(e.to_object().data, Some(json!({"requiredCapabilities": {"sampling": {}}})));
        let e = FrontError::UnsupportedVersion { requested: "1900-01-01".into() };
        assert_eq!((e.code(), e.status()), (-32022, StatusCode::BAD_REQUEST));
        assert_eq!(e.to_object().data.unwrap()["requested"], "1900-01-01");
    }

    #[test]
    fn state_errors_are_generic_for_the_client() {
        let a = FrontError::InvalidState { reason: "expired" }.to_object();
        let b = FrontError::InvalidState { reason: "integrity" }.to_object();
        assert_eq!(a, b);
        assert_eq!(a.code, -32602);
    }

    #[test]
    fn upstream_codes_are_mapped() {
        let e = |code| ErrorObject { code, message: "m".into(), data: Some(json!(1)) };
        assert_eq!(map_upstream_error(e(-32002)).code, -32602);
        assert_eq!(map_upstream_error(e(-32042)).code, -32603);
        assert_eq!(map_upstream_error(e(-32042)).data, None);
        assert_eq!(map_upstream_error(e(-32602)).code, -32602);
        assert_eq!(map_upstream_error(e(-32000)).code, -32000);
    }

    #[test]
    fn internal_details_are_not_sent() {
        let o = FrontError::Internal("key file /secret unreadable".into()).to_object();
        assert!(!o.message.contains("secret"));
    }
}
