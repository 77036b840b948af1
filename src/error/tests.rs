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

/// One error of every kind the front can answer, with the code, status and label its row of the
/// table in docs/src/front-checks.md gives it.
fn every_kind() -> Vec<(FrontError, i64, u16, OutcomeLabel)> {
    use crate::mrtr::TaskIdError;
    use std::time::Duration;
    use OutcomeLabel as L;
    let secs = Duration::from_secs(1);
    let limit = || LimitError { limit: Limit::Principal, retry_after: secs };
    let denied = Denied { message: "tools/call of t".into(), challenge: None, method: "tools/call" };
    let relayed = ErrorObject { code: -32602, message: "m".into(), data: None };
    // Built directly, as `From<TaskError>` builds no `Task` of the kinds it turns into others
    // (`ExtensionRequired`, `Upstream`, `Unavailable`, `OwnerRefused`): those answer the same
    // way whatever builds them.
    let task = |e: TaskError| FrontError::Task(e);
    vec![
        (FrontError::Parse("x".into()), -32700, 400, L::ParseError),
        (FrontError::InvalidRequest("x".into()), -32600, 400, L::InvalidRequest),
        (FrontError::MethodNotFound("x".into()), -32601, 404, L::MethodNotFound),
        (FrontError::InvalidParams("x".into()), -32602, 400, L::InvalidParams),
        (FrontError::HeaderMismatch("x".into()), -32020, 400, L::HeaderMismatch),
        (FrontError::UnsupportedVersion { requested: "x".into() }, -32022, 400, L::UnsupportedVersion),
        (FrontError::MissingCapability { required: json!({}) }, -32021, 400, L::MissingCapability),
        (FrontError::InvalidState(StateError::Integrity), -32602, 400, L::InvalidState),
        (FrontError::TooManyRounds { limit: 8 }, -32602, 400, L::TooManyRounds),
        (FrontError::TooManyQuestions { limit: 8 }, -32602, 400, L::TooManyQuestions),
        (FrontError::StateTooLarge { limit: 8 }, -32602, 400, L::StateTooLarge),
        (FrontError::Upstream(relayed.clone()), -32602, 200, L::UpstreamError),
        (FrontError::UpstreamUnavailable(UpstreamError::SessionExpired), -32603, 502, L::UpstreamUnavailable),
        (FrontError::UpstreamTimeout(UpstreamError::Timeout(secs)), -32603, 504, L::UpstreamTimeout),
        (FrontError::UpstreamBusy(UpstreamError::QueueFull { limit: 1 }), -32603, 503, L::Overloaded),
        (FrontError::Unauthorized(AuthError::Missing), -32600, 401, L::Unauthorized),
        (FrontError::Unauthorized(AuthError::KeysUnavailable), -32600, 503, L::Unauthorized),
        (FrontError::ForbiddenOrigin("x".into()), -32600, 403, L::ForbiddenOrigin),
        (FrontError::Forbidden(denied), -32600, 403, L::Forbidden),
        (FrontError::PayloadTooLarge { limit: 8 }, -32600, 413, L::PayloadTooLarge),
        (FrontError::BodyTimeout(secs), -32600, 408, L::BodyTimeout),
        (FrontError::HttpMethodNotAllowed("GET".into()), -32600, 405, L::HttpMethodNotAllowed),
        (FrontError::PathNotFound("/x".into()), -32600, 404, L::PathNotFound),
        (FrontError::UnsupportedMediaType("x".into()), -32600, 415, L::UnsupportedMediaType),
        (FrontError::NotAcceptable("x".into()), -32600, 406, L::NotAcceptable),
        (FrontError::Overloaded, -32603, 503, L::Overloaded),
        (FrontError::RequestTimeout, -32603, 504, L::RequestTimeout),
        (FrontError::internal("x"), -32603, 500, L::Internal),
        (FrontError::RateLimited(limit()), -32000, 429, L::RateLimited),
        (FrontError::StateReplayed(StoreError::Replayed), -32602, 400, L::InvalidState),
        (FrontError::StateStoreUnavailable(StoreError::Timeout(secs)), -32603, 503, L::StateStoreUnavailable),
        (FrontError::Listen(ListenError::PerPrincipal { limit: 1 }), -32000, 429, L::ListenRefused),
        (FrontError::Listen(ListenError::Total { limit: 1 }), -32603, 503, L::ListenRefused),
        (FrontError::Relayed { error: relayed, status: StatusCode::CONFLICT }, -32602, 409, L::UpstreamError),
        (FrontError::ParkedCallAnswered, -32602, 400, L::InvalidState),
        (FrontError::Refused("x".into()), -32603, 200, L::Refused),
        (task(TaskError::ExtensionRequired), -32021, 400, L::MissingCapability),
        (task(TaskError::UnknownTask(TaskIdError::Principal)), -32602, 400, L::InvalidParams),
        (task(TaskError::OtherOwner), -32602, 400, L::InvalidParams),
        (task(TaskError::RoundOver), -32602, 400, L::InvalidParams),
        (task(TaskError::RoundMismatch), -32602, 400, L::InvalidParams),
        (task(TaskError::Full { limit: 1 }), -32603, 503, L::Overloaded),
        (task(TaskError::PrincipalFull { limit: 1 }), -32000, 429, L::RateLimited),
        (
            task(TaskError::Upstream(ErrorObject { code: -1, message: "m".into(), data: None })),
            -1,
            400,
            L::UpstreamError,
        ),
        (task(TaskError::Unavailable(UpstreamError::SessionExpired)), -32603, 400, L::UpstreamUnavailable),
        (task(TaskError::Malformed("x")), -32603, 502, L::UpstreamError),
        (task(TaskError::Seal(TaskIdError::Handle)), -32603, 500, L::Internal),
        (task(TaskError::OwnerGone("x".into())), -32603, 503, L::UpstreamUnavailable),
        (task(TaskError::OwnerFailed("x".into())), -32603, 502, L::UpstreamUnavailable),
        (
            task(TaskError::OwnerRefused {
                error: ErrorObject { code: -7, message: "m".into(), data: None },
                status: 409,
            }),
            -7,
            400,
            L::UpstreamError,
        ),
    ]
}

