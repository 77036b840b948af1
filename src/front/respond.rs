//! Building front responses: JSON-RPC success and error bodies, HTTP status and headers, and
//! the splice that stamps `resultType` (and cache hints) onto an upstream result without parsing
//! it into a tree and serialising it again.

use http::header::{HeaderValue, ALLOW, CONTENT_TYPE, WWW_AUTHENTICATE};
use http::{Response, StatusCode};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::body::FrontBody;
use crate::error::FrontError;
use crate::protocol::jsonrpc::{error_bytes, result_bytes};
use crate::protocol::RequestId;

const JSON: HeaderValue = HeaderValue::from_static("application/json");

/// A JSON response with the given status.
pub(super) fn json(status: StatusCode, bytes: Vec<u8>) -> Response<FrontBody> {
    let mut r = Response::new(FrontBody::full(bytes));
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, JSON);
    r
}

/// An error response: the JSON-RPC error with the status and headers the error calls for.
pub(super) fn error(id: Option<&RequestId>, e: &FrontError) -> Response<FrontBody> {
    let mut r = json(e.status(), error_bytes(id, &e.to_object()));
    match e {
        FrontError::Unauthorized(_) => {
            let challenge = HeaderValue::from_static(r#"Bearer realm="mrtr-gateway", error="invalid_token""#);
            r.headers_mut().insert(WWW_AUTHENTICATE, challenge);
        }
        FrontError::Forbidden(denied) => {
            if let Some(challenge) = &denied.challenge {
                r.headers_mut().insert(WWW_AUTHENTICATE, challenge.clone());
            }
        }
        FrontError::HttpMethodNotAllowed(_) => {
            r.headers_mut().insert(ALLOW, HeaderValue::from_static("POST"));
        }
        FrontError::RateLimited(limit) => {
            r.headers_mut().insert(http::header::RETRY_AFTER, HeaderValue::from(limit.retry_after_secs()));
        }
        _ => {}
    }
    r
}

/// 202 Accepted with no body (an accepted notification).
pub(super) fn accepted() -> Response<FrontBody> {
    let mut r = Response::new(FrontBody::empty());
    *r.status_mut() = StatusCode::ACCEPTED;
    r
}

/// The bytes of a complete response: `result` with `resultType` and `extra` fields spliced in.
pub(super) fn complete_bytes(id: &RequestId, result: &RawValue, extra: &str) -> Vec<u8> {
    let spliced = stamp(result.get(), extra);
    match RawValue::from_string(spliced) {
        Ok(raw) => result_bytes(id, &raw),
        Err(_) => result_bytes(id, result),
    }
}

/// The bytes of an `input_required` response.
pub(super) fn input_required_bytes(id: &RequestId, requests: &Map<String, Value>, state: &str) -> Vec<u8> {
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Body<'a> {
        result_type: &'static str,
        input_requests: &'a Map<String, Value>,
        request_state: &'a str,
    }
    #[derive(Serialize)]
    struct Envelope<'a> {
        jsonrpc: &'static str,
        id: &'a RequestId,
        result: Body<'a>,
    }
    let result = Body { result_type: "input_required", input_requests: requests, request_state: state };
    serde_json::to_vec(&Envelope { jsonrpc: "2.0", id, result }).unwrap_or_default()
}

/// Cache-hint fields for cacheable results (`"ttlMs":N,"cacheScope":"…"`).
pub(super) fn cache_fields(ttl_ms: u64, scope: &str) -> String {
    format!(r#","ttlMs":{ttl_ms},"cacheScope":"{scope}""#)
}

/// Inserts `"resultType":"complete"` plus `extra` (which starts with a comma, or is empty) at
/// the front of a JSON object's text. A result that already names a `resultType` (a server that
/// speaks some 2026 already) takes the slow path: parsed, set, written back.
pub(super) fn stamp(object: &str, extra: &str) -> String {
    if object.contains("\"resultType\"") {
        return stamp_parsed(object, extra);
    }
    let trimmed = object.trim_start();
    let body = trimmed.strip_prefix('{').unwrap_or(trimmed);
    let empty = body.trim_start().starts_with('}');
    let mut out = String::with_capacity(object.len() + 32 + extra.len());
    out.push_str(r#"{"resultType":"complete""#);
    out.push_str(extra);
    if empty {
        out.push('}');
    } else {
        out.push(',');
        out.push_str(body);
    }
    out
}

fn stamp_parsed(object: &str, extra: &str) -> String {
    let Ok(Value::Object(mut map)) = serde_json::from_str::<Value>(object) else { return object.to_owned() };
    map.insert("resultType".into(), Value::String("complete".into()));
    if let Ok(Value::Object(fields)) =
        serde_json::from_str::<Value>(&format!("{{{}}}", extra.trim_start_matches(',')))
    {
        map.extend(fields);
    }
    Value::Object(map).to_string()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn stamp_splices_without_reordering() {
        assert_eq!(stamp(r#"{"content":[]}"#, ""), r#"{"resultType":"complete","content":[]}"#);
        assert_eq!(stamp("{ }", ""), r#"{"resultType":"complete"}"#);
        assert_eq!(stamp("{}", r#","ttlMs":0"#), r#"{"resultType":"complete","ttlMs":0}"#);
        let s = stamp(r#"{"tools":[{"name":"a"}]}"#, &cache_fields(5, "private"));
        let v: Value = serde_json::from_str(&s).unwrap();
        assert_eq!(
            v,
            json!({"resultType":"complete","ttlMs":5,"cacheScope":"private","tools":[{"name":"a"}]})
        );
    }

    #[test]
    fn stamp_overrides_an_existing_result_type() {
        let s = stamp(r#"{"resultType":"weird","x":1}"#, "");
        let v: Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v, json!({"resultType":"complete","x":1}));
    }

    #[test]
    fn complete_and_input_required_bodies() {
        let raw = RawValue::from_string(r#"{"content":[{"type":"text","text":"hi"}]}"#.into()).unwrap();
        let v: Value = serde_json::from_slice(&complete_bytes(&RequestId::Number(0), &raw, "")).unwrap();
        assert_eq!(v["id"], 0);
        assert_eq!(v["result"]["resultType"], "complete");
        let mut req = Map::new();
        req.insert("k".into(), json!({"method":"roots/list"}));
        let v: Value =
            serde_json::from_slice(&input_required_bytes(&RequestId::String("a".into()), &req, "v1.x"))
                .unwrap();
        assert_eq!(
            v["result"],
            json!({"resultType":"input_required","inputRequests":{"k":{"method":"roots/list"}},"requestState":"v1.x"})
        );
    }

    #[test]
    fn errors_carry_status_and_headers() {
        let r = error(None, &FrontError::HttpMethodNotAllowed("GET".into()));
        assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(r.headers()[ALLOW], "POST");
        let r =
            error(Some(&RequestId::Number(1)), &FrontError::Unauthorized(crate::auth::AuthError::Missing));
        assert!(r.headers().contains_key(WWW_AUTHENTICATE));
    }
}
