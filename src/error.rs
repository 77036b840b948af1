//! The front-facing error model: every way a 2026-07-28 request can fail, and the one mapping
//! from each to its JSON-RPC code, HTTP status and fixed metric label: a missing client
//! capability is 400 with `-32021`, an invalid `requestState` 400 with `-32602`, an upstream that
//! died 502 with `-32603` (docs/src/front-checks.md has the whole table).
//!
//! This is the one error boundary of the front: every foreign error (upstream, state codec,
//! claims, answers, authentication, envelope, capabilities, a failed task) becomes a
//! [`FrontError`] through a `From` impl here, and nowhere else. Internal detail (why a
//! `requestState` was refused, what the upstream said when it died, an upstream error body)
//! stays in the `#[source]` chain, for the one log line of the request ([`FrontError::detail`])
//! and the metrics; the client sees a fixed message that names the cause and carries no text
//! the upstream supplied. The JSON-RPC errors a legacy server answers a call with are its
//! protocol answer, not a failure of the gateway: they are relayed ([`FrontError::Upstream`]).

mod label;

pub use label::OutcomeLabel;

use std::error::Error as StdError;

use http::StatusCode;
use serde_json::{json, Value};

use crate::auth::{AuthError, Denied};
use crate::capabilities::CapsError;
use crate::limits::{Limit, LimitError, RATE_LIMITED_CODE};
use crate::mrtr::{ClaimsError, InputError, StateError};
use crate::protocol::codes;
use crate::protocol::jsonrpc::{EnvelopeError, ErrorObject};
use crate::protocol::log_level::LogLevelError;
use crate::protocol::params::ParamsError;
use crate::protocol::FRONT_SUPPORTED_VERSIONS;
use crate::state_store::StoreError;
use crate::subscriptions::ListenError;
use crate::tasks::TaskError;
use crate::upstream::UpstreamError;