#[test]
fn every_kind_of_error_has_its_code_status_and_label() {
    for (e, code, status, label) in every_kind() {
        assert_eq!((e.code(), e.status().as_u16(), e.label()), (code, status, label), "{e:?}");
        assert_eq!(e.is_server_side(), status >= 500, "{e:?}");
        assert_eq!(e.to_object().code, code, "{e:?}");
    }
}

#[test]
fn only_upstream_failures_are_counted_as_such() {
    let label = |e: FrontError| e.upstream_failure().map(UpstreamError::label);
    let secs = std::time::Duration::from_secs(1);
    assert_eq!(
        label(FrontError::UpstreamUnavailable(UpstreamError::SessionExpired)),
        Some("session_expired")
    );
    assert_eq!(label(FrontError::UpstreamTimeout(UpstreamError::Timeout(secs))), Some("timeout"));
    assert_eq!(label(FrontError::UpstreamBusy(UpstreamError::PoolExhausted(secs))), Some("pool_exhausted"));
    assert_eq!(label(FrontError::internal(UpstreamError::Settings("x".into()))), Some("settings"));
    assert_eq!(label(FrontError::internal("not an upstream failure")), None);
    assert_eq!(label(FrontError::Overloaded), None);
}

#[test]
fn upstream_failures_convert_by_kind() {
    let secs = std::time::Duration::from_secs(1);
    let from = FrontError::from;
    assert!(matches!(from(UpstreamError::Timeout(secs)), FrontError::UpstreamTimeout(_)));
    for busy in [
        UpstreamError::PoolExhausted(secs),
        UpstreamError::KeyExhausted(secs),
        UpstreamError::QueueFull { limit: 1 },
        UpstreamError::PrincipalShare { limit: 1 },
    ] {
        assert!(matches!(from(busy), FrontError::UpstreamBusy(_)));
    }
    assert!(matches!(from(UpstreamError::Settings("x".into())), FrontError::Internal(_)));
    assert!(matches!(from(UpstreamError::StreamEnded), FrontError::UpstreamUnavailable(_)));
}

