//! JSON-RPC 2.0 envelopes as both sides of the gateway see them.
//!
//! Parsing classifies one message into a request, a notification or a response. Results stay
//! as raw JSON text (`Box<RawValue>`) so that a large upstream result is relayed without being
//! parsed into a tree and serialised again; the front only splices fields into it.
//!
//! A message that is JSON but not a JSON-RPC message is refused with an error that names the
//! fault in the sender's terms (a batch, a member of the wrong type), never serde's own words,
//! which name the gateway's internal types.

use std::borrow::Cow;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// Errors from parsing a JSON-RPC message.
#[derive(Debug, thiserror::Error)]
pub enum EnvelopeError {
    #[error("not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("`jsonrpc` must be \"2.0\"")]
    Version,
    #[error("request `id` must be a string or an integer, not {0}")]
    BadId(&'static str),
    #[error("message is neither a request, a notification nor a response")]
    Shape,
    #[error("a result must be a JSON object")]
    ResultNotObject,
    /// A JSON array: the 2026-07-28 front takes one message per POST.
    #[error("JSON-RPC batches are not supported: send one message per POST")]
    Batch,
    #[error("a JSON-RPC message must be a JSON object")]
    NotAnObject,
    #[error("`{member}` must be {want}")]
    MemberType { member: &'static str, want: &'static str },
    /// JSON whose members are each of a valid type, yet not one message: a repeated member.
    #[error("a member of the message appears more than once")]
    Repeated,
}

/// A JSON-RPC request id: a string or an integer (`0` included; `null` is not an id).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RequestId {
    Number(i64),
    String(String),
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Number(n) => write!(f, "{n}"),
            Self::String(s) => write!(f, "{s:?}"),
        }
    }
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorObject {
    pub code: i64,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

/// A request: it expects a response with the same id. Its params are a tree unless the
/// reader asks for their text (the front: see [`crate::protocol::params`]).
#[derive(Debug, Clone)]
pub struct Request<P = Value> {
    pub id: RequestId,
    pub method: String,
    pub params: Option<P>,
}

/// A notification: no id, no response.
#[derive(Debug, Clone)]
pub struct Notification<P = Value> {
    pub method: String,
    pub params: Option<P>,
}

/// The two outcomes a response carries.
#[derive(Debug)]
pub enum Outcome {
    /// The raw text of the `result` object.
    Result(Box<RawValue>),
    Error(ErrorObject),
}

/// A response; `id` is `None` only for errors answering an unparseable request.
#[derive(Debug)]
pub struct Response {
    pub id: Option<RequestId>,
    pub outcome: Outcome,
}

/// One classified JSON-RPC message, its params a tree (`P = Value`) or indexed
/// (`P = params::Read`).
#[derive(Debug)]
pub enum Envelope<P = Value> {
    Request(Request<P>),
    Notification(Notification<P>),
    Response(Response),
}

#[derive(Deserialize)]
struct Wire<'a, P> {
    /// Borrowed: only compared, and read for every message in both directions.
    #[serde(borrow)]
    jsonrpc: Option<Cow<'a, str>>,
    #[serde(default, deserialize_with = "present")]
    id: Option<Value>,
    method: Option<String>,
    params: Option<P>,
    result: Option<Box<RawValue>>,
    error: Option<ErrorObject>,
}

/// Distinguishes `"id": null` (Some(Null)) from an absent id (None).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

// === impl Envelope ===

impl Envelope {
    /// Parses one JSON-RPC message from bytes.
    pub fn parse(bytes: &[u8]) -> Result<Self, EnvelopeError> {
        Self::parse_any(bytes)
    }

    /// Parses one JSON-RPC message from text (an SSE event's data, a stdio line).
    pub fn parse_str(text: &str) -> Result<Self, EnvelopeError> {
        Self::parse_text(text)
    }
}

impl Envelope<super::params::Read> {
    /// Parses one JSON-RPC message from bytes, its params indexed in the same pass (see
    /// [`super::params`]).
    pub fn parse_indexed(bytes: &[u8]) -> Result<Self, EnvelopeError> {
        Self::parse_any(bytes)
    }
}

