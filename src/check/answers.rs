//! What the check answers when a server asks (`elicitation/create`, `sampling/createMessage`,
//! `roots/list`), the same way on both sides, and how a question is summed up in the report.
//!
//! A call's answers come from the calls file ([`super::calls`]): the call's own, else the
//! file's, else the built-in ones below. A form answer that leaves out a field of the requested
//! schema gets one made from the schema (its default, its first allowed value, or a placeholder
//! of its type), so that a server that validates its form gets something valid.

use serde::Deserialize;
use serde_json::{json, Value};

use super::report::Question;
use crate::protocol::methods;

/// Longest message kept in a question's summary.
const MAX_SUMMARY_CHARS: usize = 120;

/// The answers to each kind of question; `None` takes the next level's.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Answers {
    /// A form elicitation's result, e.g. `{"action": "accept", "content": {"name": "Ada"}}`.
    pub form: Option<Value>,
    /// A URL elicitation's result, e.g. `{"action": "accept"}`.
    pub url: Option<Value>,
    /// A sampling result (`role`, `content`, `model`).
    pub sampling: Option<Value>,
    /// A `roots/list` result (`{"roots": [...]}`).
    pub roots: Option<Value>,
}

// === impl Answers ===

impl Answers {
    /// These answers, the missing ones taken from `fallback`.
    pub fn or(&self, fallback: &Self) -> Self {
        let pick = |a: &Option<Value>, b: &Option<Value>| a.clone().or_else(|| b.clone());
        Self {
            form: pick(&self.form, &fallback.form),
            url: pick(&self.url, &fallback.url),
            sampling: pick(&self.sampling, &fallback.sampling),
            roots: pick(&self.roots, &fallback.roots),
        }
    }

    /// The answer to the server's `method(params)`; `None` for a request the check does not
    /// answer.
    pub fn answer(&self, method: &str, params: Option<&Value>) -> Option<Value> {
        match method {
            methods::ELICITATION_CREATE if mode(params) == "url" => {
                Some(self.url.clone().unwrap_or_else(|| json!({"action": "accept"})))
            }
            methods::ELICITATION_CREATE => Some(self.form_answer(params)),
            methods::SAMPLING_CREATE_MESSAGE => Some(self.sampling.clone().unwrap_or_else(|| {
                json!({"role": "assistant", "model": "mrtr-gateway-check", "stopReason": "endTurn",
                       "content": {"type": "text", "text": "A canned answer from mrtr-gateway check."}})
            })),
            methods::ROOTS_LIST => Some(self.roots.clone().unwrap_or_else(|| json!({"roots": []}))),
            _ => None,
        }
    }

    fn form_answer(&self, params: Option<&Value>) -> Value {
        let mut answer = self.form.clone().unwrap_or_else(|| json!({"action": "accept"}));
        if answer.get("action").and_then(Value::as_str) != Some("accept") {
            return answer;
        }
        let schema = params.and_then(|p| p.get("requestedSchema"));
        let Some(properties) = schema.and_then(|s| s.get("properties")).and_then(Value::as_object) else {
            return answer;
        };
        let content = answer.as_object_mut().map(|a| a.entry("content").or_insert_with(|| json!({})));
        if let Some(Value::Object(content)) = content {
            for (name, property) in properties {
                if !content.contains_key(name) {
                    content.insert(name.clone(), placeholder(property));
                }
            }
        }
        answer
    }
}

/// The summary of the server's `method(params)` in the report.
pub(super) fn question(method: &str, params: Option<&Value>) -> Question {
    let summary = match method {
        methods::ELICITATION_CREATE if mode(params) == "url" => {
            let url = params.and_then(|p| p.get("url")).and_then(Value::as_str).unwrap_or("");
            format!("url: {}", without_query(url))
        }
        methods::ELICITATION_CREATE => {
            let message = params.and_then(|p| p.get("message")).and_then(Value::as_str).unwrap_or("");
            format!("form: {}", clip(message))
        }
        methods::SAMPLING_CREATE_MESSAGE => "sampling".to_owned(),
        methods::ROOTS_LIST => "roots".to_owned(),
        other => clip(other),
    };
    Question { method: clip(method), summary }
}

