//! A legacy server's question (`elicitation/create`, `sampling/createMessage`) held against
//! its 2026-07-28 params definition before it becomes an `inputRequests` entry, and looked at
//! for secrets ([`super::sensitive`]).
//!
//! The legacy params are checked as they come: the 2026-07-28 definitions allow fields they do
//! not name, so the fields the translation drops later (`_meta`, `task`, `elicitationId`) do not
//! count against a question. One repair is made: a `requestedSchema` without `type` gets
//! `"type": "object"`. One exception is made: a `"format": "password"` property, which the
//! 2026-07-28 schema does not list, is left to `elicitation.sensitive` (dropping the format
//! would show the secret in clear in a client that masks such fields).

use serde_json::{Map, Value};

use super::items::Refused;
use super::reason::{Refusal, Repair};
use super::sensitive::{self, Sensitive};
use super::spec::Def;

/// What the upstream is told when its question is refused as invalid, on every path a
/// question takes (an ordinary call's round, a task).
pub const INVALID_QUESTION: &str =
    "mrtr-gateway refused this request: it is not a valid MCP 2026-07-28 question";

/// What the check of one question found.
#[derive(Debug, Default)]
pub struct CheckedQuestion {
    /// The params to use instead of the upstream's, when they were repaired.
    pub repaired: Option<Value>,
    pub repairs: Vec<Repair>,
    /// Set when the question cannot be asked; the detail is for the log.
    pub refused: Option<(Refusal, String)>,
    /// Why it asks for a secret, once per reason, with the property (or `url`) that did.
    pub sensitive: Vec<(Sensitive, String)>,
}

/// Checks one pushed request of `method`; roots and unknown methods have nothing to check
/// (the translation refuses what it cannot embed).
pub fn check(method: &str, params: Option<&Value>) -> CheckedQuestion {
    let mut checked = CheckedQuestion::default();
    let Some(Value::Object(map)) = params else { return checked };
    match method {
        crate::protocol::methods::ELICITATION_CREATE => elicitation(map, &mut checked),
        crate::protocol::methods::SAMPLING_CREATE_MESSAGE => {
            held(Def::CreateMessage, &Value::Object(map.clone()), &mut checked)
        }
        _ => {}
    }
    checked
}

fn elicitation(params: &Map<String, Value>, checked: &mut CheckedQuestion) {
    match params.get("mode").and_then(Value::as_str) {
        Some("url") => {
            if let Some(url) = params.get("url").and_then(Value::as_str) {
                checked.sensitive.extend(sensitive::url(url).map(|r| (r, "url".to_owned())));
            }
            held(Def::ElicitUrl, &Value::Object(params.clone()), checked);
        }
        None | Some("form") => form(params, checked),
        // An unknown mode: the translation refuses it, with its own message.
        Some(_) => {}
    }
}

fn form(params: &Map<String, Value>, checked: &mut CheckedQuestion) {
    let mut params = params.clone();
    if let Some(Value::Object(schema)) = params.get_mut("requestedSchema") {
        if !schema.contains_key("type") {
            schema.insert("type".to_owned(), Value::String("object".to_owned()));
            checked.repairs.push(Repair::QuestionTypeAdded);
        }
    }
    let found = sensitive::form(params.get("requestedSchema"));
    let mut shown = Value::Object(params.clone());
    for (reason, property) in &found {
        if *reason == Sensitive::PasswordFormat {
            if let Some(p) = shown.pointer_mut(&format!("/requestedSchema/properties/{}", escape(property))) {
                p.as_object_mut().map(|p| p.remove("format"));
            }
        }
    }
    for (reason, property) in found {
        if !checked.sensitive.iter().any(|(r, _)| *r == reason) {
            checked.sensitive.push((reason, property));
        }
    }
    held(Def::ElicitForm, &shown, checked);
    if !checked.repairs.is_empty() {
        checked.repaired = Some(Value::Object(params));
    }
}

/// Refuses the question unless `params` hold under `def`.
fn held(def: Def, params: &Value, checked: &mut CheckedQuestion) {
    let Some(first) = def.violations(params).and_then(|v| v.into_iter().next()) else { return };
    let why = Refused::new(Refusal::QuestionInvalid, format!("{}: {}", first.path, first.message));
    checked.refused = Some((why.reason, why.detail));
    checked.repairs.clear();
    checked.repaired = None;
}

/// A property name as a JSON pointer token.
fn escape(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_valid_form_passes_untouched() {
        let params = json!({"message": "Name?", "requestedSchema": {"type": "object",
            "properties": {"name": {"type": "string"}}}, "_meta": {"x": 1}});
        let checked = check("elicitation/create", Some(&params));
        assert!(checked.refused.is_none() && checked.repaired.is_none() && checked.sensitive.is_empty());
    }

    #[test]
    fn a_missing_type_is_added_and_a_nested_form_refused() {
        let params =
            json!({"message": "Name?", "requestedSchema": {"properties": {"name": {"type": "string"}}}});
        let checked = check("elicitation/create", Some(&params));
        assert_eq!(checked.repairs, [Repair::QuestionTypeAdded]);
        assert_eq!(checked.repaired.as_ref().map(|p| &p["requestedSchema"]["type"]), Some(&json!("object")));
        let nested = json!({"message": "m", "requestedSchema": {"type": "object",
            "properties": {"address": {"type": "object", "properties": {}}}}});
        let checked = check("elicitation/create", Some(&nested));
        assert_eq!(checked.refused.as_ref().map(|r| r.0), Some(Refusal::QuestionInvalid));
        assert!(checked.repaired.is_none());
        let no_messages = json!({"maxTokens": 5});
        let checked = check("sampling/createMessage", Some(&no_messages));
        assert_eq!(checked.refused.as_ref().map(|r| r.0), Some(Refusal::QuestionInvalid));
    }

    #[test]
    fn a_password_format_is_sensitive_not_invalid() {
        let params = json!({"message": "Log in", "requestedSchema": {"type": "object",
            "properties": {"pw": {"type": "string", "format": "password"}, "card_number": {"type": "string"}}}});
        let checked = check("elicitation/create", Some(&params));
        assert!(checked.refused.is_none(), "{:?}", checked.refused);
        assert_eq!(
            checked.sensitive,
            [
                (Sensitive::PaymentField, "card_number".to_owned()),
                (Sensitive::PasswordFormat, "pw".to_owned())
            ]
        );
    }

    #[test]
    fn url_questions_are_looked_at() {
        let params =
            json!({"mode": "url", "message": "Go", "url": "javascript:alert(1)", "elicitationId": "e"});
        let checked = check("elicitation/create", Some(&params));
        assert_eq!(checked.sensitive, [(Sensitive::ScriptUrl, "url".to_owned())]);
        assert!(checked.refused.is_none());
        assert!(check("roots/list", None).sensitive.is_empty());
    }
}