impl<P: serde::de::DeserializeOwned> Envelope<P> {
    fn parse_any(bytes: &[u8]) -> Result<Self, EnvelopeError> {
        // UTF-8 text, the usual case, is checked once here and read as text: read as bytes,
        // serde checks every string of the message again on its own.
        match std::str::from_utf8(bytes) {
            Ok(text) => Self::parse_text(text),
            Err(_) => {
                Self::from_wire(serde_json::from_slice(bytes).map_err(|e| EnvelopeError::of_json(bytes, e))?)
            }
        }
    }

    fn parse_text(text: &str) -> Result<Self, EnvelopeError> {
        let wire = serde_json::from_str(text).map_err(|e| EnvelopeError::of_json(text.as_bytes(), e))?;
        Self::from_wire(wire)
    }

    fn from_wire(wire: Wire<'_, P>) -> Result<Self, EnvelopeError> {
        if wire.jsonrpc.as_deref() != Some("2.0") {
            return Err(EnvelopeError::Version);
        }
        match (wire.method, wire.result, wire.error) {
            (Some(method), None, None) => Self::call(wire.id, method, wire.params),
            (None, Some(result), None) => Self::result(wire.id, result),
            (None, None, Some(error)) => Ok(Self::Response(Response {
                id: parse_id(wire.id).ok().flatten(),
                outcome: Outcome::Error(error),
            })),
            _ => Err(EnvelopeError::Shape),
        }
    }

    fn call(id: Option<Value>, method: String, params: Option<P>) -> Result<Self, EnvelopeError> {
        Ok(match parse_id(id)? {
            Some(id) => Self::Request(Request { id, method, params }),
            None => Self::Notification(Notification { method, params }),
        })
    }

    fn result(id: Option<Value>, result: Box<RawValue>) -> Result<Self, EnvelopeError> {
        if !result.get().trim_start().starts_with('{') {
            return Err(EnvelopeError::ResultNotObject);
        }
        let id = parse_id(id)?.ok_or(EnvelopeError::Shape)?;
        Ok(Self::Response(Response { id: Some(id), outcome: Outcome::Result(result) }))
    }
}

// === impl EnvelopeError ===

impl EnvelopeError {
    /// Why `bytes`, which did not read as a message, are not one. Invalid JSON stays serde's
    /// syntax error (it names a line and column of the sender's text); JSON of the wrong shape
    /// is named here, read again as a tree (only on this error path).
    fn of_json(bytes: &[u8], e: serde_json::Error) -> Self {
        if !e.is_data() {
            return Self::Json(e);
        }
        match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
            Some(b'[') => return Self::Batch,
            Some(b'{') => {}
            _ => return Self::NotAnObject,
        }
        match serde_json::from_slice::<Map<String, Value>>(bytes) {
            Ok(members) => wrong_member(&members).unwrap_or(Self::Repeated),
            Err(_) => Self::NotAnObject,
        }
    }
}

/// The first member of a message whose type [`Wire`] cannot take (`null` reads as absent).
fn wrong_member(members: &Map<String, Value>) -> Option<EnvelopeError> {
    let present = |name: &str| members.get(name).filter(|v| !v.is_null());
    if present("jsonrpc").is_some_and(|v| !v.is_string()) {
        return Some(EnvelopeError::Version);
    }
    if present("method").is_some_and(|v| !v.is_string()) {
        return Some(EnvelopeError::MemberType { member: "method", want: "a string" });
    }
    let error_ok = |e: &Value| e["code"].is_i64() && e["message"].is_string();
    if present("error").is_some_and(|e| !error_ok(e)) {
        let want = "an object with an integer `code` and a string `message`";
        return Some(EnvelopeError::MemberType { member: "error", want });
    }
    None
}

fn parse_id(id: Option<Value>) -> Result<Option<RequestId>, EnvelopeError> {
    match id {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(RequestId::String(s))),
        Some(Value::Number(n)) => {
            n.as_i64().map(|n| Some(RequestId::Number(n))).ok_or(EnvelopeError::BadId("a non-integer number"))
        }
        Some(Value::Null) => Err(EnvelopeError::BadId("null")),
        Some(_) => Err(EnvelopeError::BadId("a structured value")),
    }
}

