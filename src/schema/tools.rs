//! One legacy tool definition made 2026-07-28, or refused: the targeted repairs first (a
//! missing `type`, the removed `execution`), then its schemas checked as JSON Schema (the
//! `inputSchema` against its dialect's meta-schema, the `outputSchema` compiled, since results
//! are checked against it), then the whole definition held against the 2026-07-28 `Tool`.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::items::{conform, Refused};
use super::name;
use super::output::{Compiled, OutputSchema};
use super::reason::{Refusal, Repair};
use super::spec::Def;

/// What the check of one listed tool found.
#[derive(Debug, Default)]
pub struct CheckedTool {
    /// The upstream's name; `None` when it has no usable one.
    pub name: Option<String>,
    pub repairs: Vec<Repair>,
    /// Set when the tool is left out of the list.
    pub refused: Option<Refusal>,
    /// Why, for the log (may quote what the upstream sent).
    pub detail: String,
    /// Its compiled `outputSchema`, which its results are checked against.
    pub output: Option<Arc<OutputSchema>>,
    /// Its name must be encoded before a 2026-07-28 client sees it (see [`super::name`]).
    pub encode_name: bool,
}

/// Checks and repairs `tool` in place; with `tasks`, its `execution` is kept (see
/// [`super::Checker::tools`]).
pub(crate) fn check(tool: &mut Value, compiled: &Compiled, tasks: bool) -> CheckedTool {
    let mut checked = CheckedTool::default();
    let Some(object) = tool.as_object_mut() else {
        return refused(checked, Refused::new(Refusal::NameInvalid, "the tool is not a JSON object"));
    };
    match object.get("name").and_then(Value::as_str) {
        Some(n) if !n.is_empty() => checked.name = Some(n.to_owned()),
        _ => return refused(checked, Refused::new(Refusal::NameInvalid, "no non-empty string name")),
    }
    let execution = if tasks { object.remove("execution") } else { None };
    if let Err(why) = repair(object, &mut checked.repairs) {
        return refused(checked, why);
    }
    match output(object, compiled, &mut checked.repairs) {
        Ok(schema) => checked.output = schema,
        Err(why) => return refused(checked, why),
    }
    if let Err(why) = conform(Def::Tool, object, &mut checked.repairs) {
        return refused(checked, why);
    }
    if let Some(execution) = execution {
        object.insert("execution".to_owned(), execution);
    }
    checked.encode_name = checked.name.as_deref().is_some_and(|n| !name::travels(n));
    checked
}

fn refused(mut checked: CheckedTool, why: Refused) -> CheckedTool {
    checked.repairs.clear();
    checked.refused = Some(why.reason);
    checked.detail = why.detail;
    checked
}

/// The removed `execution` field, and the `inputSchema`'s `type`.
fn repair(tool: &mut Map<String, Value>, repairs: &mut Vec<Repair>) -> Result<(), Refused> {
    if let Some(execution) = tool.remove("execution") {
        if execution.get("taskSupport").and_then(Value::as_str) == Some("required") {
            return Err(Refused::new(Refusal::TaskRequired, "execution.taskSupport is \"required\""));
        }
        repairs.push(Repair::ObsoleteFieldDropped);
    }
    let schema = tool.entry("inputSchema").or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(schema) = schema else {
        return Err(Refused::new(Refusal::InputSchemaInvalid, "inputSchema is not a JSON object"));
    };
    match schema.get("type") {
        None => {
            schema.insert("type".to_owned(), Value::String("object".to_owned()));
            repairs.push(Repair::InputTypeAdded);
        }
        Some(Value::String(t)) if t == "object" => {}
        Some(other) => {
            return Err(Refused::new(Refusal::InputSchemaNotObject, format!("inputSchema.type is {other}")))
        }
    }
    let schema = Value::Object(std::mem::take(schema));
    let meta = jsonschema::meta::validate(&schema).map_err(|e| e.to_string());
    if let (Some(Value::Object(slot)), Value::Object(back)) = (tool.get_mut("inputSchema"), schema) {
        *slot = back;
    }
    meta.map_err(|e| Refused::new(Refusal::InputSchemaInvalid, format!("inputSchema: {e}")))
}

