//! One client line as what the front service takes: a `POST` whose mirrored headers are read
//! from the body, a cancellation, or an answer given here. The body is forwarded byte for byte;
//! only the few fields the headers mirror are looked at (unknown fields are skipped unparsed).

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE};
use http::{HeaderName, HeaderValue, Method, Request};
use http_body_util::Full;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::error::FrontError;
use crate::protocol::headers;
use crate::protocol::jsonrpc::{error_bytes, RequestId};
use crate::protocol::methods::{self, FrontMethod};

/// What to do with one line.
pub(super) enum Incoming {
    /// Hand it to the front; a request's id is what `notifications/cancelled` names.
    Forward { request: Box<Request<Full<Bytes>>>, id: Option<RequestId> },
    /// Cancel the in-flight request with this id.
    Cancel(RequestId),
    /// Answer at once with these bytes, without the front.
    Answer(Vec<u8>),
    /// Nothing to do (a blank line, a cancellation naming no valid id).
    Ignore,
}

/// The top level of a message: enough to tell requests, notifications and cancellations apart.
#[derive(Deserialize)]
struct Probe<'a> {
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    method: Option<Value>,
    #[serde(default, borrow)]
    params: Option<&'a RawValue>,
}

/// The fields of `params` the headers mirror, and a cancellation's target.
#[derive(Deserialize, Default)]
struct Params {
    #[serde(rename = "_meta")]
    meta: Option<Meta>,
    name: Option<Value>,
    uri: Option<Value>,
    #[serde(rename = "requestId")]
    request_id: Option<Value>,
}

#[derive(Deserialize)]
struct Meta {
    #[serde(rename = "io.modelcontextprotocol/protocolVersion")]
    version: Option<Value>,
}

/// Classifies `line` (without its newline) for the front at `path`.
pub(super) fn incoming(line: Vec<u8>, path: &str) -> Incoming {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Incoming::Ignore;
    }
    // A line that is not a JSON object goes to the front as it is: it answers -32700 or -32600.
    let Ok(probe) = serde_json::from_slice::<Probe<'_>>(&line) else {
        return Incoming::Forward { request: post(path, line, &[]), id: None };
    };
    let params = probe.params.and_then(|raw| serde_json::from_str::<Params>(raw.get()).ok());
    let method = probe.method.as_ref().and_then(Value::as_str);
    let id = probe.id.as_ref().and_then(request_id);
    if method == Some(methods::CANCELLED) && probe.id.is_none() {
        return params
            .and_then(|p| p.request_id.as_ref().and_then(request_id))
            .map_or(Incoming::Ignore, Incoming::Cancel);
    }
    let mut mirrored = Vec::with_capacity(3);
    if let Some(version) = params.as_ref().and_then(|p| p.meta.as_ref()?.version.as_ref()?.as_str()) {
        mirrored.push((headers::PROTOCOL_VERSION, version.to_owned()));
    }
    if let Some(method) = method {
        mirrored.push((headers::METHOD, method.to_owned()));
        if let Some(FrontMethod::Mrtr(m)) = FrontMethod::parse(method) {
            let target = params.as_ref().and_then(|p| {
                if m.target_field() == "uri" {
                    p.uri.as_ref()
                } else {
                    p.name.as_ref()
                }
            });
            match (target.and_then(Value::as_str), &id) {
                (Some(name), _) => mirrored.push((headers::NAME, name.to_owned())),
                (None, Some(id)) => return Incoming::Answer(not_a_string(id, m.target_field())),
                (None, None) => {}
            }
        }
    }
    Incoming::Forward { request: post(path, line, &mirrored), id }
}

fn request_id(value: &Value) -> Option<RequestId> {
    serde_json::from_value(value.clone()).ok()
}

/// The front's answer to a target that is not a string (see the module doc).
fn not_a_string(id: &RequestId, field: &str) -> Vec<u8> {
    let e = FrontError::InvalidParams(format!("params.{field} must be a string"));
    error_bytes(Some(id), &e.to_object())
}

/// A `POST` of `body` to `path` with the content headers and `mirrored` ones.
fn post(path: &str, body: Vec<u8>, mirrored: &[(HeaderName, String)]) -> Box<Request<Full<Bytes>>> {
    let mut request = Box::new(Request::new(Full::new(Bytes::from(body))));
    *request.method_mut() = Method::POST;
    *request.uri_mut() = path.parse().unwrap_or_default();
    let h = request.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    h.insert(ACCEPT, HeaderValue::from_static("application/json, text/event-stream"));
    for (name, text) in mirrored {
        if let Some(value) = header_value(text) {
            h.insert(name.clone(), value);
        }
    }
    request
}

/// `text` as a header value: as it is when header-safe, else in the `=?base64?…?=` form the
/// front decodes (non-ASCII, control characters, edge spaces, or the sentinel's own shape).
pub(super) fn header_value(text: &str) -> Option<HeaderValue> {
    let safe = text.bytes().all(|b| (0x20..0x7f).contains(&b))
        && !text.starts_with(' ')
        && !text.ends_with(' ')
        && !text.starts_with("=?base64?");
    let value = if safe { text.to_owned() } else { format!("=?base64?{}?=", STANDARD.encode(text)) };
    HeaderValue::from_str(&value).ok()
}

#[cfg(test)]
mod tests;
