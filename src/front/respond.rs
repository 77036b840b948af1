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
/// Written in one pass into one buffer: the result (an upstream's, of any size) is copied once
/// and never parsed again; it is valid JSON already, and the splice keeps it so.
pub(super) fn complete_bytes(id: &RequestId, result: &RawValue, extra: &str) -> Vec<u8> {
    let object = result.get();
    if object.contains("\"resultType\"") {
        let spliced = stamp_parsed(object, extra);
        return match RawValue::from_string(spliced) {
            Ok(raw) => result_bytes(id, &raw),
            Err(_) => result_bytes(id, result),
        };
    }
    let Some(body) = object.trim_start().strip_prefix('{') else { return result_bytes(id, result) };
    let mut out = Vec::with_capacity(object.len() + extra.len() + 80);
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    if serde_json::to_writer(&mut out, id).is_err() {
        return result_bytes(id, result);
    }
    out.extend_from_slice(b",\"result\":");
    splice(&mut out, body, extra);
    out.push(b'}');
    out
}

/// Writes `{"resultType":"complete"` + `extra` + the rest of an object whose opening brace was
/// taken off (`body`).
fn splice(out: &mut Vec<u8>, body: &str, extra: &str) {
    out.extend_from_slice(br#"{"resultType":"complete""#);
    out.extend_from_slice(extra.as_bytes());
    if !body.trim_start().starts_with('}') {
        out.push(b',');
    }
    out.extend_from_slice(body.trim_start().as_bytes());
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

/// A result that already names a `resultType` (a server that speaks some 2026 already) takes
/// the slow path: parsed, set, written back.
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

    /// The result of the complete response made of `object` and `extra`, as text.
    fn stamped(object: &str, extra: &str) -> String {
        let raw = RawValue::from_string(object.into()).unwrap();
        let v: Value = serde_json::from_slice(&complete_bytes(&RequestId::Number(0), &raw, extra)).unwrap();
        let text = String::from_utf8(complete_bytes(&RequestId::Number(0), &raw, extra)).unwrap();
        let result = &text[text.find(r#""result":"#).unwrap() + 9..text.len() - 1];
        assert_eq!(serde_json::from_str::<Value>(result).unwrap(), v["result"]);
        result.to_owned()
    }

    #[test]
    fn stamp_splices_without_reordering() {
        assert_eq!(stamped(r#"{"content":[]}"#, ""), r#"{"resultType":"complete","content":[]}"#);
        assert_eq!(stamped("{ }", ""), r#"{"resultType":"complete"}"#);
        assert_eq!(stamped("{}", r#","ttlMs":0"#), r#"{"resultType":"complete","ttlMs":0}"#);
        let s = stamped(r#"{"tools":[{"name":"a"}]}"#, &cache_fields(5, "private"));
        let v: Value = serde_json::from_str(&s).unwrap();
        assert_eq!(
            v,
            json!({"resultType":"complete","ttlMs":5,"cacheScope":"private","tools":[{"name":"a"}]})
        );
    }

    #[test]
    fn stamp_overrides_an_existing_result_type() {
        let s = stamped(r#"{"resultType":"weird","x":1}"#, "");
        let v: Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v, json!({"resultType":"complete","x":1}));
    }

    #[test]
    fn complete_bytes_are_the_envelope_with_the_result_spliced() {
        let cases = [
            (r#"{"content":[{"type":"text","text":"h\u00e9 \"x\""}]}"#, ""),
            (" { } ", r#","ttlMs":5,"cacheScope":"private""#),
            (r#"{"resultType":"weird","x":1}"#, r#","ttlMs":0"#),
            (r#"{ "isError": true }"#, ""),
        ];
        for (result, extra) in cases {
            let raw = RawValue::from_string(result.into()).unwrap();
            for id in [RequestId::Number(-7), RequestId::String("a\"b".into())] {
                let bytes = complete_bytes(&id, &raw, extra);
                let v: Value = serde_json::from_slice(&bytes).unwrap();
                let mut want: Value = serde_json::from_str(result).unwrap();
                want["resultType"] = json!("complete");
                if !extra.is_empty() {
                    let fields: Value = serde_json::from_str(&format!("{{{}}}", &extra[1..])).unwrap();
                    want.as_object_mut().unwrap().extend(fields.as_object().unwrap().clone());
                }
                assert_eq!(
                    v,
                    json!({"jsonrpc": "2.0", "id": serde_json::to_value(&id).unwrap(), "result": want})
                );
                if !result.contains("resultType") {
                    // Spliced, not rewritten: the upstream's own text follows the stamp.
                    let text = String::from_utf8(bytes).unwrap();
                    assert!(text.contains(result.trim().trim_start_matches('{').trim_start()), "{text}");
                }
            }
        }
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

    #[test]
    fn a_refusal_carries_its_challenge_and_a_rate_limit_its_retry_time() {
        let challenge = HeaderValue::from_static(r#"Bearer error="insufficient_scope", scope="tools:write""#);
        let denied =
            |challenge| crate::auth::Denied { message: "no".into(), challenge, method: "tools/call" };
        let r = error(None, &FrontError::Forbidden(denied(Some(challenge.clone()))));
        assert_eq!(
            (r.status(), r.headers().get(WWW_AUTHENTICATE)),
            (StatusCode::FORBIDDEN, Some(&challenge))
        );
        let r = error(None, &FrontError::Forbidden(denied(None)));
        assert!(!r.headers().contains_key(WWW_AUTHENTICATE), "a rule refusal asks for no other token");
        let limit = crate::limits::LimitError {
            limit: crate::limits::Limit::Principal,
            retry_after: std::time::Duration::from_millis(2500),
        };
        let r = error(None, &FrontError::RateLimited(limit));
        assert_eq!(
            (r.status(), &r.headers()[http::header::RETRY_AFTER]),
            (StatusCode::TOO_MANY_REQUESTS, &HeaderValue::from(3))
        );
    }
}
