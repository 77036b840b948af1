//! The error boundary: codes and statuses, and that nothing the upstream said reaches the client.

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
    let a = FrontError::from(StateError::Expired { expires_at: 1, now: 2 }).to_object();
    let b = FrontError::from(StateError::Integrity).to_object();
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
fn a_legacy_resource_not_found_becomes_invalid_params_naming_the_uri() {
    let e = |code, message: &str| ErrorObject { code, message: message.into(), data: Some(json!("x")) };
    let uri = "test://missing";
    let wanted = ErrorObject {
        code: -32602,
        message: "Resource not found".into(),
        data: Some(json!({"uri": "test://missing"})),
    };
    for legacy in [
        e(-32002, "Resource not found"),
        e(0, "Unknown resource: test://missing"),
        e(-32603, "Unknown resource: test://missing/"),
        e(-32602, "Resource test://missing not found"),
    ] {
        assert_eq!(map_read_error(legacy.clone(), uri), wanted, "{legacy:?}");
    }
    // Anything else is mapped as any upstream error, its own words kept.
    for other in [
        e(0, "Error reading resource test://missing: disk on fire"),
        e(-32602, "Resource template test://{id} not found"),
        e(-32603, "Unknown resource: "),
    ] {
        assert_eq!(map_read_error(other.clone(), uri), map_upstream_error(other));
    }
}

#[test]
fn internal_details_are_not_sent() {
    let o = FrontError::Internal("key file /secret unreadable".into()).to_object();
    assert!(!o.message.contains("secret"));
}

fn io_refused() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused by 10.0.0.9")
}

#[test]
fn upstream_failures_get_fixed_messages_and_keep_their_source() {
    let body = b"Traceback secret (most recent call last)";
    let e = FrontError::from(UpstreamError::http(StatusCode::INTERNAL_SERVER_ERROR, body));
    assert_eq!(e.to_object().message, "upstream returned HTTP 500");
    assert_eq!(e.status(), StatusCode::BAD_GATEWAY);
    assert!(e.detail().contains("Traceback secret"), "{}", e.detail());
    assert_eq!(e.upstream_failure().map(UpstreamError::label), Some("http_status"));

    let e = FrontError::from(UpstreamError::Closed("peer said: secret".into()));
    assert_eq!(e.to_object().message, "upstream server unavailable: connection closed");
    let e = FrontError::from(UpstreamError::Initialize("server chose version \"secret\"".into()));
    assert_eq!(e.to_object().message, "upstream server unavailable: initialize failed");
    let e = FrontError::from(UpstreamError::Protocol("bad frame <secret>".into()));
    assert_eq!(e.to_object().message, "upstream server unavailable: invalid response");

    let e = FrontError::from(UpstreamError::Timeout(std::time::Duration::from_secs(3)));
    assert_eq!(
        (e.to_object().message.as_str(), e.status()),
        ("upstream server timed out", StatusCode::GATEWAY_TIMEOUT)
    );
}

#[test]
fn a_refused_connection_is_named_without_the_os_text() {
    assert_eq!(connect_cause(&io_refused()), "connection refused");
    let other = std::io::Error::other("dns lookup of secret.internal failed");
    assert_eq!(connect_cause(&other), "cannot connect");
}

#[test]
fn settings_and_seal_failures_are_internal_and_hidden() {
    let e = FrontError::from(UpstreamError::Settings("token=secret".into()));
    assert!(matches!(e, FrontError::Internal(_)));
    assert_eq!(e.upstream_failure().map(UpstreamError::label), Some("settings"));
    assert_eq!(e.to_object().message, "Internal error");
    assert!(e.detail().contains("token=secret"));
    let e = FrontError::from(StateError::Seal);
    assert_eq!((e.label(), e.to_object().message.as_str()), (OutcomeLabel::Internal, "Internal error"));
}

#[test]
fn client_input_errors_convert_to_their_codes() {
    let e = FrontError::from(StateError::Expired { expires_at: 1, now: 2 });
    assert!(matches!(e, FrontError::InvalidState(StateError::Expired { .. })));
    assert!(e.detail().contains("expired at 1 (now 2)"), "{}", e.detail());
    let e = FrontError::from(ClaimsError::TooManyRounds { max: 8 });
    assert!(matches!(e, FrontError::TooManyRounds { limit: 8 }));
    let e = FrontError::from(ClaimsError::StateNotString);
    assert_eq!(e.code(), -32602);
    let e = FrontError::from(InputError::NotAnObject);
    assert_eq!((e.code(), e.status()), (-32602, StatusCode::BAD_REQUEST));
    let json = serde_json::from_slice::<Value>(b"{").unwrap_err();
    assert_eq!(FrontError::from(EnvelopeError::Json(json)).code(), -32700);
    assert_eq!(FrontError::from(EnvelopeError::Version).code(), -32600);
    let e = FrontError::from(AuthError::Missing);
    assert_eq!(e.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(e.to_object().message, "unauthorized: missing bearer token");
}

#[test]
fn a_key_problem_of_the_gateway_is_only_an_invalid_token_for_the_client() {
    use jsonwebtoken::errors::{Error, ErrorKind};
    let key =
        AuthError::Invalid(Error::from(ErrorKind::InvalidRsaKey("modulus of key-secret-7 too short".into())));
    let e = FrontError::from(key);
    assert_eq!(e.to_object().message, "unauthorized: invalid token");
    assert!(e.detail().contains("key-secret-7"), "{}", e.detail());
    let expired = FrontError::from(AuthError::Invalid(Error::from(ErrorKind::ExpiredSignature)));
    assert_eq!(expired.to_object().message, "unauthorized: token expired");
}

#[test]
fn a_replayed_single_use_state_looks_like_any_invalid_state() {
    let replayed = FrontError::from(StoreError::Replayed);
    let expired = FrontError::from(StateError::Expired { expires_at: 1, now: 2 });
    assert_eq!(replayed.to_object(), expired.to_object());
    assert_eq!((replayed.status(), replayed.label()), (expired.status(), expired.label()));
    assert!(replayed.detail().contains("already used"), "the log line says why");
}

#[test]
fn an_unreachable_state_store_fails_closed_with_a_fixed_message() {
    let io = redis::RedisError::from(io_refused());
    let e = FrontError::from(StoreError::Unavailable(io));
    assert_eq!((e.code(), e.status()), (-32603, StatusCode::SERVICE_UNAVAILABLE));
    assert_eq!(e.to_object().message, "state store unavailable");
    assert_eq!(e.label(), OutcomeLabel::StateStoreUnavailable);
    assert!(e.detail().len() > "state store unavailable".len(), "the cause stays in the log line");
    let e = FrontError::from(StoreError::Timeout(std::time::Duration::from_secs(1)));
    assert_eq!(
        (e.to_object().message.as_str(), e.status()),
        ("state store unavailable", StatusCode::SERVICE_UNAVAILABLE)
    );
}

#[test]
fn a_rate_limited_request_is_429_naming_its_limit() {
    use crate::limits::{Limit, LimitError};
    let limit = Limit::Tool(std::sync::Arc::from("search"));
    let e = FrontError::from(LimitError { limit, retry_after: std::time::Duration::from_millis(1500) });
    assert_eq!((e.code(), e.status()), (-32000, StatusCode::TOO_MANY_REQUESTS));
    let object = e.to_object();
    assert_eq!(object.message, r#"rate limit exceeded: tool "search""#);
    assert_eq!(object.data, Some(json!({"limit": "tool", "tool": "search", "retryAfterSeconds": 2})));
    assert_eq!(e.label(), OutcomeLabel::RateLimited);
}
