//! Routing of `POST`, `GET` and `DELETE /mcp`: the Streamable HTTP transport of 2025-03-26 …
//! 2025-11-25 as the TypeScript SDK's server transport applies it.
//!
//! It owns the transport-level checks (`Accept`, `Content-Type`, body size, session id,
//! `MCP-Protocol-Version`) and their HTTP statuses, answers the cheap methods with plain JSON,
//! and hands the three methods that may ask the client for input to [`super::calls`], which
//! answer with an SSE stream.

use std::convert::Infallible;
use std::io;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{HeaderValue, ACCEPT, CACHE_CONTROL, CONTENT_TYPE};
use http::{HeaderMap, Method, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty, Full, Limited};
use hyper::body::Incoming;
use serde_json::Value;

use super::calls::{self, CallError};
use super::catalog;
use super::initialize::{self, InitializeError};
use super::session::{Answer, Session, SessionError};
use super::sse::{self, SseBody};
use super::{Shared, MCP_PATH};
use crate::protocol::headers as names;
use crate::protocol::jsonrpc::{self, error_bytes, ErrorObject, Outcome, Response as RpcResponse};
use crate::protocol::{codes, methods, Envelope, EnvelopeError, RequestId};

/// The code the TypeScript SDK uses for transport-level rejections.
const TRANSPORT_ERROR: i64 = -32000;
/// The code the TypeScript SDK uses for an unknown session.
const SESSION_NOT_FOUND: i64 = -32001;
/// The first revision with the `MCP-Protocol-Version` header.
const HEADER_VERSION: &str = "2025-06-18";
const LOGGING_SET_LEVEL: &str = "logging/setLevel";
const JSON: &str = "application/json";
const EVENT_STREAM: &str = "text/event-stream";

/// The response body: plain JSON, nothing, or an event stream.
pub(crate) type DemoBody = BoxBody<Bytes, io::Error>;

