//! Plausible client answers to embedded requests, as a 2026-07-28 client with a user, a model
//! and a workspace would give them. The values are distinctive so that a test can find them in
//! the legacy server's final result and know the answer really reached it.

use serde_json::{json, Map, Value};

/// The name every form elicitation is answered with.
pub(crate) const NAME: &str = "Ada";
/// The model that "wrote" every sampling answer.
pub(crate) const MODEL: &str = "test-model-7";
/// The text of every sampling answer.
pub(crate) const SUMMARY: &str = "a short summary";
/// The one root every `roots/list` answer lists.
pub(crate) const ROOT: &str = "file:///workspace/project";

/// `inputResponses` answering every request of an `input_required` result, under its key.
pub(crate) fn answer_all(requests: &Map<String, Value>) -> Value {
    let answers: Map<String, Value> =
        requests.iter().map(|(key, request)| (key.clone(), answer(request))).collect();
    Value::Object(answers)
}

/// The answer to one embedded `{method, params}` request.
pub(crate) fn answer(request: &Value) -> Value {
    match request["method"].as_str() {
        Some("elicitation/create") => elicit(&request["params"]),
        Some("sampling/createMessage") => {
            json!({"role": "assistant", "content": {"type": "text", "text": SUMMARY}, "model": MODEL})
        }
        Some("roots/list") => json!({"roots": [{"uri": ROOT, "name": "project"}]}),
        _ => json!({}),
    }
}

/// Accepts a form with a value of the right type for each property; accepts a URL request.
fn elicit(params: &Value) -> Value {
    if params["mode"] == "url" {
        return json!({"action": "accept"});
    }
    let content: Map<String, Value> = params
        .pointer("/requestedSchema/properties")
        .and_then(Value::as_object)
        .map(|properties| properties.iter().map(|(name, schema)| (name.clone(), value_for(schema))).collect())
        .unwrap_or_default();
    json!({"action": "accept", "content": content})
}

fn value_for(schema: &Value) -> Value {
    match schema["type"].as_str() {
        Some("boolean") => json!(true),
        Some("integer" | "number") => json!(42),
        _ => json!(NAME),
    }
}