#[test]
fn every_upstream_failure_has_its_fixed_message() {
    let secs = std::time::Duration::from_secs(1);
    let message = |e: UpstreamError| unavailable_message(&e);
    for (e, cause) in [
        (UpstreamError::Connect(Box::new(io_refused())), "connection refused"),
        (UpstreamError::Transport("secret".into()), "request failed"),
        (UpstreamError::SessionExpired, "session expired"),
        (UpstreamError::Timeout(secs), "timed out"),
        (UpstreamError::PoolExhausted(secs), "no session free"),
        (UpstreamError::QueueFull { limit: 1 }, "no session free"),
        (UpstreamError::KeyExhausted(secs), "no session of this client free"),
        (UpstreamError::PrincipalShare { limit: 1 }, "this client holds its share of sessions"),
        (UpstreamError::Settings("secret".into()), "misconfigured"),
        (UpstreamError::Spawn(std::io::Error::other("secret")), "the upstream command could not be started"),
        (UpstreamError::StreamEnded, "its event stream ended"),
        (UpstreamError::ProcessEnded("exit status 3".into()), "exit status 3"),
    ] {
        assert_eq!(message(e), format!("upstream server unavailable: {cause}"));
    }
    let share = FrontError::from(UpstreamError::PrincipalShare { limit: 4 });
    assert_eq!(
        share.to_object().message,
        "gateway overloaded: this client holds its share of upstream sessions (4)"
    );
    let pool = FrontError::from(UpstreamError::PoolExhausted(secs));
    assert_eq!(pool.to_object().message, "gateway overloaded: no upstream session is free");
}

#[test]
fn connect_failures_are_named_by_cause_through_their_wrappers() {
    let timed_out = std::io::Error::new(std::io::ErrorKind::TimedOut, "secret");
    assert_eq!(connect_cause(&timed_out), "connect timed out");
    let tls = || rustls::Error::General("secret".into());
    assert_eq!(connect_cause(&tls()), "TLS handshake failed");
    let wrapped = std::io::Error::other(tls());
    assert_eq!(connect_cause(&wrapped), "TLS handshake failed");
    let twice = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, std::io::Error::other(tls()));
    assert_eq!(connect_cause(&twice), "TLS handshake failed");
    let plain = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, std::io::Error::other("secret"));
    assert_eq!(connect_cause(&plain), "connection refused");
    let up = FrontError::from(UpstreamError::Connect(Box::new(wrapped)));
    assert_eq!(up.to_object().message, "upstream server unavailable: TLS handshake failed");
}

#[test]
fn every_token_fault_is_named_and_nothing_else() {
    use jsonwebtoken::errors::{Error, ErrorKind};
    let message = |kind: ErrorKind| auth_message(&AuthError::Invalid(Error::from(kind)));
    let claim = |c: &str| message(ErrorKind::MissingRequiredClaim(c.into()));
    assert_eq!(message(ErrorKind::ExpiredSignature), "token expired");
    assert_eq!(message(ErrorKind::ImmatureSignature), "token not yet valid");
    assert_eq!(message(ErrorKind::InvalidIssuer), "token issuer or audience not accepted");
    assert_eq!(message(ErrorKind::InvalidAudience), "token issuer or audience not accepted");
    assert_eq!(claim("aud"), "token has no `aud` claim");
    assert_eq!(claim("iss"), "token has no `iss` claim");
    assert_eq!(claim("sub"), "token has no `sub` claim (a non-empty string)");
    assert_eq!(claim("exp"), "token has no `exp` claim");
    assert_eq!(claim("nbf"), "invalid token");
    assert_eq!(message(ErrorKind::InvalidSignature), "invalid token");
}

