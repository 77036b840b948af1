//! The parts of MCP 2026-07-28 the gateway holds relayed messages to, as JSON Schema:
//! `definitions.json` beside this file is the project's own statement of them, written from the
//! specification's types, one definition per type it expresses (each names it in its
//! `$comment`). It says only what the checks and repairs of this module rely on: required
//! fields, their types, a tool's `inputSchema` with `"type": "object"`, the flat primitive
//! fields of an elicitation form, the fields of a URL elicitation and of a sampling request.
//! Like the specification, every object allows fields it does not name, so a legacy field the
//! translation drops later never counts against a message.
//!
//! Each definition is compiled once, on first use, by the `jsonschema` crate, which does the
//! checking; nothing here interprets the definitions by hand.

use std::sync::OnceLock;

use jsonschema::Validator;
use serde_json::{json, Value};

/// The definitions, as one JSON Schema 2020-12 document.
const SCHEMA: &str = include_str!("definitions.json");

/// The definitions the gateway checks relayed messages against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Def {
    Tool,
    Prompt,
    Resource,
    ResourceTemplate,
    ElicitForm,
    ElicitUrl,
    CreateMessage,
}

/// Where a value breaks its definition: the JSON pointer of the offending part (`""` for the
/// value itself), the keyword that failed, and the validator's message (which may quote the
/// value: for the log only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Violation {
    pub path: String,
    pub keyword: String,
    pub message: String,
}

// === impl Def ===

impl Def {
    const ALL: [Self; 7] = [
        Self::Tool,
        Self::Prompt,
        Self::Resource,
        Self::ResourceTemplate,
        Self::ElicitForm,
        Self::ElicitUrl,
        Self::CreateMessage,
    ];

    fn name(self) -> &'static str {
        match self {
            Self::Tool => "Tool",
            Self::Prompt => "Prompt",
            Self::Resource => "Resource",
            Self::ResourceTemplate => "ResourceTemplate",
            Self::ElicitForm => "ElicitRequestFormParams",
            Self::ElicitUrl => "ElicitRequestURLParams",
            Self::CreateMessage => "CreateMessageRequestParams",
        }
    }

    /// Every way `value` breaks this definition (empty when it holds); `None` if the
    /// definition could not be compiled, which a test rules out.
    pub(crate) fn violations(self, value: &Value) -> Option<Vec<Violation>> {
        let validator = validator(self)?;
        Some(
            validator
                .iter_errors(value)
                .map(|e| Violation {
                    path: e.instance_path().as_str().to_owned(),
                    keyword: e.kind().keyword().to_owned(),
                    message: e.to_string(),
                })
                .collect(),
        )
    }

    /// Whether `value` holds (a definition that did not compile checks nothing).
    #[cfg(test)]
    fn holds(self, value: &Value) -> bool {
        validator(self).is_none_or(|v| v.is_valid(value))
    }
}

/// The compiled validator of `def`, made once.
fn validator(def: Def) -> Option<&'static Validator> {
    static COMPILED: [OnceLock<Option<Validator>>; Def::ALL.len()] = [const { OnceLock::new() }; 7];
    COMPILED[def as usize].get_or_init(|| compile(def)).as_ref()
}

fn compile(def: Def) -> Option<Validator> {
    let document = document()?;
    let root = json!({
        "$schema": document.get("$schema"),
        "$defs": document.get("$defs"),
        "$ref": format!("#/$defs/{}", def.name()),
    });
    match jsonschema::validator_for(&root) {
        Ok(v) => Some(v),
        Err(e) => {
            tracing::error!(definition = def.name(), error = %e, "a 2026-07-28 definition did not compile: not checked");
            None
        }
    }
}