/// A request's params on their way out: a tree, or JSON text copied from the client's.
#[derive(Debug, Clone, Copy)]
pub enum Outgoing<'a> {
    Tree(Option<&'a Value>),
    Text(&'a super::params::JsonText),
}

impl Outgoing<'_> {
    /// The request with these params, serialised; text params are copied in as they are.
    pub fn request_bytes(self, id: &RequestId, method: &str) -> Vec<u8> {
        let text = match self {
            Self::Tree(params) => return request_bytes(id, method, params),
            Self::Text(text) => text.as_str(),
        };
        let mut out = Vec::with_capacity(48 + method.len() + text.len());
        out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
        // Writing an id or a string to a vector cannot fail.
        let _ = serde_json::to_writer(&mut out, id);
        out.extend_from_slice(br#","method":"#);
        let _ = serde_json::to_writer(&mut out, method);
        out.extend_from_slice(br#","params":"#);
        out.extend_from_slice(text.as_bytes());
        out.push(b'}');
        out
    }
}

/// Serialises a request with the given id, method and params.
pub fn request_bytes(id: &RequestId, method: &str, params: Option<&Value>) -> Vec<u8> {
    #[derive(Serialize)]
    struct Out<'a> {
        jsonrpc: &'static str,
        id: &'a RequestId,
        method: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        params: Option<&'a Value>,
    }
    to_vec(&Out { jsonrpc: "2.0", id, method, params })
}

/// Serialises a notification.
pub fn notification_bytes(method: &str, params: Option<&Value>) -> Vec<u8> {
    #[derive(Serialize)]
    struct Out<'a> {
        jsonrpc: &'static str,
        method: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        params: Option<&'a Value>,
    }
    to_vec(&Out { jsonrpc: "2.0", method, params })
}

/// Serialises a success response whose result is already JSON text.
pub fn result_bytes(id: &RequestId, result: &RawValue) -> Vec<u8> {
    #[derive(Serialize)]
    struct Out<'a> {
        jsonrpc: &'static str,
        id: &'a RequestId,
        result: &'a RawValue,
    }
    to_vec(&Out { jsonrpc: "2.0", id, result })
}

/// Serialises an error response (`id: null` when the request id is unknown).
pub fn error_bytes(id: Option<&RequestId>, error: &ErrorObject) -> Vec<u8> {
    #[derive(Serialize)]
    struct Out<'a> {
        jsonrpc: &'static str,
        id: Option<&'a RequestId>,
        error: &'a ErrorObject,
    }
    to_vec(&Out { jsonrpc: "2.0", id, error })
}

