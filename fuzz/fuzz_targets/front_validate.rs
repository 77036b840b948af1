//! The front's request validation (`request_meta`, `check_headers`, `check_version`) on
//! fuzzed methods, headers and params, in the order the front runs them.
//!
//! Input layout, like a tiny HTTP request (seeds in `corpus/front_validate/`):
//!
//! ```text
//! tools/call                      first line: the JSON-RPC method
//! mcp-method: tools/call          header lines until an empty line ("name: value")
//!
//! {"name":"greet","_meta":{...}}  the rest: `params` as JSON (empty for none)
//! ```
//!
//! Properties: never panic; refusals carry only the three codes validation may give; the same
//! request gets the same decision twice and after its params go through JSON text again; an
//! accepted request mirrors the body in its headers and speaks a supported version, stays
//! accepted with its headers in the `=?base64?…?=` form, and is refused as a header mismatch
//! once a mirrored header is missing, repeated or different; a request whose headers are
//! rewritten from its body is never refused as a header mismatch; params read from their own
//! text (as the front reads them: indexed, not as a tree) are judged as the tree is, unless
//! they name a member twice, which is refused as invalid params.

#![no_main]

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use http::{HeaderMap, HeaderName, HeaderValue};
use libfuzzer_sys::fuzz_target;
use mrtr_gateway::error::FrontError;
use mrtr_gateway::front::validate::{
    check_headers, check_version, decode_header_value, indexed_params, request_meta, RequestMeta,
};
use mrtr_gateway::protocol::methods::FrontMethod;
use mrtr_gateway::protocol::params::{Params, ParamsError};
use mrtr_gateway::protocol::{headers, FRONT_SUPPORTED_VERSIONS};
use serde_json::Value;

/// What a decision is compared by: its label and its message, or the accepted envelope.
#[derive(Debug, PartialEq)]
enum Decision {
    Accepted { version: String, capabilities: Value, progress: Option<Value> },
    Refused { label: &'static str, code: i64, message: String },
}

fn validate(map: &HeaderMap, method: &str, kind: FrontMethod, params: Option<&Value>) -> Decision {
    let text = params.map(|p| serde_json::value::to_raw_value(p).expect("a Value serialises"));
    validate_indexed(map, method, kind, text.map(|t| Params::index(&t)))
}

/// [`validate`] of params read from their text.
fn validate_indexed(
    map: &HeaderMap,
    method: &str,
    kind: FrontMethod,
    params: Option<Result<Params, ParamsError>>,
) -> Decision {
    let run = || -> Result<RequestMeta, FrontError> {
        let params = indexed_params(params)?;
        let meta = request_meta(&params)?;
        check_headers(map, method, kind, &params, &meta.protocol_version)?;
        check_version(&meta)?;
        Ok(meta)
    };
    match run() {
        Ok(m) => Decision::Accepted {
            version: m.protocol_version.into_owned(),
            capabilities: m.capabilities,
            progress: m.progress_token,
        },
        Err(e) => Decision::Refused { label: e.label().as_str(), code: e.code(), message: e.to_string() },
    }
}

fn refused_label(d: &Decision) -> Option<&'static str> {
    match d {
        Decision::Refused { label, .. } => Some(label),
        Decision::Accepted { .. } => None,
    }
}

/// The body's own value of the `Mcp-Name` header, for the methods that need one.
fn body_name<'a>(kind: FrontMethod, params: Option<&'a Value>) -> Option<&'a str> {
    match kind {
        FrontMethod::Mrtr(m) => params?.get(m.target_field())?.as_str(),
        _ => None,
    }
}

fn sentinel(text: &str) -> HeaderValue {
    HeaderValue::from_str(&format!("=?base64?{}?=", STANDARD.encode(text))).expect("base64 is visible ASCII")
}

fn with(map: &HeaderMap, name: &HeaderName, value: Option<HeaderValue>) -> HeaderMap {
    let mut map = map.clone();
    map.remove(name);
    if let Some(value) = value {
        map.insert(name.clone(), value);
    }
    map
}

fn decoded(map: &HeaderMap, name: &HeaderName) -> Option<String> {
    decode_header_value(map.get(name)?.to_str().ok()?).map(|v| v.into_owned())
}

fn parse(data: &[u8]) -> Option<(String, HeaderMap, Option<Value>, &[u8])> {
    let mut lines = data.split(|&b| b == b'\n');
    let method = std::str::from_utf8(lines.next()?).ok()?.trim_end_matches('\r').to_owned();
    let mut map = HeaderMap::new();
    let mut consumed = method.len() + 1;
    for line in lines.by_ref() {
        consumed += line.len() + 1;
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            break;
        }
        let Some(colon) = line.iter().position(|&b| b == b':') else { continue };
        let value = line[colon + 1..].trim_ascii();
        // What hyper would refuse never reaches the front.
        if let (Ok(name), Ok(value)) =
            (HeaderName::from_bytes(&line[..colon]), HeaderValue::from_bytes(value))
        {
            map.append(name, value);
        }
    }
    let body = data.get(consumed.min(data.len())..)?;
    let params = if body.trim_ascii().is_empty() { None } else { Some(serde_json::from_slice(body).ok()?) };
    Some((method, map, params, body))
}

