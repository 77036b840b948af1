//! The 2026-07-28 schema itself: `mcp-2026-07-28.json` beside this file is the specification's
//! `schema/2026-07-28/schema.json`, unchanged (Apache-2.0, like this project), and each
//! definition the gateway checks against is compiled from it once, on first use, with the
//! `jsonschema` crate. Nothing here is a hand-written copy of the schema's rules.

use std::sync::OnceLock;

use jsonschema::Validator;
use serde_json::{json, Value};

/// The specification's JSON Schema of the 2026-07-28 revision.
const SCHEMA: &str = include_str!("mcp-2026-07-28.json");

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
    /// definition could not be compiled, which a test rules out for the vendored file.
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
            tracing::error!(definition = def.name(), error = %e, "the 2026-07-28 schema did not compile: not checked");
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

    #[test]
    fn every_definition_compiles_from_the_vendored_schema() {
        for def in Def::ALL {
            assert!(validator(def).is_some(), "{def:?}");
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
}
