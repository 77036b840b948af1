//! The params a legacy server receives: the front request's params minus what only
//! 2026-07-28 knows (the retry fields `inputResponses`/`requestState`, and the per-request
//! `io.modelcontextprotocol/*` envelope in `_meta`). The progress token and any other `_meta`
//! keys pass through.

use serde_json::{Map, Value};

use crate::protocol::params::{JsonText, Params};

const RETRY_FIELDS: [&str; 2] = ["inputResponses", "requestState"];
const ENVELOPE_PREFIX: &str = "io.modelcontextprotocol/";

/// The upstream's params of indexed front params: the client's text without the 2026-only
/// fields, each kept value copied as it came (no tree is built).
pub fn upstream_raw(params: &Params) -> JsonText {
    params.write(|key| !RETRY_FIELDS.contains(&key), |key| !key.starts_with(ENVELOPE_PREFIX))
}

/// Strips the 2026-only fields from request params, cloning what is kept.
pub fn upstream_params(params: Option<&Value>) -> Value {
    into_upstream_params(params.cloned())
}

/// Strips the 2026-only fields from request params in place: what is kept (the arguments, above
/// all) is moved, not copied, so a call's params are never cloned on their way upstream.
fn into_upstream_params(params: Option<Value>) -> Value {
    let Some(Value::Object(mut map)) = params else { return Value::Object(Map::new()) };
    for field in RETRY_FIELDS {
        map.remove(field);
    }
    if let Some(meta) = map.remove("_meta") {
        if let Some(meta) = legacy_meta(meta) {
            map.insert("_meta".to_owned(), meta);
        }
    }
    Value::Object(map)
}

fn legacy_meta(meta: Value) -> Option<Value> {
    let Value::Object(mut meta) = meta else { return None };
    meta.retain(|k, _| !k.starts_with(ENVELOPE_PREFIX));
    (!meta.is_empty()).then_some(Value::Object(meta))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn strips_retry_fields_and_envelope() {
        let p = json!({"name": "t", "arguments": {"a": 1}, "requestState": "s", "inputResponses": {},
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "progressToken": 3}});
        assert_eq!(
            upstream_params(Some(&p)),
            json!({"name": "t", "arguments": {"a": 1}, "_meta": {"progressToken": 3}})
        );
        let p = json!({"name": "t", "_meta": {"io.modelcontextprotocol/clientCapabilities": {}}});
        assert_eq!(upstream_params(Some(&p)), json!({"name": "t"}));
        assert_eq!(upstream_params(None), json!({}));
    }

    #[test]
    fn the_owned_form_strips_in_place() {
        let p = json!({"name": "t", "arguments": {"a": [1, 2]}, "requestState": "s", "inputResponses": {"k": {}},
            "_meta": {"io.modelcontextprotocol/logLevel": "info", "progressToken": "p", "other": 1}});
        assert_eq!(
            into_upstream_params(Some(p)),
            json!({"name": "t", "arguments": {"a": [1, 2]}, "_meta": {"progressToken": "p", "other": 1}})
        );
        assert_eq!(into_upstream_params(Some(json!({"_meta": 3}))), json!({}));
        assert_eq!(into_upstream_params(Some(json!([1]))), json!({}));
    }
}
