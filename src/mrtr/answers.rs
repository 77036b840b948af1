//! Validation of the answers a client sends in `inputResponses`.
//!
//! The answers are the client's words, replayed later to a legacy server that trusts them as a
//! real client's result. SEP-2322 says the server SHOULD validate them; we check the shape the
//! 2026-07-28 schema requires for each kind, so that a malformed answer becomes a clear
//! `-32602` for the client now instead of an upstream failure on some later replay.

use serde_json::{Map, Value};

use crate::mrtr::translate::InputKind;

/// Checks an answer against the result schema of its kind; the error says what is wrong.
pub fn validate_answer(kind: InputKind, answer: &Value) -> Result<(), String> {
    let object = answer.as_object().ok_or_else(|| format!("{} must be a JSON object", result_name(kind)))?;
    match kind {
        InputKind::Elicitation => validate_elicit(object),
        InputKind::Sampling => validate_sampling(object),
        InputKind::Roots => validate_roots(object),
    }
}

fn result_name(kind: InputKind) -> &'static str {
    match kind {
        InputKind::Elicitation => "ElicitResult",
        InputKind::Sampling => "CreateMessageResult",
        InputKind::Roots => "ListRootsResult",
    }
}

fn validate_elicit(object: &Map<String, Value>) -> Result<(), String> {
    match object.get("action").and_then(Value::as_str) {
        Some("accept" | "decline" | "cancel") => {}
        _ => return Err("`action` must be \"accept\", \"decline\" or \"cancel\"".to_owned()),
    }
    match object.get("content") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Object(content)) => {
            content.iter().try_for_each(|(name, value)| elicit_value(name, value))
        }
        Some(_) => Err("`content` must be an object".to_owned()),
    }
}

fn elicit_value(name: &str, value: &Value) -> Result<(), String> {
    let ok = match value {
        Value::String(_) | Value::Number(_) | Value::Bool(_) => true,
        Value::Array(items) => items.iter().all(Value::is_string),
        Value::Null | Value::Object(_) => false,
    };
    if ok {
        Ok(())
    } else {
        Err(format!("`content.{}` must be a string, number, boolean or array of strings", clip(name)))
    }
}

fn validate_sampling(object: &Map<String, Value>) -> Result<(), String> {
    match object.get("role").and_then(Value::as_str) {
        Some("user" | "assistant") => {}
        _ => return Err("`role` must be \"user\" or \"assistant\"".to_owned()),
    }
    if !object.get("model").is_some_and(Value::is_string) {
        return Err("`model` must be a string".to_owned());
    }
    match object.get("content") {
        Some(block @ Value::Object(_)) => content_block(block),
        Some(Value::Array(blocks)) if !blocks.is_empty() => blocks.iter().try_for_each(content_block),
        _ => Err("`content` must be a content block or a non-empty array of blocks".to_owned()),
    }
}

fn content_block(block: &Value) -> Result<(), String> {
    if block.get("type").is_some_and(Value::is_string) {
        Ok(())
    } else {
        Err("every `content` block must be an object with a string `type`".to_owned())
    }
}

fn validate_roots(object: &Map<String, Value>) -> Result<(), String> {
    let roots =
        object.get("roots").and_then(Value::as_array).ok_or_else(|| "`roots` must be an array".to_owned())?;
    roots.iter().enumerate().try_for_each(|(i, root)| {
        let uri_ok = root.get("uri").and_then(Value::as_str).is_some_and(|uri| uri.starts_with("file://"));
        let name_ok = root.get("name").is_none_or(Value::is_string);
        if uri_ok && name_ok && root.is_object() {
            Ok(())
        } else {
            Err(format!("`roots[{i}]` must be {{uri: \"file://…\", name?: string}}"))
        }
    })
}

/// Keeps client-chosen names short in error messages.
fn clip(name: &str) -> String {
    name.chars().take(64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn table_of_answers() {
        use InputKind::*;
        let cases = [
            (
                Elicitation,
                json!({"action": "accept", "content": {"name": "Alice", "n": 3, "ok": true, "tags": ["a"]}}),
                true,
            ),
            (Elicitation, json!({"action": "decline"}), true),
            (Elicitation, json!({"action": "cancel", "content": null}), true),
            (Elicitation, json!({"action": "maybe"}), false),
            (Elicitation, json!({"content": {}}), false),
            (Elicitation, json!({"action": "accept", "content": {"x": {"nested": 1}}}), false),
            (Elicitation, json!({"action": "accept", "content": {"x": [1, 2]}}), false),
            (Elicitation, json!({"action": "accept", "content": "Alice"}), false),
            (Elicitation, json!(12345), false),
            (
                Sampling,
                json!({"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m", "stopReason": "endTurn"}),
                true,
            ),
            (
                Sampling,
                json!({"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "image", "data": "", "mimeType": "image/png"}], "model": "m"}),
                true,
            ),
            (Sampling, json!({"role": "assistant", "content": [], "model": "m"}), false),
            (Sampling, json!({"role": "assistant", "content": {"text": "no type"}, "model": "m"}), false),
            (Sampling, json!({"role": "system", "content": {"type": "text"}, "model": "m"}), false),
            (Sampling, json!({"role": "assistant", "content": {"type": "text"}}), false),
            (
                Roots,
                json!({"roots": [{"uri": "file:///test/root", "name": "Test Root"}, {"uri": "file:///x"}]}),
                true,
            ),
            (Roots, json!({"roots": []}), true),
            (Roots, json!({"roots": [{"uri": "https://example.com"}]}), false),
            (Roots, json!({"roots": [{"uri": "file:///x", "name": 3}]}), false),
            (Roots, json!({"roots": {}}), false),
        ];
        for (kind, answer, valid) in cases {
            let result = validate_answer(kind, &answer);
            assert_eq!(result.is_ok(), valid, "{kind:?} {answer} -> {result:?}");
        }
    }

    #[test]
    fn errors_say_what_is_wrong() {
        let err = validate_answer(InputKind::Roots, &json!({"roots": [{"uri": "http://x"}]})).unwrap_err();
        assert!(err.contains("roots[0]") && err.contains("file://"), "{err}");
        let err = validate_answer(InputKind::Elicitation, &json!(12345)).unwrap_err();
        assert!(err.contains("ElicitResult"), "{err}");
        let long = "n".repeat(100);
        let answer = json!({"action": "accept", "content": { long.as_str(): null }});
        let err = validate_answer(InputKind::Elicitation, &answer).unwrap_err();
        assert!(err.contains(&format!("`content.{}`", &long[..64])), "names the field, clipped: {err}");
    }
}