fn document() -> Option<&'static Value> {
    static DOCUMENT: OnceLock<Option<Value>> = OnceLock::new();
    DOCUMENT.get_or_init(|| serde_json::from_str(SCHEMA).ok()).as_ref()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The top-level fields `value` breaks under `def` (`""`: the value itself).
    fn broken(def: Def, value: &Value) -> Vec<String> {
        let mut fields: Vec<String> = def
            .violations(value)
            .unwrap()
            .into_iter()
            .map(|v| v.path.split('/').nth(1).unwrap_or_default().to_owned())
            .collect();
        fields.dedup();
        fields
    }

    #[test]
    fn every_definition_compiles() {
        for def in Def::ALL {
            assert!(validator(def).is_some(), "{def:?}");
        }
    }

    #[test]
    fn every_definition_is_used_and_names_what_it_expresses() {
        let document = document().unwrap();
        let text = document.to_string();
        for (name, definition) in document["$defs"].as_object().unwrap() {
            let comment = definition["$comment"].as_str().unwrap_or_default();
            assert!(!comment.is_empty(), "{name} has no $comment");
            let used =
                text.contains(&format!("\"#/$defs/{name}\"")) || Def::ALL.iter().any(|d| d.name() == name);
            assert!(used, "{name} is not used");
        }
    }

    #[test]
    fn the_schema_is_the_2026_07_28_one() {
        let tool = json!({"name": "t", "inputSchema": {"type": "object"}});
        assert!(Def::Tool.holds(&tool));
        let untyped = json!({"name": "t", "inputSchema": {"properties": {}}});
        let found = Def::Tool.violations(&untyped).unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!((found[0].path.as_str(), found[0].keyword.as_str()), ("/inputSchema", "required"));
        // 2026-07-28 lets an outputSchema be any JSON Schema, an array one included.
        let array_out =
            json!({"name": "t", "inputSchema": {"type": "object"}, "outputSchema": {"type": "array"}});
        assert!(Def::Tool.holds(&array_out));
        // And an URL elicitation no longer needs an elicitationId.
        assert!(Def::ElicitUrl.holds(&json!({"mode": "url", "message": "m", "url": "https://a.example"})));
        assert!(!Def::ElicitForm.holds(&json!({"message": "m", "requestedSchema": {"properties": {}}})));
    }

    #[test]
    fn list_items_are_blamed_on_the_field_that_breaks() {
        let tool = json!({"name": "t", "inputSchema": {"type": "string"}, "title": 1,
            "annotations": {"readOnlyHint": "yes"}, "icons": [{"mimeType": "image/png"}], "x-extra": 1});
        assert_eq!(broken(Def::Tool, &tool), ["annotations", "icons", "inputSchema", "title"]);
        assert_eq!(broken(Def::Tool, &json!({"inputSchema": {"type": "object"}})), [""]);
        let resource = json!({"uri": "file:///a", "name": "a", "size": 1.5,
            "annotations": {"audience": ["everyone"], "priority": 2}});
        assert_eq!(broken(Def::Resource, &resource), ["annotations", "size"]);
        assert_eq!(broken(Def::ResourceTemplate, &json!({"name": "t", "uriTemplate": 3})), ["uriTemplate"]);
        let prompt =
            json!({"name": "p", "arguments": [{"name": "a", "required": "yes"}, {"title": "no name"}]});
        assert_eq!(broken(Def::Prompt, &prompt), ["arguments"]);
        assert!(Def::Prompt.holds(&json!({"name": "p", "arguments": [{"name": "a", "required": true}]})));
    }

    #[test]
    fn form_fields_are_flat_primitives_with_the_listed_formats() {
        let form = |field: Value| json!({"message": "m", "requestedSchema": {"type": "object", "properties": {"f": field}}});
        let allowed = [
            json!({"type": "string", "format": "email", "minLength": 1}),
            json!({"type": "integer", "minimum": 0, "default": 3}),
            json!({"type": "boolean", "default": false}),
            json!({"type": "string", "enum": ["a", "b"], "enumNames": ["A", "B"]}),
            json!({"type": "string", "oneOf": [{"const": "a", "title": "A"}]}),
            json!({"type": "array", "items": {"type": "string", "enum": ["a"]}, "default": ["a"]}),
            json!({"type": "array", "items": {"anyOf": [{"const": "a", "title": "A"}]}}),
        ];
        for field in allowed {
            assert!(Def::ElicitForm.holds(&form(field.clone())), "{field}");
        }
        let refused = [
            json!({"type": "string", "format": "password"}),
            json!({"type": "object", "properties": {}}),
            json!({"type": "array", "items": {"type": "string"}}),
            json!({"type": "array", "items": {"anyOf": [{"const": "a"}]}}),
            json!({"type": "number", "default": "3"}),
            json!({"enum": ["a"]}),
        ];
        for field in refused {
            assert!(!Def::ElicitForm.holds(&form(field.clone())), "{field}");
        }
        assert!(!Def::ElicitForm.holds(&json!({"mode": "url", "message": "m",
            "requestedSchema": {"type": "object", "properties": {}}})));
    }

    #[test]
    fn url_questions_need_their_mode_message_and_url() {
        let url = json!({"mode": "url", "message": "m", "url": "https://a.example"});
        for field in ["mode", "message", "url"] {
            let mut missing = url.clone();
            missing.as_object_mut().unwrap().remove(field);
            assert!(!Def::ElicitUrl.holds(&missing), "{field}");
        }
        assert!(!Def::ElicitUrl.holds(&json!({"mode": "url", "message": "m", "url": 5})));
    }

    #[test]
    fn sampling_requests_hold_their_messages_to_the_content_blocks() {
        let ask =
            |content: Value| json!({"maxTokens": 10, "messages": [{"role": "user", "content": content}]});
        let allowed = [
            json!({"type": "text", "text": "hi"}),
            json!([{"type": "image", "data": "AA==", "mimeType": "image/png"}, {"type": "audio", "data": "AA==", "mimeType": "audio/wav"}]),
            json!({"type": "tool_use", "id": "1", "name": "t", "input": {}}),
            json!({"type": "tool_result", "toolUseId": "1", "content": [{"type": "text", "text": "x"},
                {"type": "resource_link", "uri": "file:///a", "name": "a"},
                {"type": "resource", "resource": {"uri": "file:///a", "blob": "AA=="}}]}),
        ];
        for content in allowed {
            assert!(Def::CreateMessage.holds(&ask(content.clone())), "{content}");
        }
        let refused = [
            json!("hi"),
            json!({"type": "video", "data": "AA==", "mimeType": "video/mp4"}),
            json!({"type": "image", "data": "AA=="}),
            json!({"type": "tool_result", "toolUseId": "1", "content": [{"type": "resource_link", "uri": "file:///a"}]}),
            json!({"type": "tool_result", "toolUseId": "1", "content": [{"type": "resource", "resource": {"uri": "file:///a"}}]}),
        ];
        for content in refused {
            assert!(!Def::CreateMessage.holds(&ask(content.clone())), "{content}");
        }
        assert!(!Def::CreateMessage.holds(&json!({"maxTokens": 1, "messages": [{"role": "system", "content": {"type": "text", "text": "x"}}]})));
        assert!(!Def::CreateMessage
            .holds(&json!({"maxTokens": 1, "messages": [], "modelPreferences": {"costPriority": 3}})));
        assert!(!Def::CreateMessage.holds(&json!({"maxTokens": 1, "messages": [], "tools": [{"name": "t"}]})));
    }
}