/// `form` or `url` (a form when the mode is left out).
fn mode(params: Option<&Value>) -> &str {
    params.and_then(|p| p.get("mode")).and_then(Value::as_str).unwrap_or("form")
}

/// A value a form field of `schema` accepts.
fn placeholder(schema: &Value) -> Value {
    if let Some(default) = schema.get("default") {
        return default.clone();
    }
    if let Some(first) = schema.get("enum").and_then(Value::as_array).and_then(|e| e.first()) {
        return first.clone();
    }
    let one_of = schema.get("oneOf").or_else(|| schema.get("anyOf")).and_then(Value::as_array);
    if let Some(constant) = one_of.and_then(|o| o.first()).and_then(|o| o.get("const")) {
        return constant.clone();
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("boolean") => json!(true),
        Some("integer") | Some("number") => schema.get("minimum").cloned().unwrap_or(json!(1)),
        Some("array") => {
            let items = schema.get("items").cloned().unwrap_or_else(|| json!({"type": "string"}));
            json!([placeholder(&items)])
        }
        _ => json!(match schema.get("format").and_then(Value::as_str) {
            Some("email") => "check@example.com",
            Some("uri") => "https://example.com/",
            Some("date") => "2026-01-01",
            Some("date-time") => "2026-01-01T00:00:00Z",
            _ => "check",
        }),
    }
}

/// A URL without its query and fragment (they often carry a nonce that changes every time).
fn without_query(url: &str) -> String {
    clip(url.split(['?', '#']).next().unwrap_or(""))
}

fn clip(text: &str) -> String {
    text.chars().take(MAX_SUMMARY_CHARS).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_form_answer_fills_every_field_the_form_asks_and_keeps_the_given_ones() {
        let answers = Answers {
            form: Some(json!({"action": "accept", "content": {"name": "Ada"}})),
            ..Default::default()
        };
        let params = json!({"message": "Who?", "requestedSchema": {"type": "object", "properties": {
            "name": {"type": "string"}, "age": {"type": "integer", "minimum": 18}, "ok": {"type": "boolean"},
            "color": {"type": "string", "enum": ["red", "blue"]}, "mail": {"type": "string", "format": "email"},
            "size": {"type": "string", "default": "M"}, "tags": {"type": "array", "items": {"enum": ["a"]}}}}});
        let answer = answers.answer("elicitation/create", Some(&params)).unwrap();
        assert_eq!(
            answer["content"],
            json!({"name": "Ada", "age": 18, "ok": true, "color": "red",
            "mail": "check@example.com", "size": "M", "tags": ["a"]})
        );
        let declined = Answers { form: Some(json!({"action": "decline"})), ..Default::default() };
        assert_eq!(
            declined.answer("elicitation/create", Some(&params)).unwrap(),
            json!({"action": "decline"})
        );
    }

    #[test]
    fn each_kind_has_a_built_in_answer_and_a_summary() {
        let none = Answers::default();
        let url = json!({"mode": "url", "message": "Log in", "url": "https://id.example/login?nonce=42"});
        assert_eq!(none.answer("elicitation/create", Some(&url)), Some(json!({"action": "accept"})));
        assert_eq!(question("elicitation/create", Some(&url)).summary, "url: https://id.example/login");
        assert_eq!(none.answer("roots/list", None), Some(json!({"roots": []})));
        assert_eq!(none.answer("sampling/createMessage", None).unwrap()["role"], "assistant");
        assert_eq!(none.answer("ping", None), None);
        let form = json!({"message": "Your name?", "requestedSchema": {"type": "object", "properties": {}}});
        assert_eq!(question("elicitation/create", Some(&form)).summary, "form: Your name?");
    }

    #[test]
    fn a_calls_answers_fall_back_to_the_files_then_to_the_built_in_ones() {
        let call = Answers { roots: Some(json!({"roots": [{"uri": "file:///a"}]})), ..Default::default() };
        let file = Answers {
            roots: Some(json!({"roots": []})),
            url: Some(json!({"action": "decline"})),
            ..Default::default()
        };
        let merged = call.or(&file);
        assert_eq!(merged.roots, call.roots);
        assert_eq!(merged.url, file.url);
        assert_eq!(merged.form, None);
    }
}
