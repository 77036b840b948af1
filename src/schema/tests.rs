use serde_json::json;

use super::*;

fn raw(v: Value) -> Box<RawValue> {
    RawValue::from_string(v.to_string()).unwrap()
}

fn parsed(page: &Page) -> Value {
    serde_json::from_str(page.text.as_ref().expect("a changed page").get()).unwrap()
}

#[test]
fn a_tools_page_is_repaired_refused_and_cached() {
    let checker = Checker::default();
    let text = raw(json!({"tools": [
        {"name": "untyped", "inputSchema": {"properties": {"q": {"type": "string"}}}},
        {"name": "broken", "inputSchema": {"type": "object", "properties": {"x": {"type": 12}}}},
        {"name": "search files", "inputSchema": {"type": "object"}},
    ], "nextCursor": "2"}));
    let page = checker.tools(&text, false);
    assert!(Arc::ptr_eq(&page, &checker.tools(&text, false)), "the same page is checked once");
    let v = parsed(&page);
    let names: Vec<&str> =
        v["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["untyped", "search files"]);
    assert_eq!(v["nextCursor"], "2");
    assert_eq!(v["tools"][0]["inputSchema"]["type"], "object");
    assert_eq!(page.tools.len(), 3);
    assert_eq!(page.tools[0].repairs, [Repair::InputTypeAdded]);
    assert_eq!(page.tools[1].refused, Some(Refusal::InputSchemaInvalid));
    assert!(page.encode_names && page.tools[2].encode_name);
}

#[test]
fn a_valid_page_is_left_as_it_is() {
    let checker = Checker::default();
    let page =
        checker.tools(&raw(json!({"tools": [{"name": "a", "inputSchema": {"type": "object"}}]})), false);
    assert!(page.text.is_none() && !page.encode_names);
    let prompts = checker.list(ListKind::Prompts, &raw(json!({"prompts": [{"name": "p"}]})));
    assert!(prompts.text.is_none() && prompts.items.is_empty());
}

#[test]
fn prompt_and_resource_lists_are_held_to_their_definitions() {
    let checker = Checker::default();
    let page = checker.list(
        ListKind::Prompts,
        &raw(json!({"prompts": [{"name": "ok"}, {"description": "no name"}, {"name": "bad_args", "arguments": "style"}]})),
    );
    assert_eq!(parsed(&page)["prompts"], json!([{"name": "ok"}, {"name": "bad_args"}]));
    let found: Vec<Finding> = page.items.iter().map(|(f, _)| *f).collect();
    assert_eq!(found, [Finding::Refusal(Refusal::NameInvalid), Finding::Repair(Repair::InvalidFieldDropped)]);
    let page = checker.list(
        ListKind::Resources,
        &raw(json!({"resources": [{"name": "a", "uri": "file:///a"}, {"name": "no uri"}, 7]})),
    );
    assert_eq!(parsed(&page)["resources"], json!([{"name": "a", "uri": "file:///a"}]));
    let found: Vec<Finding> = page.items.iter().map(|(f, _)| *f).collect();
    assert_eq!(found, [Finding::Refusal(Refusal::UriInvalid), Finding::Refusal(Refusal::UriInvalid)]);
}

#[test]
fn names_are_encoded_with_the_upstream_name_as_title() {
    let page = raw(json!({"tools": [
        {"name": "search files", "inputSchema": {"type": "object"}},
        {"name": "get/user", "title": "Get user", "inputSchema": {"type": "object"}},
        {"name": "plain", "inputSchema": {"type": "object"}},
    ]}));
    let (text, encoded) = encode_names(page);
    assert_eq!(encoded, ["search files", "get/user"]);
    let v: Value = serde_json::from_str(text.get()).unwrap();
    assert_eq!(v["tools"][0]["name"], "_.search_20files");
    assert_eq!(v["tools"][0]["title"], "search files");
    assert_eq!(
        (&v["tools"][1]["name"], &v["tools"][1]["title"]),
        (&json!("_.get_2Fuser"), &json!("Get user"))
    );
    assert_eq!(v["tools"][2]["name"], "plain");
    let untouched = raw(json!({"tools": [{"name": "plain"}]}));
    let (same, none) = encode_names(untouched.clone());
    assert_eq!((same.get(), none.len()), (untouched.get(), 0));
}