/// The `outputSchema`'s `type`, and its compiled validator.
fn output(
    tool: &mut Map<String, Value>,
    compiled: &Compiled,
    repairs: &mut Vec<Repair>,
) -> Result<Option<Arc<OutputSchema>>, Refused> {
    let Some(schema) = tool.get_mut("outputSchema") else { return Ok(None) };
    let Value::Object(object) = schema else {
        return Err(Refused::new(Refusal::OutputSchemaInvalid, "outputSchema is not a JSON object"));
    };
    if !object.contains_key("type") {
        object.insert("type".to_owned(), Value::String("object".to_owned()));
        repairs.push(Repair::OutputTypeAdded);
    }
    compiled
        .get(schema)
        .map(Some)
        .map_err(|e| Refused::new(Refusal::OutputSchemaInvalid, format!("outputSchema: {e}")))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn run(mut tool: Value) -> (Value, CheckedTool) {
        let checked = check(&mut tool, &Compiled::default(), false);
        (tool, checked)
    }

    #[test]
    fn with_tasks_execution_is_kept_and_task_tools_listed() {
        let mut tool = json!({"name": "research", "inputSchema": {},
            "execution": {"taskSupport": "required"}});
        let checked = check(&mut tool, &Compiled::default(), true);
        assert_eq!((checked.refused, checked.repairs.as_slice()), (None, &[Repair::InputTypeAdded][..]));
        assert_eq!(tool["execution"], json!({"taskSupport": "required"}));
        let (tool, checked) = run(json!({"name": "research", "inputSchema": {"type": "object"},
            "execution": {"taskSupport": "required"}}));
        assert_eq!(checked.refused, Some(Refusal::TaskRequired));
        assert!(tool.get("execution").is_none());
    }

    #[test]
    fn a_missing_type_is_added_and_a_draft_7_schema_kept() {
        let (tool, checked) = run(json!({"name": "search", "inputSchema": {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "properties": {"q": {"type": "string"}}}}));
        assert_eq!(checked.refused, None, "{}", checked.detail);
        assert_eq!(checked.repairs, [Repair::InputTypeAdded]);
        assert_eq!(tool["inputSchema"]["type"], "object");
        assert_eq!(tool["inputSchema"]["$schema"], "http://json-schema.org/draft-07/schema#");
        let (tool, checked) = run(json!({"name": "bare"}));
        assert_eq!(
            (checked.repairs.as_slice(), &tool["inputSchema"]),
            (&[Repair::InputTypeAdded][..], &json!({"type": "object"}))
        );
    }

    #[test]
    fn a_valid_tool_is_untouched() {
        let original = json!({"name": "ok", "inputSchema": {"type": "object"},
            "outputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}}, "title": "Ok"});
        let (tool, checked) = run(original.clone());
        assert_eq!(tool, original);
        assert!(checked.repairs.is_empty() && checked.refused.is_none() && !checked.encode_name);
        assert!(checked.output.is_some());
    }

    #[test]
    fn unrepairable_tools_are_refused_with_their_reason() {
        let cases = [
            (json!({"inputSchema": {"type": "object"}}), Refusal::NameInvalid),
            (json!({"name": "", "inputSchema": {"type": "object"}}), Refusal::NameInvalid),
            (json!("a tool"), Refusal::NameInvalid),
            (json!({"name": "s", "inputSchema": "object"}), Refusal::InputSchemaInvalid),
            (
                json!({"name": "s", "inputSchema": {"type": "object", "properties": {"x": {"type": 12}}}}),
                Refusal::InputSchemaInvalid,
            ),
            (json!({"name": "s", "inputSchema": {"type": "string"}}), Refusal::InputSchemaNotObject),
            (
                json!({"name": "s", "inputSchema": {"type": ["object", "null"]}}),
                Refusal::InputSchemaNotObject,
            ),
            (
                json!({"name": "s", "inputSchema": {}, "outputSchema": {"$ref": "https://x.example/s.json"}}),
                Refusal::OutputSchemaInvalid,
            ),
            (json!({"name": "s", "inputSchema": {}, "outputSchema": []}), Refusal::OutputSchemaInvalid),
            (
                json!({"name": "s", "inputSchema": {}, "execution": {"taskSupport": "required"}}),
                Refusal::TaskRequired,
            ),
            (
                json!({"name": "s", "inputSchema": {"$schema": "https://custom.example/meta", "type": "object"}}),
                Refusal::InputSchemaInvalid,
            ),
        ];
        for (tool, reason) in cases {
            let (_, checked) = run(tool.clone());
            assert_eq!(checked.refused, Some(reason), "{tool}: {}", checked.detail);
            assert!(checked.repairs.is_empty(), "{tool}");
        }
    }

    #[test]
    fn removed_and_invalid_fields_are_dropped() {
        let (tool, checked) = run(json!({"name": "t", "inputSchema": {"type": "object"},
            "execution": {"taskSupport": "optional"}, "annotations": {"readOnlyHint": "yes"},
            "outputSchema": {"properties": {"n": {"type": "integer"}}}}));
        assert_eq!(checked.refused, None, "{}", checked.detail);
        assert_eq!(
            checked.repairs,
            [Repair::ObsoleteFieldDropped, Repair::OutputTypeAdded, Repair::InvalidFieldDropped]
        );
        assert!(tool.get("execution").is_none() && tool.get("annotations").is_none());
        assert_eq!(tool["outputSchema"]["type"], "object");
    }

    #[test]
    fn names_that_cannot_travel_are_flagged() {
        let (_, checked) = run(json!({"name": "search files", "inputSchema": {"type": "object"}}));
        assert!(checked.encode_name);
        assert_eq!(checked.name.as_deref(), Some("search files"));
    }
}