/// Why a request was refused before any method ran.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HttpError {
    #[error("Not Found: the MCP endpoint is {MCP_PATH}")]
    NotFound,
    #[error("Method Not Allowed: use POST, GET or DELETE")]
    MethodNotAllowed,
    #[error("Not Acceptable: Client must accept {0}")]
    NotAcceptable(&'static str),
    #[error("Unsupported Media Type: Content-Type must be application/json")]
    UnsupportedMediaType,
    #[error("Payload Too Large: the body exceeds {0} bytes")]
    TooLarge(usize),
    #[error("Bad Request: the body could not be read: {0}")]
    BodyRead(String),
    #[error("Parse error: {0}")]
    Parse(#[source] EnvelopeError),
    #[error("Invalid Request: JSON-RPC batches are not supported")]
    Batch,
    #[error("Bad Request: Mcp-Session-Id header is required")]
    MissingSession,
    #[error("Session not found")]
    UnknownSession,
    #[error("Bad Request: MCP-Protocol-Version must be {expected} for this session, got {got}")]
    VersionMismatch { expected: &'static str, got: String },
    #[error("Invalid Request: initialize must not carry an Mcp-Session-Id")]
    InitializeWithSession,
    #[error("Bad Request: Last-Event-ID {0:?} names no stream this session can resume")]
    UnknownEvent(String),
    #[error("Conflict: Only one SSE stream is allowed per session")]
    StreamBusy,
    #[error("Invalid Request: {0}")]
    Call(#[from] CallError),
    #[error("Internal error: {0}")]
    Initialize(#[from] InitializeError),
    #[error("Internal error: {0}")]
    Internal(String),
}

// === impl HttpError ===

impl HttpError {
    fn status(&self) -> StatusCode {
        match self {
            Self::NotFound | Self::UnknownSession => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::NotAcceptable(_) => StatusCode::NOT_ACCEPTABLE,
            Self::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::StreamBusy => StatusCode::CONFLICT,
            Self::Call(CallError::Session(SessionError::TooManyCalls(_))) => StatusCode::TOO_MANY_REQUESTS,
            Self::Internal(_) | Self::Initialize(_) => StatusCode::INTERNAL_SERVER_ERROR,
            _ => StatusCode::BAD_REQUEST,
        }
    }

    fn code(&self) -> i64 {
        match self {
            Self::Parse(EnvelopeError::Json(_)) => codes::PARSE_ERROR,
            Self::Parse(_) | Self::Batch | Self::Call(_) => codes::INVALID_REQUEST,
            Self::UnknownSession => SESSION_NOT_FOUND,
            Self::Internal(_) | Self::Initialize(_) => codes::INTERNAL_ERROR,
            _ => TRANSPORT_ERROR,
        }
    }

    fn into_response(self, id: Option<&RequestId>) -> Response<DemoBody> {
        let error = ErrorObject { code: self.code(), message: self.to_string(), data: None };
        json_response(self.status(), error_bytes(id, &error))
    }
}

/// Serves one HTTP request; every failure becomes a JSON-RPC error with a fitting status.
pub(crate) async fn handle(
    shared: Arc<Shared>,
    request: Request<Incoming>,
) -> Result<Response<DemoBody>, Infallible> {
    if request.uri().path() != MCP_PATH {
        return Ok(HttpError::NotFound.into_response(None));
    }
    let result = match *request.method() {
        Method::POST => post(&shared, request).await,
        Method::GET => get(&shared, request.headers()).await,
        Method::DELETE => delete(&shared, request.headers()),
        _ => Err(HttpError::MethodNotAllowed),
    };
    Ok(result.unwrap_or_else(|error| error.into_response(None)))
}

async fn post(shared: &Shared, request: Request<Incoming>) -> Result<Response<DemoBody>, HttpError> {
    require_accept(request.headers(), &[JSON, EVENT_STREAM])?;
    require_json(request.headers())?;
    let (parts, body) = request.into_parts();
    let bytes = read_body(body, shared.options.max_body_bytes).await?;
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') {
        return Err(HttpError::Batch);
    }
    match Envelope::parse(&bytes).map_err(HttpError::Parse)? {
        Envelope::Request(call) if call.method == methods::INITIALIZE => {
            if parts.headers.contains_key(names::SESSION_ID) {
                return Err(HttpError::InitializeWithSession);
            }
            Ok(initialize::answer(shared, &call)?)
        }
        Envelope::Request(call) => {
            let session = session_for(shared, &parts.headers)?;
            let id = call.id.clone();
            Ok(request_response(shared, session, call).unwrap_or_else(|e| e.into_response(Some(&id))))
        }
        Envelope::Notification(note) => {
            let session = session_for(shared, &parts.headers)?;
            if let (methods::CANCELLED, Some(gate)) = (note.method.as_str(), &shared.options.cancel_gate) {
                // A closed gate lets everything through; either way the cancel then takes effect.
                if let Ok(permit) = gate.acquire().await {
                    permit.forget();
                }
            }
            notification(shared, &session, &note);
            Ok(accepted())
        }
        Envelope::Response(answer) => {
            let session = session_for(shared, &parts.headers)?;
            deliver(shared, &session, answer);
            Ok(accepted())
        }
    }
}

async fn get(shared: &Shared, headers: &HeaderMap) -> Result<Response<DemoBody>, HttpError> {
    require_accept(headers, &[EVENT_STREAM])?;
    let session = session_for(shared, headers)?;
    let body = match headers.get(names::LAST_EVENT_ID) {
        Some(last) => resume(&session, last)?,
        None => {
            let body = session.open_standalone().map_err(|_| HttpError::StreamBusy)?;
            if let Some(delay) = shared.options.get_stream_delay {
                tokio::time::sleep(delay).await;
            }
            session.mark_get_answered();
            body
        }
    };
    Ok(sse_response(&session, body))
}

/// Resumes a logged call stream after the event the client saw last.
fn resume(session: &Session, last: &HeaderValue) -> Result<SseBody, HttpError> {
    let last = last.to_str().unwrap_or_default();
    let unknown = || HttpError::UnknownEvent(last.to_owned());
    let (number, seq) = sse::parse_event_id(last).ok_or_else(unknown)?;
    let stream = session.resumable_by_number(number).ok_or_else(unknown)?;
    Ok(stream.resume(seq))
}

fn delete(shared: &Shared, headers: &HeaderMap) -> Result<Response<DemoBody>, HttpError> {
    let session = session_for(shared, headers)?;
    shared.store.delete(session.id());
    Ok(status_only(StatusCode::OK))
}

fn request_response(
    shared: &Shared,
    session: Arc<Session>,
    call: jsonrpc::Request,
) -> Result<Response<DemoBody>, HttpError> {
    let caps = session.caps();
    let result = match call.method.as_str() {
        methods::TOOLS_CALL | methods::PROMPTS_GET | methods::RESOURCES_READ => {
            if !session.get_answered() {
                shared.stats.call_before_get_stream();
            }
            let body = calls::start(shared, Arc::clone(&session), call)?;
            return Ok(sse_response(&session, body));
        }
        methods::PING => {
            shared.stats.record_ping();
            Ok(Value::Object(Default::default()))
        }
        LOGGING_SET_LEVEL => {
            shared.stats.record_set_level();
            Ok(Value::Object(Default::default()))
        }
        methods::TOOLS_LIST => Ok(catalog::tools_list(caps)),
        methods::PROMPTS_LIST => Ok(catalog::prompts_list(caps)),
        methods::RESOURCES_LIST => Ok(catalog::resources_list(caps, shared.resources.counter())),
        methods::RESOURCES_SUBSCRIBE => subscribe(shared, &session, call.params.as_ref()),
        methods::RESOURCES_UNSUBSCRIBE => {
            let uri = call.params.as_ref().and_then(|p| p.get("uri")).and_then(Value::as_str).unwrap_or("");
            if session.unsubscribe(uri) {
                shared.stats.record_unsubscribe();
            }
            Ok(Value::Object(Default::default()))
        }
        methods::RESOURCES_TEMPLATES_LIST => Ok(catalog::resource_templates_list()),
        methods::COMPLETION_COMPLETE => catalog::complete(call.params.as_ref())
            .ok_or_else(|| rpc_error(codes::INVALID_PARAMS, "unknown completion reference".into())),
        other => Err(method_not_found(other)),
    };
    // Like the reference server, JSON-RPC errors travel with HTTP 200.
    let bytes = match result {
        Ok(value) => result_json(&call.id, &value)?,
        Err(error) => error_bytes(Some(&call.id), &error),
    };
    Ok(json_response(StatusCode::OK, bytes))
}

/// `resources/subscribe`: only a resource this session may read can be subscribed to, and
/// none when the server does not offer subscriptions. Each refusal is counted.
fn subscribe(shared: &Shared, session: &Session, params: Option<&Value>) -> Result<Value, ErrorObject> {
    let accepted = accept_subscribe(shared, session, params);
    match &accepted {
        Ok(_) => shared.stats.record_subscribe(),
        Err(_) => shared.stats.record_refused_subscribe(),
    }
    accepted
}

fn accept_subscribe(
    shared: &Shared,
    session: &Session,
    params: Option<&Value>,
) -> Result<Value, ErrorObject> {
    if !shared.options.resource_subscriptions {
        return Err(method_not_found(methods::RESOURCES_SUBSCRIBE));
    }
    let uri = params.and_then(|p| p.get("uri")).and_then(Value::as_str).unwrap_or("");
    if !catalog::resource_offered(uri, session.caps()) {
        return Err(rpc_error(codes::LEGACY_RESOURCE_NOT_FOUND, format!("Resource {uri} not found")));
    }
    session.subscribe(uri).map_err(|e| rpc_error(codes::INVALID_REQUEST, e.to_string()))?;
    Ok(Value::Object(Default::default()))
}

fn method_not_found(method: &str) -> ErrorObject {
    rpc_error(codes::METHOD_NOT_FOUND, format!("Method not found: {method}"))
}

fn rpc_error(code: i64, message: String) -> ErrorObject {
    ErrorObject { code, message, data: None }
}

fn result_json(id: &RequestId, value: &Value) -> Result<Vec<u8>, HttpError> {
    let raw = serde_json::value::to_raw_value(value).map_err(|e| HttpError::Internal(e.to_string()))?;
    Ok(jsonrpc::result_bytes(id, &raw))
}

fn notification(shared: &Shared, session: &Arc<Session>, note: &jsonrpc::Notification) {
    match note.method.as_str() {
        methods::CANCELLED => cancel(shared, session, note),
        methods::INITIALIZED => calls::sync_roots(shared, session),
        _ => {}
    }
}

fn cancel(shared: &Shared, session: &Session, note: &jsonrpc::Notification) {
    let params = note.params.as_ref();
    let id = params
        .and_then(|p| p.get("requestId"))
        .and_then(|id| serde_json::from_value::<RequestId>(id.clone()).ok());
    let reason = params.and_then(|p| p.get("reason")).and_then(Value::as_str).unwrap_or("");
    let stopped = id.is_some_and(|id| session.cancel_call(&id));
    shared.stats.record_cancellation(stopped, reason);
}

fn deliver(shared: &Shared, session: &Session, response: RpcResponse) {
    let answer: Answer = match response.outcome {
        Outcome::Error(error) => Err(error),
        Outcome::Result(raw) => match serde_json::from_str(raw.get()) {
            Ok(value) => Ok(value),
            // `Envelope::parse` already checked the text is a JSON object.
            Err(_) => return,
        },
    };
    let is_error = answer.is_err();
    let matched = response.id.is_some_and(|id| session.deliver(&id, answer));
    shared.stats.record_answer(is_error, matched);
}

/// Finds the session of a request and checks its protocol version header.
fn session_for(shared: &Shared, headers: &HeaderMap) -> Result<Arc<Session>, HttpError> {
    let id = headers.get(names::SESSION_ID).ok_or(HttpError::MissingSession)?;
    let id = id.to_str().map_err(|_| HttpError::UnknownSession)?;
    let session = shared.store.get(id).ok_or(HttpError::UnknownSession)?;
    if session.version() >= HEADER_VERSION {
        // A missing header means 2025-03-26 (transport spec), which differs from the session's.
        let got = headers.get(names::PROTOCOL_VERSION).map(HeaderValue::to_str);
        let got = got.and_then(Result::ok).unwrap_or("(missing)");
        if got != session.version() {
            let expected = session.version();
            let got = got.to_owned();
            return Err(HttpError::VersionMismatch { expected, got });
        }
    }
    Ok(session)
}

fn require_accept(headers: &HeaderMap, needed: &[&'static str]) -> Result<(), HttpError> {
    let accept = headers.get_all(ACCEPT).iter().filter_map(|v| v.to_str().ok());
    let accept: Vec<&str> = accept.collect();
    let accepts = |kind: &str| accept.iter().any(|v| v.contains(kind) || v.contains("*/*"));
    match needed.iter().find(|kind| !accepts(kind)) {
        Some(missing) => Err(HttpError::NotAcceptable(missing)),
        None => Ok(()),
    }
}

fn require_json(headers: &HeaderMap) -> Result<(), HttpError> {
    let content_type = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok());
    match content_type {
        Some(value) if value.starts_with(JSON) => Ok(()),
        _ => Err(HttpError::UnsupportedMediaType),
    }
}

async fn read_body(body: Incoming, limit: usize) -> Result<Bytes, HttpError> {
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(error) if error.is::<http_body_util::LengthLimitError>() => Err(HttpError::TooLarge(limit)),
        Err(error) => Err(HttpError::BodyRead(error.to_string())),
    }
}

fn accepted() -> Response<DemoBody> {
    status_only(StatusCode::ACCEPTED)
}

fn status_only(status: StatusCode) -> Response<DemoBody> {
    let mut response = Response::new(Empty::new().map_err(|never| match never {}).boxed());
    *response.status_mut() = status;
    response
}

/// A JSON response; also used by `initialize`.
pub(crate) fn json_response(status: StatusCode, bytes: Vec<u8>) -> Response<DemoBody> {
    let body = Full::new(Bytes::from(bytes)).map_err(|never| match never {}).boxed();
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(JSON));
    response
}

fn sse_response(session: &Session, body: SseBody) -> Response<DemoBody> {
    let mut response = Response::new(body.boxed());
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(EVENT_STREAM));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Ok(id) = HeaderValue::from_str(session.id()) {
        headers.insert(names::SESSION_ID, id);
    }
    response
}