/// Any error kept only as the source of an internal one.
pub type BoxError = Box<dyn StdError + Send + Sync>;

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
    /// The state failed verification; the exact reason is for metrics and logs only.
    #[error("invalid or expired requestState ({})", .0.reason())]
    InvalidState(#[source] StateError),
    #[error("too many input rounds (the limit is {limit})")]
    TooManyRounds { limit: u32 },
    #[error("too many questions in one round (the limit is {limit})")]
    TooManyQuestions { limit: usize },
    /// The answers so far make a state over `state.max_token_bytes`: the chain cannot go on.
    #[error("the conversation's state would exceed the gateway's limit of {limit} bytes")]
    StateTooLarge { limit: usize },
    /// A JSON-RPC error from the upstream server, already mapped to 2026-07-28 codes.
    #[error("upstream error {}: {}", .0.code, .0.message)]
    Upstream(ErrorObject),
    /// The legacy server could not be reached or failed; the message names only the cause.
    #[error("{}", unavailable_message(.0))]
    UpstreamUnavailable(#[source] UpstreamError),
    /// The legacy server did not answer in time (a request, a round or the whole call).
    #[error("upstream server timed out")]
    UpstreamTimeout(#[source] UpstreamError),
    /// Every upstream session is leased and none became free in time, or the client holds its
    /// share of them (the message says which).
    #[error("{}", busy_message(.0))]
    UpstreamBusy(#[source] UpstreamError),
    /// The message names what is wrong with the client's credentials, never a key problem of
    /// the gateway's (those stay in the source, for the log).
    #[error("unauthorized: {}", auth_message(.0))]
    Unauthorized(#[source] AuthError),
    #[error("origin not allowed: {0}")]
    ForbiddenOrigin(String),
    /// A call outside the principal's authorization rules (403 with an `insufficient_scope`
    /// challenge); the message names the method and its target, the client's own words.
    #[error("{0}")]
    Forbidden(Denied),
    #[error("request body larger than {limit} bytes")]
    PayloadTooLarge { limit: usize },
    #[error("request body not received within {0:?}")]
    BodyTimeout(std::time::Duration),
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
    /// The front stack's backstop timeout fired before any precise bound of the bridge or the
    /// pool did.
    #[error("no answer within the gateway's request timeout")]
    RequestTimeout,
    /// A bug or a misconfiguration; the client only learns that one happened.
    #[error("internal error")]
    Internal(#[source] BoxError),
    /// A `[limits]` bucket is empty; the message names the limit (a configured name only).
    #[error("{0}")]
    RateLimited(LimitError),
    /// A single-use state opened before: the client sees the same error as for any invalid state.
    #[error("invalid or expired requestState (replayed)")]
    StateReplayed(#[source] StoreError),
    /// Single use is on and the state store did not answer: fail closed.
    #[error("state store unavailable")]
    StateStoreUnavailable(#[source] StoreError),
    /// A `subscriptions/listen` past a bound on listen streams, or during shutdown; the
    /// message names the bound.
    #[error("{0}")]
    Listen(ListenError),
    /// The answer of the replica that holds a parked call, to a retry forwarded to it: already
    /// the fixed object it would have sent its own client.
    #[error("{}", .error.message)]
    Relayed { error: ErrorObject, status: StatusCode },
    /// A retry of a park-mode state whose parked call an earlier retry already continued:
    /// serving it again would mean replaying the call, repeating its side effects.
    #[error("this requestState was already answered: its parked call continued on an earlier retry; start the call again for a new run")]
    ParkedCallAnswered,
    /// The gateway refused what the upstream sent for a `prompts/get` or `resources/read` (an
    /// invalid question, one asking for a secret); the message names the target and the fixed
    /// reason, never the upstream's words. A `tools/call` gets an error result instead.
    #[error("{0}")]
    Refused(String),
    /// A task request refused by the task bridge (an unknown or expired `taskId`, a bound
    /// reached); the message names the cause, the source says why.
    #[error("{}", task_message(.0))]
    Task(#[source] TaskError),
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
            | Self::Forbidden(_)
            | Self::PayloadTooLarge { .. }
            | Self::BodyTimeout(_)
            | Self::HttpMethodNotAllowed(_)
            | Self::PathNotFound(_)
            | Self::UnsupportedMediaType(_)
            | Self::NotAcceptable(_) => codes::INVALID_REQUEST,
            Self::MethodNotFound(_) => codes::METHOD_NOT_FOUND,
            Self::InvalidParams(_)
            | Self::InvalidState { .. }
            | Self::StateReplayed(_)
            | Self::ParkedCallAnswered => codes::INVALID_PARAMS,
            Self::RateLimited(_) | Self::Listen(ListenError::PerPrincipal { .. }) => RATE_LIMITED_CODE,
            Self::Listen(_) | Self::Refused(_) => codes::INTERNAL_ERROR,
            Self::TooManyRounds { .. } | Self::TooManyQuestions { .. } | Self::StateTooLarge { .. } => {
                codes::INVALID_PARAMS
            }
            Self::HeaderMismatch(_) => codes::HEADER_MISMATCH,
            Self::Task(e) => task_code(e),
            Self::UnsupportedVersion { .. } => codes::UNSUPPORTED_PROTOCOL_VERSION,
            Self::MissingCapability { .. } => codes::MISSING_CLIENT_CAPABILITY,
            Self::Upstream(e) | Self::Relayed { error: e, .. } => e.code,
            Self::UpstreamUnavailable(_)
            | Self::UpstreamTimeout(_)
            | Self::UpstreamBusy(_)
            | Self::Overloaded
            | Self::RequestTimeout
            | Self::StateStoreUnavailable(_)
            | Self::Internal(_) => codes::INTERNAL_ERROR,
        }
    }

    /// The HTTP status of a JSON response carrying this error.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::MethodNotFound(_) | Self::PathNotFound(_) => StatusCode::NOT_FOUND,
            // The call's answer, like an upstream error: the request itself was served.
            Self::Upstream(_) | Self::Refused(_) => StatusCode::OK,
            Self::Relayed { status, .. } => *status,
            Self::Unauthorized(AuthError::KeysUnavailable) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            Self::ForbiddenOrigin(_) | Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::BodyTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            Self::HttpMethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            Self::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::NotAcceptable(_) => StatusCode::NOT_ACCEPTABLE,
            Self::UpstreamUnavailable(_) => StatusCode::BAD_GATEWAY,
            Self::UpstreamTimeout(_) | Self::RequestTimeout => StatusCode::GATEWAY_TIMEOUT,
            Self::Overloaded | Self::UpstreamBusy(_) | Self::StateStoreUnavailable(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            Self::RateLimited(_) | Self::Listen(ListenError::PerPrincipal { .. }) => {
                StatusCode::TOO_MANY_REQUESTS
            }
            Self::Listen(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            Self::Task(TaskError::Full { .. }) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Task(TaskError::PrincipalFull { .. }) => StatusCode::TOO_MANY_REQUESTS,
            Self::Task(TaskError::Malformed(_)) => StatusCode::BAD_GATEWAY,
            Self::Task(TaskError::Seal(_)) => StatusCode::INTERNAL_SERVER_ERROR,
            Self::Task(TaskError::OwnerGone(_)) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Task(TaskError::OwnerFailed(_)) => StatusCode::BAD_GATEWAY,
            _ => StatusCode::BAD_REQUEST,
        }
    }

    /// The fixed outcome label of this error, for metrics and logs.
    pub fn label(&self) -> OutcomeLabel {
        use OutcomeLabel as L;
        match self {
            Self::Parse(_) => L::ParseError,
            Self::InvalidRequest(_) => L::InvalidRequest,
            Self::MethodNotFound(_) => L::MethodNotFound,
            Self::InvalidParams(_) => L::InvalidParams,
            Self::HeaderMismatch(_) => L::HeaderMismatch,
            Self::UnsupportedVersion { .. } => L::UnsupportedVersion,
            Self::MissingCapability { .. } => L::MissingCapability,
            Self::InvalidState { .. } | Self::StateReplayed(_) | Self::ParkedCallAnswered => L::InvalidState,
            Self::RateLimited(_) => L::RateLimited,
            Self::StateStoreUnavailable(_) => L::StateStoreUnavailable,
            Self::TooManyRounds { .. } => L::TooManyRounds,
            Self::TooManyQuestions { .. } => L::TooManyQuestions,
            Self::StateTooLarge { .. } => L::StateTooLarge,
            Self::Upstream(_) | Self::Relayed { .. } => L::UpstreamError,
            Self::UpstreamUnavailable(_) => L::UpstreamUnavailable,
            Self::UpstreamTimeout(_) => L::UpstreamTimeout,
            Self::RequestTimeout => L::RequestTimeout,
            Self::Unauthorized(_) => L::Unauthorized,
            Self::ForbiddenOrigin(_) => L::ForbiddenOrigin,
            Self::Forbidden(_) => L::Forbidden,
            Self::PayloadTooLarge { .. } => L::PayloadTooLarge,
            Self::BodyTimeout(_) => L::BodyTimeout,
            Self::HttpMethodNotAllowed(_) => L::HttpMethodNotAllowed,
            Self::PathNotFound(_) => L::PathNotFound,
            Self::UnsupportedMediaType(_) => L::UnsupportedMediaType,
            Self::NotAcceptable(_) => L::NotAcceptable,
            Self::Overloaded | Self::UpstreamBusy(_) => L::Overloaded,
            Self::Internal(_) => L::Internal,
            Self::Listen(_) => L::ListenRefused,
            Self::Refused(_) => L::Refused,
            Self::Task(e) => task_label(e),
        }
    }

    /// The upstream failure behind this error, if any (for the upstream error counter).
    pub fn upstream_failure(&self) -> Option<&UpstreamError> {
        match self {
            Self::UpstreamUnavailable(e) | Self::UpstreamTimeout(e) | Self::UpstreamBusy(e) => Some(e),
            Self::Internal(e) => e.downcast_ref::<UpstreamError>(),
            _ => None,
        }
    }

    /// True for failures of the gateway or the upstream rather than of the client's request.
    pub fn is_server_side(&self) -> bool {
        matches!(self.status().as_u16(), 500..=599)
    }

    /// The whole story for the log line: the message and every source, joined by `": "`.
    /// Holds upstream-supplied text (an error body); never send it to the client.
    pub fn detail(&self) -> String {
        crate::logging::chain(self)
    }

    /// An internal error caused by `e` (logged in full, never shown).
    pub fn internal(e: impl Into<BoxError>) -> Self {
        Self::Internal(e.into())
    }

    /// The JSON-RPC error object sent to the client.
    pub fn to_object(&self) -> ErrorObject {
        match self {
            Self::Upstream(e) | Self::Relayed { error: e, .. } => e.clone(),
            Self::InvalidState { .. } | Self::StateReplayed(_) => {
                object(self.code(), "Invalid or expired requestState".into(), None)
            }
            Self::RateLimited(e) => object(self.code(), self.to_string(), Some(rate_limited_data(e))),
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
            // Every other message is fixed or describes the client's own input; sources are
            // never part of it.
            _ => object(self.code(), self.to_string(), None),
        }
    }
}

/// The code of a refused task request.
fn task_code(e: &TaskError) -> i64 {
    match e {
        TaskError::ExtensionRequired => codes::MISSING_CLIENT_CAPABILITY,
        TaskError::UnknownTask(_)
        | TaskError::OtherOwner
        | TaskError::RoundOver
        | TaskError::RoundMismatch => codes::INVALID_PARAMS,
        TaskError::PrincipalFull { .. } => RATE_LIMITED_CODE,
        TaskError::Upstream(e) => e.code,
        TaskError::Full { .. }
        | TaskError::Unavailable(_)
        | TaskError::Malformed(_)
        | TaskError::Seal(_)
        | TaskError::OwnerGone(_)
        | TaskError::OwnerFailed(_) => codes::INTERNAL_ERROR,
        TaskError::OwnerRefused { error, .. } => error.code,
    }
}

fn task_label(e: &TaskError) -> OutcomeLabel {
    use OutcomeLabel as L;
    match e {
        TaskError::ExtensionRequired => L::MissingCapability,
        TaskError::UnknownTask(_)
        | TaskError::OtherOwner
        | TaskError::RoundOver
        | TaskError::RoundMismatch => L::InvalidParams,
        TaskError::Full { .. } => L::Overloaded,
        TaskError::PrincipalFull { .. } => L::RateLimited,
        TaskError::Upstream(_) | TaskError::Malformed(_) => L::UpstreamError,
        TaskError::Unavailable(_) | TaskError::OwnerGone(_) | TaskError::OwnerFailed(_) => {
            L::UpstreamUnavailable
        }
        TaskError::OwnerRefused { .. } => L::UpstreamError,
        TaskError::Seal(_) => L::Internal,
    }
}

/// The client's message for a refused task request: fixed words and the configured bounds.
fn task_message(e: &TaskError) -> String {
    match e {
        TaskError::UnknownTask(_) => "unknown or expired taskId".to_owned(),
        TaskError::OtherOwner => {
            "unknown taskId on this replica: the task is held by another gateway replica it cannot reach"
                .to_owned()
        }
        TaskError::OwnerGone(_) => crate::tasks::forward::GONE.to_owned(),
        TaskError::OwnerFailed(_) => "the replica running this task gave no usable answer".to_owned(),
        TaskError::Malformed(_) => "the upstream server answered a task request with no task".to_owned(),
        TaskError::Seal(_) => "internal error".to_owned(),
        TaskError::Unavailable(_) => "upstream server unavailable while creating the task".to_owned(),
        other => other.to_string(),
    }
}

fn object(code: i64, message: String, data: Option<Value>) -> ErrorObject {
    ErrorObject { code, message, data }
}

/// Which limit refused the request, and when to retry (as in `Retry-After`).
fn rate_limited_data(e: &LimitError) -> Value {
    let retry = e.retry_after_secs();
    match &e.limit {
        Limit::Principal => json!({ "limit": "principal", "retryAfterSeconds": retry }),
        Limit::Tool(name) => json!({ "limit": "tool", "tool": name.as_ref(), "retryAfterSeconds": retry }),
    }
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

/// [`map_upstream_error`] for the answer to a `resources/read` of `uri`: a legacy "resource not
/// found" becomes what 2026-07-28 servers send (SEP-2164): `-32602` with `data.uri`, the URI the
/// client asked for, and a fixed message.
pub fn map_read_error(error: ErrorObject, uri: &str) -> ErrorObject {
    if is_resource_not_found(&error) {
        let data = json!({ "uri": uri });
        return object(codes::INVALID_PARAMS, "Resource not found".into(), Some(data));
    }
    map_upstream_error(error)
}

/// How legacy servers say a resource does not exist: `-32002`, the code of the revisions before
/// 2026-07-28, or whatever the code, the messages of the official 1.x SDKs' servers: Python's
/// `Unknown resource: <uri>` (code 0; TypeScript handlers that throw say it too) and
/// TypeScript's `Resource <uri> not found` (`-32602`). The URI in the message is the server's
/// spelling of the one asked for (an SDK may normalise it), so only its shape is checked: one
/// word, as a URI is.
fn is_resource_not_found(error: &ErrorObject) -> bool {
    let one_word = |uri: &str| !uri.is_empty() && !uri.contains(char::is_whitespace);
    let message = error.message.trim();
    error.code == codes::LEGACY_RESOURCE_NOT_FOUND
        || message.strip_prefix("Unknown resource: ").is_some_and(one_word)
        || message.strip_prefix("Resource ").and_then(|m| m.strip_suffix(" not found")).is_some_and(one_word)
}

/// The client's message for an unreachable or failing upstream: the kind of failure, and for an
/// HTTP error only its status code, never the body.
fn unavailable_message(e: &UpstreamError) -> String {
    let cause = match e {
        UpstreamError::Http { status, .. } => {
            return format!("upstream returned HTTP {}", status.as_u16());
        }
        UpstreamError::Connect(e) => connect_cause(e.as_ref()),
        UpstreamError::Transport(_) => "request failed",
        UpstreamError::Closed(_) => "connection closed",
        UpstreamError::SessionExpired => "session expired",
        UpstreamError::Protocol(_) | UpstreamError::Sse(_) => "invalid response",
        UpstreamError::Initialize(_) => "initialize failed",
        UpstreamError::Timeout(_) => "timed out",
        UpstreamError::PoolExhausted(_) | UpstreamError::QueueFull { .. } => "no session free",
        UpstreamError::KeyExhausted(_) => "no session of this client free",
        UpstreamError::PrincipalShare { .. } => "this client holds its share of sessions",
        UpstreamError::Settings(_) => "misconfigured",
        UpstreamError::Spawn(_) => "the upstream command could not be started",
        UpstreamError::StreamEnded => "its event stream ended",
        UpstreamError::Endpoint(_) => "it announced a message endpoint on another origin or an invalid one",
        // The gateway's own words about how a child process ended (status or signal).
        UpstreamError::ProcessEnded(how) => return format!("upstream server unavailable: {how}"),
    };
    format!("upstream server unavailable: {cause}")
}

/// The client's message for an overload: its own share when that is what refused it.
fn busy_message(e: &UpstreamError) -> String {
    match e {
        UpstreamError::PrincipalShare { limit } => {
            format!("gateway overloaded: this client holds its share of upstream sessions ({limit})")
        }
        _ => "gateway overloaded: no upstream session is free".to_owned(),
    }
}

/// What the client may learn about its refused credentials: the token's own faults are named;
/// anything else (a key the gateway cannot use, a provider failure) is only "invalid token".
fn auth_message(e: &AuthError) -> &'static str {
    use jsonwebtoken::errors::ErrorKind;
    match e {
        AuthError::Missing => "missing bearer token",
        AuthError::NotBearer => "Authorization is not a bearer token",
        AuthError::NoSubject => "token has no `sub` claim (a non-empty string)",
        AuthError::IssuerNotString => "token `iss` claim is not a string",
        AuthError::UnknownKey => "invalid token",
        AuthError::KeysUnavailable => "token keys unavailable, try again later",
        AuthError::Invalid(e) => match e.kind() {
            ErrorKind::ExpiredSignature => "token expired",
            ErrorKind::ImmatureSignature => "token not yet valid",
            ErrorKind::InvalidIssuer | ErrorKind::InvalidAudience => "token issuer or audience not accepted",
            // Missing, `null`, or of a type the claim cannot have.
            ErrorKind::MissingRequiredClaim(claim) => match claim.as_str() {
                "aud" => "token has no `aud` claim",
                "iss" => "token has no `iss` claim",
                "sub" => "token has no `sub` claim (a non-empty string)",
                "exp" => "token has no `exp` claim",
                _ => "invalid token",
            },
            _ => "invalid token",
        },
    }
}

/// Tells a refused connection from other connect failures (DNS, unreachable, connect timeout).
fn connect_cause(e: &(dyn StdError + 'static)) -> &'static str {
    let mut source: Option<&(dyn StdError + 'static)> = Some(e);
    while let Some(err) = source {
        if err.downcast_ref::<rustls::Error>().is_some() {
            return "TLS handshake failed";
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            if is_tls_failure(io) {
                return "TLS handshake failed";
            }
            return match io.kind() {
                std::io::ErrorKind::ConnectionRefused => "connection refused",
                std::io::ErrorKind::TimedOut => "connect timed out",
                _ => "cannot connect",
            };
        }
        source = err.source();
    }
    "cannot connect"
}

/// True when `io` carries a rustls error, however many I/O errors wrap it (the TLS stream
/// reports one inside an I/O error, and the connector wraps that again).
fn is_tls_failure(io: &std::io::Error) -> bool {
    match io.get_ref() {
        Some(inner) if inner.is::<rustls::Error>() => true,
        Some(inner) => inner.downcast_ref::<std::io::Error>().is_some_and(is_tls_failure),
        None => false,
    }
}

// === conversions: the one place foreign errors become front errors ===

impl From<TaskError> for FrontError {
    fn from(e: TaskError) -> Self {
        match e {
            TaskError::ExtensionRequired => {
                Self::MissingCapability { required: crate::tasks::wire::required_capabilities() }
            }
            TaskError::Upstream(error) => Self::Upstream(map_upstream_error(error)),
            TaskError::Unavailable(e) => e.into(),
            TaskError::OwnerRefused { error, status } => {
                let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
                Self::Relayed { error, status }
            }
            other => Self::Task(other),
        }
    }
}

impl From<UpstreamError> for FrontError {
    fn from(e: UpstreamError) -> Self {
        match e {
            UpstreamError::Timeout(_) => Self::UpstreamTimeout(e),
            _ if e.is_overload() => Self::UpstreamBusy(e),
            UpstreamError::Settings(_) => Self::Internal(Box::new(e)),
            _ => Self::UpstreamUnavailable(e),
        }
    }
}

/// A state that fails to open is a client error with one generic message; one too large to seal
/// ends the chain with its own message; one that fails to seal otherwise is a bug.
impl From<StateError> for FrontError {
    fn from(e: StateError) -> Self {
        match e {
            StateError::SealTooLarge { limit, .. } => Self::StateTooLarge { limit },
            StateError::Encode(_) | StateError::Seal => Self::Internal(Box::new(e)),
            other => Self::InvalidState(other),
        }
    }
}

impl From<ClaimsError> for FrontError {
    fn from(e: ClaimsError) -> Self {
        match e {
            ClaimsError::TooManyRounds { max } => Self::TooManyRounds { limit: max },
            other => Self::InvalidParams(other.to_string()),
        }
    }
}

/// The message names the member of the client's params that cannot be read.
impl From<ParamsError> for FrontError {
    fn from(e: ParamsError) -> Self {
        Self::InvalidParams(e.to_string())
    }
}

/// The message describes the client's own `inputResponses`.
impl From<InputError> for FrontError {
    fn from(e: InputError) -> Self {
        Self::InvalidParams(e.to_string())
    }
}

impl From<AuthError> for FrontError {
    fn from(e: AuthError) -> Self {
        Self::Unauthorized(e)
    }
}

impl From<Denied> for FrontError {
    fn from(d: Denied) -> Self {
        Self::Forbidden(d)
    }
}

/// The message describes the client's own body.
impl From<EnvelopeError> for FrontError {
    fn from(e: EnvelopeError) -> Self {
        match e {
            EnvelopeError::Json(e) if e.is_syntax() || e.is_eof() => Self::Parse(e.to_string()),
            other => Self::InvalidRequest(other.to_string()),
        }
    }
}

/// The message describes the client's own `_meta` capabilities.
impl From<CapsError> for FrontError {
    fn from(e: CapsError) -> Self {
        Self::InvalidParams(format!("_meta clientCapabilities: {e}"))
    }
}

/// The message names the client's own `_meta` log level field.
impl From<LogLevelError> for FrontError {
    fn from(e: LogLevelError) -> Self {
        Self::InvalidParams(e.to_string())
    }
}

impl From<LimitError> for FrontError {
    fn from(e: LimitError) -> Self {
        Self::RateLimited(e)
    }
}

/// A replay is an invalid state like any other to the client; a store that cannot answer fails
/// the request closed.
impl From<StoreError> for FrontError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Replayed => Self::StateReplayed(e),
            StoreError::Unavailable(_) | StoreError::Timeout(_) => Self::StateStoreUnavailable(e),
        }
    }
}

/// A malformed filter is the client's own input; a bound or a shutdown keeps its fixed message;
/// an upstream failure is one like any other.
impl From<ListenError> for FrontError {
    fn from(e: ListenError) -> Self {
        match e {
            ListenError::Invalid(_) | ListenError::TooManyUris { .. } => Self::InvalidParams(e.to_string()),
            ListenError::Upstream(u) => u.into(),
            other => Self::Listen(other),
        }
    }
}

impl From<tokio::task::JoinError> for FrontError {
    fn from(e: tokio::task::JoinError) -> Self {
        Self::Internal(Box::new(e))
    }
}

#[cfg(test)]
mod tests;