#[test]
fn refused_task_requests_have_fixed_messages() {
    use crate::mrtr::TaskIdError;
    let message = |e: TaskError| FrontError::Task(e).to_object().message;
    assert_eq!(message(TaskError::UnknownTask(TaskIdError::Principal)), "unknown or expired taskId");
    assert!(message(TaskError::OtherOwner).contains("another gateway replica it cannot reach"));
    assert_eq!(message(TaskError::OwnerGone("secret".into())), crate::tasks::forward::GONE);
    assert_eq!(
        message(TaskError::OwnerFailed("secret".into())),
        "the replica running this task gave no usable answer"
    );
    assert_eq!(
        message(TaskError::Malformed("secret")),
        "the upstream server answered a task request with no task"
    );
    assert_eq!(message(TaskError::Seal(TaskIdError::Handle)), "internal error");
    assert_eq!(
        message(TaskError::Unavailable(UpstreamError::StreamEnded)),
        "upstream server unavailable while creating the task"
    );
    assert_eq!(message(TaskError::Full { limit: 3 }), "too many tasks on this replica (the limit is 3)");
}

#[test]
fn task_refusals_convert_to_what_the_client_is_sent() {
    let e = FrontError::from(TaskError::ExtensionRequired);
    assert_eq!(
        e.to_object().data,
        Some(json!({"requiredCapabilities": crate::tasks::wire::required_capabilities()}))
    );
    let e =
        FrontError::from(TaskError::Upstream(ErrorObject { code: -32002, message: "m".into(), data: None }));
    assert!(matches!(e, FrontError::Upstream(ErrorObject { code: -32602, .. })), "{e:?}");
    let e =
        FrontError::from(TaskError::Unavailable(UpstreamError::Timeout(std::time::Duration::from_secs(1))));
    assert!(matches!(e, FrontError::UpstreamTimeout(_)), "{e:?}");
    let refused = ErrorObject { code: -32602, message: "m".into(), data: None };
    let e = FrontError::from(TaskError::OwnerRefused { error: refused.clone(), status: 404 });
    assert_eq!((e.status(), e.to_object()), (StatusCode::NOT_FOUND, refused.clone()));
    let e = FrontError::from(TaskError::OwnerRefused { error: refused, status: 1000 });
    assert_eq!(e.status(), StatusCode::BAD_GATEWAY, "a status that is none stands for a failed owner");
    assert!(matches!(FrontError::from(TaskError::RoundOver), FrontError::Task(TaskError::RoundOver)));
}