fuzz_target!(|data: &[u8]| {
    let Some((method, map, params, body)) = parse(data) else { return };
    let Some(kind) = FrontMethod::parse(&method) else { return };
    let params = params.as_ref();
    let decision = validate(&map, &method, kind, params);

    // Read from the client's own text, the params are judged as their tree is, unless a member
    // of theirs or of their `_meta` is named twice (the tree kept the last one).
    if let Some(raw) =
        params.and_then(|_| serde_json::from_slice::<Box<serde_json::value::RawValue>>(body).ok())
    {
        let read = Params::index(&raw);
        match read {
            Err(ParamsError::Repeated(_)) => {
                let refused = validate_indexed(&map, &method, kind, Some(read));
                assert_eq!(refused_label(&refused), Some("invalid_params"), "{refused:?}");
            }
            read => {
                assert_eq!(validate_indexed(&map, &method, kind, Some(read)), decision, "read from its text")
            }
        }
    }

    if let Decision::Refused { label, code, .. } = &decision {
        let expected = match *label {
            "invalid_params" => -32602,
            "header_mismatch" => -32020,
            "unsupported_version" => -32022,
            other => panic!("validation refused with an unexpected error: {other}"),
        };
        assert_eq!(*code, expected, "{decision:?}");
    }
    assert_eq!(
        validate(&map, &method, kind, params),
        decision,
        "the same request was judged twice differently"
    );
    let text = params.map(|p| serde_json::to_vec(p).expect("a Value serialises"));
    let reparsed = text.map(|t| serde_json::from_slice::<Value>(&t).expect("own JSON parses"));
    assert_eq!(
        validate(&map, &method, kind, reparsed.as_ref()),
        decision,
        "params judged differently after a JSON round trip"
    );

    if let Decision::Accepted { version, capabilities, progress } = &decision {
        assert!(FRONT_SUPPORTED_VERSIONS.contains(&version.as_str()));
        assert!(capabilities.is_object());
        assert!(progress.as_ref().is_none_or(|p| p.is_string() || p.is_number()));
        assert_eq!(decoded(&map, &headers::PROTOCOL_VERSION).as_deref(), Some(version.as_str()));
        assert_eq!(decoded(&map, &headers::METHOD).as_deref(), Some(method.as_str()));
        if let FrontMethod::Mrtr(_) = kind {
            assert_eq!(decoded(&map, &headers::NAME).as_deref(), body_name(kind, params));
        }

        // The same values in the base64 form are the same request.
        let mut encoded = with(&map, &headers::PROTOCOL_VERSION, Some(sentinel(version)));
        encoded = with(&encoded, &headers::METHOD, Some(sentinel(&method)));
        if let Some(name) = body_name(kind, params) {
            encoded = with(&encoded, &headers::NAME, Some(sentinel(name)));
        }
        assert_eq!(validate(&encoded, &method, kind, params), decision, "base64 headers judged differently");

        // Missing, repeated or different mirrored headers are mismatches.
        let mut mirrored = vec![headers::PROTOCOL_VERSION, headers::METHOD];
        if let FrontMethod::Mrtr(_) = kind {
            mirrored.push(headers::NAME);
        }
        for name in mirrored {
            let missing = with(&map, &name, None);
            assert_eq!(refused_label(&validate(&missing, &method, kind, params)), Some("header_mismatch"));
            let mut repeated = map.clone();
            repeated.append(name.clone(), sentinel(&decoded(&map, &name).unwrap_or_default()));
            assert_eq!(refused_label(&validate(&repeated, &method, kind, params)), Some("header_mismatch"));
            let other = format!("{}x", decoded(&map, &name).unwrap_or_default());
            let changed = with(&map, &name, Some(sentinel(&other)));
            assert_eq!(refused_label(&validate(&changed, &method, kind, params)), Some("header_mismatch"));
        }
    }

    // Headers rewritten from the body cannot disagree with it.
    let text = params.map(|p| serde_json::value::to_raw_value(p).expect("a Value serialises"));
    let Some(Ok(indexed)) = text.map(|t| Params::index(&t)) else { return };
    let Ok(meta) = request_meta(&indexed) else { return };
    if matches!(kind, FrontMethod::Mrtr(_)) && body_name(kind, params).is_none() {
        return;
    }
    let mut fixed = with(&map, &headers::PROTOCOL_VERSION, Some(sentinel(&meta.protocol_version)));
    fixed = with(&fixed, &headers::METHOD, Some(sentinel(&method)));
    if let Some(name) = body_name(kind, params) {
        fixed = with(&fixed, &headers::NAME, Some(sentinel(name)));
    }
    let outcome = validate(&fixed, &method, kind, params);
    let supported = FRONT_SUPPORTED_VERSIONS.contains(&meta.protocol_version.as_ref());
    match refused_label(&outcome) {
        None => assert!(supported),
        Some("unsupported_version") => assert!(!supported),
        Some(other) => panic!("headers taken from the body were refused: {other} ({outcome:?})"),
    }
});
