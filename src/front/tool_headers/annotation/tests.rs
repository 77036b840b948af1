use serde_json::json;

use super::*;

fn names(schema: Value) -> Vec<(String, Vec<String>)> {
    header_params(&schema)
        .unwrap()
        .into_iter()
        .map(|p| (p.header.as_str().to_owned(), p.path.iter().map(|s| s.to_string()).collect()))
        .collect()
}

fn error(schema: Value) -> AnnotationError {
    header_params(&schema).unwrap_err()
}

#[test]
fn plain_and_nested_properties_are_mirrored() {
    let schema = json!({"type": "object", "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "query": {"type": "string"},
        "target": {"type": "object", "properties": {
            "shard": {"type": "integer", "x-mcp-header": "Shard"},
            "dry": {"type": "boolean", "x-mcp-header": "Dry-Run"}}}}});
    let mut got = names(schema);
    got.sort();
    assert_eq!(
        got,
        vec![
            ("mcp-param-dry-run".to_owned(), vec!["target".to_owned(), "dry".to_owned()]),
            ("mcp-param-region".to_owned(), vec!["region".to_owned()]),
            ("mcp-param-shard".to_owned(), vec!["target".to_owned(), "shard".to_owned()]),
        ]
    );
}

#[test]
fn schemas_without_annotations_have_none() {
    assert!(names(json!({"type": "object", "properties": {"a": {"type": "string"}}})).is_empty());
    assert!(names(json!({"type": "object"})).is_empty());
}

#[test]
fn data_keywords_and_property_names_are_not_annotations() {
    let schema = json!({"type": "object", "properties": {
        "x-mcp-header": {"type": "string"},
        "mode": {"type": "string", "default": {"x-mcp-header": "Nope"}, "enum": [{"x-mcp-header": "No"}]}}});
    assert!(names(schema).is_empty());
}

#[test]
fn bad_names_are_invalid() {
    let bad = |name: Value| {
        error(json!({"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": name}}}))
    };
    assert!(matches!(bad(json!("")), AnnotationError::Empty { .. }));
    assert!(matches!(bad(json!("Has Space")), AnnotationError::NotAToken { .. }));
    assert!(matches!(bad(json!("Line\r\nBreak")), AnnotationError::NotAToken { .. }));
    assert!(matches!(bad(json!("Région")), AnnotationError::NotAToken { .. }));
    assert!(matches!(bad(json!("a:b")), AnnotationError::NotAToken { .. }));
    assert!(matches!(bad(json!(7)), AnnotationError::NotAString { .. }));
}

#[test]
fn names_repeated_case_insensitively_are_invalid() {
    let e = error(json!({"type": "object", "properties": {
        "a": {"type": "string", "x-mcp-header": "Region"},
        "b": {"type": "string", "x-mcp-header": "REGION"}}}));
    assert!(matches!(e, AnnotationError::Duplicate { .. }), "{e}");
}

#[test]
fn only_string_integer_and_boolean_can_be_mirrored() {
    for ty in [
        json!("number"),
        json!("object"),
        json!("array"),
        json!("null"),
        json!(["string", "integer"]),
        json!(7),
    ] {
        let e = error(json!({"type": "object", "properties": {"a": {"type": ty, "x-mcp-header": "A"}}}));
        assert!(matches!(e, AnnotationError::NotPrimitive { .. }), "{e}");
    }
    for keyword in ["anyOf", "oneOf"] {
        let union = json!({"type": "object", "properties": {"a": {keyword: [{"type": "number"}, {"type": "null"}], "x-mcp-header": "A"}}});
        let e = error(union);
        assert!(matches!(e, AnnotationError::NotPrimitive { .. }), "{e}");
        assert!(e.to_string().contains("is on a property of type a union;"), "{keyword}: {e}");
    }
    let e = error(json!({"type": "object", "properties": {"a": {"x-mcp-header": "A"}}}));
    assert_eq!(e.to_string(), "x-mcp-header \"A\" at /properties/a is on a property of type none; only string, integer and boolean can be mirrored");
}

#[test]
fn an_optional_primitive_can_be_mirrored() {
    let schema = json!({"type": "object", "properties": {
        "a": {"type": ["integer", "null"], "x-mcp-header": "A"},
        "b": {"anyOf": [{"type": "string"}, {"type": "null"}], "x-mcp-header": "B", "default": null},
        "c": {"oneOf": [{"type": "boolean"}], "x-mcp-header": "C"}}});
    assert_eq!(names(schema).len(), 3);
}

#[test]
fn annotations_off_the_properties_chain_are_invalid() {
    let off_chain = [
        json!({"type": "object", "x-mcp-header": "Root"}),
        json!({"type": "object", "properties": {"list": {"type": "array", "items": {"type": "string", "x-mcp-header": "I"}}}}),
        json!({"type": "object", "anyOf": [{"properties": {"a": {"type": "string", "x-mcp-header": "A"}}}]}),
        json!({"type": "object", "if": {"properties": {"a": {"type": "string", "x-mcp-header": "A"}}}}),
        json!({"type": "object", "$defs": {"d": {"type": "string", "x-mcp-header": "D"}}}),
        json!({"type": "object", "properties": {"o": {"allOf": [{"properties": {"b": {"type": "string", "x-mcp-header": "B"}}}]}}}),
    ];
    for schema in off_chain {
        let e = error(schema.clone());
        assert!(matches!(e, AnnotationError::Unreachable { .. }), "{schema}: {e}");
    }
}

#[test]
fn the_location_is_a_json_pointer() {
    let e = error(
        json!({"type": "object", "properties": {"a/b": {"type": "array", "items": {"x-mcp-header": "I"}}}}),
    );
    assert_eq!(e, AnnotationError::Unreachable { at: "/properties/a~1b/items".into() });
}

/// The entries of `$defs` and its kin are schemas by name: a name is never a keyword, and a
/// name's location is escaped like any other pointer step.
#[test]
fn schema_map_entries_are_named_schemas() {
    let defs = json!({"type": "object", "properties": {"a": {"type": "string"}},
        "$defs": {"x-mcp-header": {"type": "string"}, "enum": {"type": "string"}}});
    assert!(names(defs).is_empty());
    let hidden =
        json!({"type": "object", "patternProperties": {"enum": {"type": "string", "x-mcp-header": "E"}}});
    assert_eq!(error(hidden), AnnotationError::Unreachable { at: "/patternProperties/enum".into() });
    let slashed = json!({"type": "object", "definitions": {"a/b": {"type": "string", "x-mcp-header": "D"}}});
    assert_eq!(error(slashed), AnnotationError::Unreachable { at: "/definitions/a~1b".into() });
}