fn to_vec<T: Serialize>(value: &T) -> Vec<u8> {
    // Serialising these plain structs of strings, ids and `Value`s cannot fail.
    serde_json::to_vec(value).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_with_zero_id_is_a_request() {
        let env = Envelope::parse(br#"{"jsonrpc":"2.0","id":0,"method":"tools/list"}"#).unwrap();
        assert!(matches!(env, Envelope::Request(Request { id: RequestId::Number(0), .. })));
    }

    #[test]
    fn string_id_and_notification() {
        let env = Envelope::parse(br#"{"jsonrpc":"2.0","id":"p-1","method":"x"}"#).unwrap();
        assert!(matches!(env, Envelope::Request(Request { id: RequestId::String(ref s), .. }) if s == "p-1"));
        let env = Envelope::parse(br#"{"jsonrpc":"2.0","method":"notifications/x"}"#).unwrap();
        assert!(matches!(env, Envelope::Notification(_)));
    }

    #[test]
    fn null_and_fractional_ids_are_rejected() {
        for body in [
            &br#"{"jsonrpc":"2.0","id":null,"method":"x"}"#[..],
            br#"{"jsonrpc":"2.0","id":1.5,"method":"x"}"#,
            br#"{"jsonrpc":"2.0","id":[1],"method":"x"}"#,
        ] {
            assert!(matches!(Envelope::parse(body), Err(EnvelopeError::BadId(_))), "{body:?}");
        }
    }

    #[test]
    fn result_keeps_raw_text() {
        let env = Envelope::parse(br#"{"jsonrpc":"2.0","id":7,"result":{"b": 1, "a":2}}"#).unwrap();
        let Envelope::Response(Response { outcome: Outcome::Result(raw), .. }) = env else {
            panic!("not a result")
        };
        assert_eq!(raw.get(), r#"{"b": 1, "a":2}"#);
    }

    #[test]
    fn the_version_is_read_escaped_as_well_as_borrowed() {
        // Borrowed from the text when it has no escape, decoded into its own string when it has.
        for body in [&br#"{"jsonrpc":"2.0","method":"x"}"#[..], br#"{"jsonrpc":"2\u002e0","method":"x"}"#] {
            assert!(matches!(Envelope::parse(body), Ok(Envelope::Notification(_))));
        }
        assert!(matches!(
            Envelope::parse(br#"{"jsonrpc":"2\u002e1","method":"x"}"#),
            Err(EnvelopeError::Version)
        ));
    }

    #[test]
    fn wrong_version_and_ambiguous_shapes_are_rejected() {
        assert!(matches!(
            Envelope::parse(br#"{"jsonrpc":"1.0","id":1,"method":"x"}"#),
            Err(EnvelopeError::Version)
        ));
        assert!(matches!(Envelope::parse(br#"{"jsonrpc":"2.0","id":1}"#), Err(EnvelopeError::Shape)));
        assert!(matches!(
            Envelope::parse(br#"{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"m"}}"#),
            Err(EnvelopeError::Shape)
        ));
        assert!(matches!(
            Envelope::parse(br#"{"jsonrpc":"2.0","id":1,"result":3}"#),
            Err(EnvelopeError::ResultNotObject)
        ));
    }

    #[test]
    fn relayed_params_keep_the_clients_numbers() {
        // Found by the jsonrpc_envelope fuzz target: without correctly rounded float parsing,
        // this 123-digit number parsed one ulp off, so the params the gateway wrote upstream
        // no longer parsed to what the client sent.
        let number = format!("{}3", "1".repeat(122));
        let body = format!(r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"d":{number}}}}}"#);
        let Envelope::Request(r) = Envelope::parse(body.as_bytes()).unwrap() else { panic!("not a request") };
        assert_eq!(r.params.as_ref().unwrap()["d"].as_f64(), Some(1.1111111111111111e122));
        let relayed = request_bytes(&r.id, &r.method, r.params.as_ref());
        let Envelope::Request(again) = Envelope::parse(&relayed).unwrap() else { panic!("not a request") };
        assert_eq!(again.params, r.params);
    }

    /// serde's own words named the gateway's internal struct ("expected struct Wire with 6
    /// elements" for a batch); each fault is now named in the sender's terms.
    #[test]
    fn json_of_the_wrong_shape_is_named_in_the_senders_terms() {
        let cases: [(&[u8], &str); 9] = [
            (
                br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
                "JSON-RPC batches are not supported: send one message per POST",
            ),
            (b" \n[]", "JSON-RPC batches are not supported: send one message per POST"),
            (b"42", "a JSON-RPC message must be a JSON object"),
            (br#""tools/call""#, "a JSON-RPC message must be a JSON object"),
            (br#"{"jsonrpc":2,"id":1,"method":"x"}"#, "`jsonrpc` must be \"2.0\""),
            (br#"{"jsonrpc":"2.0","id":1,"method":7}"#, "`method` must be a string"),
            (br#"{"jsonrpc":"2.0","id":1,"method":{"name":"x"}}"#, "`method` must be a string"),
            (
                br#"{"jsonrpc":"2.0","id":1,"error":{"code":"x","message":"m"}}"#,
                "`error` must be an object with an integer `code` and a string `message`",
            ),
            (
                br#"{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}"#,
                "a member of the message appears more than once",
            ),
        ];
        for (body, want) in cases {
            let e = Envelope::parse(body).unwrap_err();
            assert_eq!(e.to_string(), want, "{}", String::from_utf8_lossy(body));
        }
        // Invalid JSON is still a syntax error, which names the place in the sender's text.
        let e = Envelope::parse(b"{\"jsonrpc\":").unwrap_err();
        assert!(matches!(&e, EnvelopeError::Json(j) if j.is_eof()), "{e}");
    }

    #[test]
    fn error_response_with_null_id_parses() {
        let env =
            Envelope::parse(br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"m"}}"#).unwrap();
        assert!(matches!(env, Envelope::Response(Response { id: None, outcome: Outcome::Error(_) })));
    }
}