#[test]
fn every_foreign_error_converts_to_its_kind() {
    let json = |text: &str| serde_json::from_str::<Value>(text).unwrap_err();
    let data = serde_json::from_str::<u8>("\"x\"").unwrap_err();
    assert!(matches!(FrontError::from(EnvelopeError::Json(json("{x"))), FrontError::Parse(_)));
    assert!(matches!(FrontError::from(EnvelopeError::Json(json("{"))), FrontError::Parse(_)));
    assert!(matches!(FrontError::from(EnvelopeError::Json(data)), FrontError::InvalidRequest(_)));
    assert!(matches!(
        FrontError::from(StateError::Encode(serde_json::from_str::<u8>("x").unwrap_err())),
        FrontError::Internal(_)
    ));
    assert!(matches!(
        FrontError::from(StateError::SealTooLarge { size: 9, limit: 8 }),
        FrontError::StateTooLarge { limit: 8 }
    ));
    assert!(matches!(FrontError::from(InputError::NotAnObject), FrontError::InvalidParams(_)));
    let denied = Denied { message: "refused".into(), challenge: None, method: "tools/call" };
    assert!(matches!(FrontError::from(denied), FrontError::Forbidden(_)));
    let e = FrontError::from(CapsError::NotAnObject);
    assert!(
        matches!(&e, FrontError::InvalidParams(m) if m.starts_with("_meta clientCapabilities: ")),
        "{e:?}"
    );
    let e = FrontError::from(crate::protocol::log_level::LogLevelError);
    assert!(matches!(e, FrontError::InvalidParams(_)), "{e:?}");
    let limit = LimitError { limit: Limit::Principal, retry_after: std::time::Duration::from_secs(1) };
    assert!(matches!(FrontError::from(limit), FrontError::RateLimited(_)));
    let io = redis::RedisError::from(io_refused());
    assert!(matches!(FrontError::from(StoreError::Unavailable(io)), FrontError::StateStoreUnavailable(_)));
    assert!(matches!(FrontError::from(StoreError::Replayed), FrontError::StateReplayed(_)));
    assert!(matches!(FrontError::from(ListenError::Invalid("x".into())), FrontError::InvalidParams(_)));
    assert!(matches!(FrontError::from(ListenError::TooManyUris { limit: 1 }), FrontError::InvalidParams(_)));
    assert!(matches!(
        FrontError::from(ListenError::ShuttingDown),
        FrontError::Listen(ListenError::ShuttingDown)
    ));
    let listen = FrontError::from(ListenError::Upstream(UpstreamError::StreamEnded));
    assert!(matches!(listen, FrontError::UpstreamUnavailable(_)), "{listen:?}");
}

#[tokio::test]
async fn a_panicked_task_is_an_internal_error() {
    let join = tokio::spawn(async { panic!("secret") }).await.unwrap_err();
    let e = FrontError::from(join);
    assert!(matches!(e, FrontError::Internal(_)));
    assert_eq!(e.to_object().message, "Internal error");
}

#[test]
fn every_outcome_label_is_a_distinct_snake_case_name() {
    use OutcomeLabel as L;
    let all = [
        L::Complete,
        L::InputRequired,
        L::Streamed,
        L::Accepted,
        L::ParseError,
        L::InvalidRequest,
        L::MethodNotFound,
        L::InvalidParams,
        L::HeaderMismatch,
        L::UnsupportedVersion,
        L::MissingCapability,
        L::InvalidState,
        L::TooManyRounds,
        L::TooManyQuestions,
        L::StateTooLarge,
        L::UpstreamError,
        L::UpstreamUnavailable,
        L::UpstreamTimeout,
        L::RequestTimeout,
        L::Unauthorized,
        L::ForbiddenOrigin,
        L::Forbidden,
        L::PayloadTooLarge,
        L::BodyTimeout,
        L::HttpMethodNotAllowed,
        L::PathNotFound,
        L::UnsupportedMediaType,
        L::NotAcceptable,
        L::Overloaded,
        L::Internal,
        L::Abandoned,
        L::RateLimited,
        L::StateStoreUnavailable,
        L::ListenRefused,
        L::SessionNotFound,
        L::Refused,
    ];
    let names: std::collections::HashSet<_> = all.iter().map(|l| l.as_str()).collect();
    assert_eq!(names.len(), all.len());
    for label in all {
        let name = label.as_str();
        let wanted: String = format!("{label:?}")
            .chars()
            .enumerate()
            .flat_map(|(i, c)| {
                let sep = (i > 0 && c.is_ascii_uppercase()).then_some('_');
                sep.into_iter().chain(std::iter::once(c.to_ascii_lowercase()))
            })
            .collect();
        assert_eq!(name, wanted);
    }
}

#[test]
fn an_upstream_or_relayed_error_reaches_the_client_as_it_was_answered() {
    let answered =
        ErrorObject { code: -32000, message: "no such city".into(), data: Some(json!({"city": "Atlantis"})) };
    assert_eq!(FrontError::Upstream(answered.clone()).to_object(), answered);
    let relayed = FrontError::Relayed { error: answered.clone(), status: StatusCode::OK };
    assert_eq!(relayed.to_object(), answered);
}
