//! Why a relayed legacy request failed, and the one mapping from each case to the HTTP status
//! and JSON-RPC error a legacy client gets.
//!
//! The legacy surface answers in the legacy dialect (the status codes and `-32000`/`-32001`
//! errors of 2025-era Streamable HTTP servers), not in the 2026-07-28 one of
//! [`crate::error::FrontError`], so this enum is its own boundary: [`LegacyError::response`]
//! is the only place it becomes bytes. The client gets a fixed message naming the cause; the
//! upstream's text and every source stay in [`LegacyError::detail`], for the log line, and
//! [`LegacyError::label`], for the metric.

use std::time::Duration;

use http::header::CONTENT_TYPE;
use http::{HeaderValue, Response, StatusCode};
use serde_json::Value;

use crate::body::FrontBody;
use crate::mrtr::SessionIdError;
use crate::protocol::codes;
use crate::protocol::jsonrpc::{error_bytes, ErrorObject};
use crate::protocol::RequestId;
use crate::upstream::UpstreamError;

/// The code 2025-era servers use for transport-level refusals.
pub(crate) const TRANSPORT_ERROR: i64 = -32000;
/// The code 2025-era servers use for an unknown session (with HTTP 404).
pub(crate) const SESSION_NOT_FOUND: i64 = -32001;

