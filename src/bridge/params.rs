//! The params a legacy server receives: the front request's params minus what only
//! 2026-07-28 knows (the retry fields `inputResponses`/`requestState`, and the per-request
//! `io.modelcontextprotocol/*` envelope in `_meta`). The progress token and any other `_meta`
//! keys pass through.

use serde_json::{Map, Value};

const RETRY_FIELDS: [&str; 2] = ["inputResponses", "requestState"];
const ENVELOPE_PREFIX: &str = "io.modelcontextprotocol/";

/// Strips the 2026-only fields from request params.
pub fn upstream_params(params: Option<&Value>) -> Value {
    let Some(Value::Object(map)) = params else { return Value::Object(Map::new()) };
    let mut out = Map::with_capacity(map.len());
    for (k, v) in map {
        if RETRY_FIELDS.contains(&k.as_str()) {
            continue;
        }
        if k == "_meta" {
            if let Some(meta) = legacy_meta(v) {
                out.insert(k.clone(), meta);
            }
            continue;
        }
        out.insert(k.clone(), v.clone());
    }
    Value::Object(out)
}

fn legacy_meta(meta: &Value) -> Option<Value> {
    let Value::Object(meta) = meta else { return None };
    let kept: Map<String, Value> = meta
        .iter()
        .filter(|(k, _)| !k.starts_with(ENVELOPE_PREFIX))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    (!kept.is_empty()).then_some(Value::Object(kept))
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
}