/// Why a legacy request was not relayed.
#[derive(Debug, thiserror::Error)]
pub enum LegacyError {
    #[error("too many legacy sessions on this gateway (the limit is {0})")]
    TooManySessions(usize),
    /// The principal holds `legacy.max_sessions_per_principal` sessions here already.
    #[error("this client holds its share of legacy sessions on this gateway ({0}); end one first")]
    PrincipalShare(usize),
    /// The id did not open; the exact reason is for the log and the metric.
    #[error("session not found ({})", .0.reason())]
    BadSessionId(#[source] SessionIdError),
    /// A session whose upstream lives in another replica, or one this replica ended.
    #[error("session not found on this gateway")]
    NotHere,
    /// The upstream no longer knows the session (it answered 404).
    #[error("session not found upstream")]
    UpstreamForgot,
    #[error("a request of a legacy session needs its Mcp-Session-Id header")]
    MissingSession,
    #[error("invalid message: {0}")]
    Invalid(String),
    #[error("HTTP method {0} not allowed here")]
    MethodNotAllowed(String),
    /// The upstream answered an HTTP error; `body` is its excerpt, for the log only.
    #[error("upstream answered HTTP {status}: {body}")]
    Status { status: StatusCode, code: Option<i64>, id: Option<RequestId>, body: String },
    #[error("upstream server did not answer within {0:?}")]
    Timeout(Duration),
    #[error("upstream server unreachable")]
    Transport(#[source] hyper_util::client::legacy::Error),
    #[error("upstream session failed")]
    Upstream(#[source] UpstreamError),
    #[error("relaying legacy clients: {0}")]
    Settings(String),
}

// === impl LegacyError ===

impl LegacyError {
    /// The HTTP status of the response.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::TooManySessions(_) | Self::PrincipalShare(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::BadSessionId(_) | Self::NotHere | Self::UpstreamForgot => StatusCode::NOT_FOUND,
            Self::MissingSession | Self::Invalid(_) => StatusCode::BAD_REQUEST,
            Self::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            Self::Status { status, .. } if status.is_client_error() => *status,
            Self::Status { .. } | Self::Transport(_) | Self::Upstream(_) => StatusCode::BAD_GATEWAY,
            Self::Timeout(_) => StatusCode::GATEWAY_TIMEOUT,
            Self::Settings(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn code(&self) -> i64 {
        match self {
            Self::BadSessionId(_) | Self::NotHere | Self::UpstreamForgot => SESSION_NOT_FOUND,
            Self::Status { code: Some(code), .. } => *code,
            Self::Invalid(_) => codes::INVALID_REQUEST,
            Self::Settings(_) => codes::INTERNAL_ERROR,
            _ => TRANSPORT_ERROR,
        }
    }

    /// The fixed message the client sees: it names the cause and holds nothing the upstream said.
    fn message(&self) -> String {
        match self {
            Self::BadSessionId(_) | Self::NotHere | Self::UpstreamForgot => "Session not found".to_owned(),
            Self::Status { status, .. } => format!("the upstream server refused the request (HTTP {status})"),
            Self::Transport(_) => "the upstream server is unreachable".to_owned(),
            Self::Upstream(_) => "the upstream session failed".to_owned(),
            Self::Settings(_) => "internal error".to_owned(),
            other => other.to_string(),
        }
    }

    /// The JSON-RPC error a legacy client gets, in a response or an event of its stream.
    pub(super) fn error_object(&self) -> ErrorObject {
        ErrorObject { code: self.code(), message: self.message(), data: None }
    }

    /// A fixed metric label.
    pub fn label(&self) -> &'static str {
        match self {
            Self::TooManySessions(_) => "too_many_sessions",
            Self::PrincipalShare(_) => "principal_share",
            Self::BadSessionId(e) => e.reason(),
            Self::NotHere => "not_here",
            Self::UpstreamForgot => "upstream_forgot",
            Self::MissingSession => "missing_session",
            Self::Invalid(_) => "invalid",
            Self::MethodNotAllowed(_) => "method_not_allowed",
            Self::Status { .. } => "upstream_status",
            Self::Timeout(_) => "upstream_timeout",
            Self::Transport(_) => "upstream_unreachable",
            Self::Upstream(_) => "upstream_session",
            Self::Settings(_) => "settings",
        }
    }

    /// The whole story for the log line; may hold upstream text, never send it to the client.
    pub fn detail(&self) -> String {
        crate::logging::chain(self)
    }

    /// The JSON-RPC error as the response a legacy client gets.
    pub fn response(&self, id: Option<&RequestId>) -> Response<FrontBody> {
        let id = match self {
            Self::Status { id: Some(upstream_id), .. } => Some(upstream_id),
            _ => id,
        };
        let mut r = Response::new(FrontBody::full(error_bytes(id, &self.error_object())));
        *r.status_mut() = self.status();
        r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Self::MethodNotAllowed(_) = self {
            r.headers_mut().insert(http::header::ALLOW, HeaderValue::from_static("POST, DELETE"));
        }
        r
    }
}

impl From<UpstreamError> for LegacyError {
    fn from(e: UpstreamError) -> Self {
        match e {
            UpstreamError::Timeout(d) => Self::Timeout(d),
            UpstreamError::SessionExpired => Self::UpstreamForgot,
            other => Self::Upstream(other),
        }
    }
}

/// The code and id of a JSON-RPC error body, if the upstream sent one.
pub(crate) fn error_parts(body: &[u8]) -> (Option<i64>, Option<RequestId>) {
    let Ok(v) = serde_json::from_slice::<Value>(body) else { return (None, None) };
    let code = v.pointer("/error/code").and_then(Value::as_i64);
    let id = v.get("id").and_then(|id| serde_json::from_value(id.clone()).ok());
    (code, id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_text_never_reaches_the_client() {
        let e = LegacyError::Status {
            status: StatusCode::BAD_REQUEST,
            code: Some(-32000),
            id: None,
            body: "secret upstream detail".to_owned(),
        };
        let r = e.response(None);
        assert_eq!(r.status(), StatusCode::BAD_REQUEST);
        let FrontBody::Full(Some(bytes)) = r.into_body() else { panic!("a full body") };
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains("secret"), "{text}");
        assert!(text.contains("-32000") && text.contains("HTTP 400"), "{text}");
        assert!(e.detail().contains("secret upstream detail"));
    }

    /// What a refused connection to a port nothing listens on gives the relay's client.
    async fn unreachable() -> hyper_util::client::legacy::Error {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build_http::<http_body_util::Empty<bytes::Bytes>>();
        let uri: http::Uri = format!("http://127.0.0.1:{port}/mcp").parse().unwrap();
        client.get(uri).await.expect_err("nothing listens there")
    }

    /// The status, the `Allow` header and the JSON-RPC error of `e`'s response to request 5.
    fn answered(e: &LegacyError) -> (u16, Option<String>, Value) {
        let r = e.response(Some(&RequestId::Number(5)));
        assert_eq!(r.headers()[CONTENT_TYPE], "application/json", "{e:?}");
        let allow = r.headers().get(http::header::ALLOW).map(|v| v.to_str().unwrap().to_owned());
        let status = r.status().as_u16();
        let FrontBody::Full(Some(bytes)) = r.into_body() else { panic!("a full body") };
        (status, allow, serde_json::from_slice(&bytes).unwrap())
    }

    #[tokio::test]
    async fn every_case_has_its_status_code_fixed_message_and_label() {
        let client_error =
            |status, code| LegacyError::Status { status, code, id: None, body: "upstream words".into() };
        let cases = [
            (
                LegacyError::TooManySessions(3),
                503,
                -32000,
                "too many legacy sessions on this gateway (the limit is 3)",
                "too_many_sessions",
            ),
            (
                LegacyError::PrincipalShare(2),
                503,
                -32000,
                "this client holds its share of legacy sessions on this gateway (2); end one first",
                "principal_share",
            ),
            (
                LegacyError::BadSessionId(SessionIdError::Principal),
                404,
                -32001,
                "Session not found",
                "principal",
            ),
            (
                LegacyError::BadSessionId(SessionIdError::Version(9)),
                404,
                -32001,
                "Session not found",
                "version",
            ),
            (LegacyError::NotHere, 404, -32001, "Session not found", "not_here"),
            (LegacyError::UpstreamForgot, 404, -32001, "Session not found", "upstream_forgot"),
            (
                LegacyError::MissingSession,
                400,
                -32000,
                "a request of a legacy session needs its Mcp-Session-Id header",
                "missing_session",
            ),
            (
                LegacyError::Invalid("no method".into()),
                400,
                codes::INVALID_REQUEST,
                "invalid message: no method",
                "invalid",
            ),
            (
                LegacyError::MethodNotAllowed("PUT".into()),
                405,
                -32000,
                "HTTP method PUT not allowed here",
                "method_not_allowed",
            ),
            (
                client_error(StatusCode::CONFLICT, Some(-32602)),
                409,
                -32602,
                "the upstream server refused the request (HTTP 409 Conflict)",
                "upstream_status",
            ),
            (
                client_error(StatusCode::INTERNAL_SERVER_ERROR, None),
                502,
                -32000,
                "the upstream server refused the request (HTTP 500 Internal Server Error)",
                "upstream_status",
            ),
            (
                LegacyError::Timeout(Duration::from_secs(2)),
                504,
                -32000,
                "upstream server did not answer within 2s",
                "upstream_timeout",
            ),
            (
                LegacyError::Transport(unreachable().await),
                502,
                -32000,
                "the upstream server is unreachable",
                "upstream_unreachable",
            ),
            (
                LegacyError::Upstream(UpstreamError::Closed("upstream words".into())),
                502,
                -32000,
                "the upstream session failed",
                "upstream_session",
            ),
            (
                LegacyError::Settings("upstream words".into()),
                500,
                codes::INTERNAL_ERROR,
                "internal error",
                "settings",
            ),
        ];
        for (e, status, code, message, label) in cases {
            let (got_status, allow, body) = answered(&e);
            assert_eq!(got_status, status, "{e:?}");
            assert_eq!(e.status().as_u16(), status, "{e:?}");
            assert_eq!(allow.as_deref(), (status == 405).then_some("POST, DELETE"), "{e:?}");
            assert_eq!(body["id"], 5, "{e:?}");
            assert_eq!(
                (body["error"]["code"].as_i64(), body["error"]["message"].as_str()),
                (Some(code), Some(message)),
                "{e:?}"
            );
            assert!(!body.to_string().contains("upstream words"), "{e:?}: {body}");
            assert_eq!(e.label(), label, "{e:?}");
        }
    }

    #[test]
    fn an_upstream_error_answers_the_id_the_upstream_named() {
        let refused = |id| LegacyError::Status {
            status: StatusCode::BAD_REQUEST,
            code: Some(-32600),
            id,
            body: String::new(),
        };
        assert_eq!(answered(&refused(Some(RequestId::Number(9)))).2["id"], 9);
        assert_eq!(answered(&refused(None)).2["id"], 5, "else the request's own");
    }

    #[test]
    fn an_upstream_session_error_keeps_its_cause() {
        let timeout = LegacyError::from(UpstreamError::Timeout(Duration::from_secs(3)));
        assert!(matches!(timeout, LegacyError::Timeout(d) if d == Duration::from_secs(3)));
        assert!(matches!(LegacyError::from(UpstreamError::SessionExpired), LegacyError::UpstreamForgot));
        let closed = LegacyError::from(UpstreamError::Closed("gone".into()));
        assert!(matches!(closed, LegacyError::Upstream(UpstreamError::Closed(ref w)) if w == "gone"));
        assert!(closed.detail().contains("gone"), "the upstream's words go to the log line");
    }

    #[test]
    fn error_parts_reads_code_and_id() {
        let (code, id) = error_parts(br#"{"jsonrpc":"2.0","id":3,"error":{"code":-32600,"message":"x"}}"#);
        assert_eq!((code, id), (Some(-32600), Some(RequestId::Number(3))));
        assert_eq!(error_parts(b"not json"), (None, None));
    }
}
