//! `server/discover`, synthesised from the legacy server's `initialize` result
//! (server/discover.mdx): the server's capabilities without what the gateway does not bridge,
//! its instructions, `serverInfo` in result `_meta`, the versions the *front* supports, and the
//! configured cache hints.

use serde_json::{json, Map, Value};

use crate::protocol::{meta, FRONT_SUPPORTED_VERSIONS};
use crate::upstream::InitializeResult;

/// Builds the `DiscoverResult` object.
/// The list-change and subscribe flags the upstream declared are kept when `listens` (the
/// gateway bridges `subscriptions/listen`).
pub(super) fn discover_result(init: &InitializeResult, ttl_ms: u64, scope: &str, listens: bool) -> Value {
    let mut result = Map::new();
    result.insert("resultType".into(), json!("complete"));
    result.insert("supportedVersions".into(), json!(FRONT_SUPPORTED_VERSIONS));
    result.insert("capabilities".into(), modern_capabilities(&init.capabilities, listens));
    if let Some(instructions) = &init.instructions {
        result.insert("instructions".into(), json!(instructions));
    }
    result.insert("ttlMs".into(), json!(ttl_ms));
    result.insert("cacheScope".into(), json!(scope));
    if !init.server_info.is_null() {
        result.insert("_meta".into(), json!({ meta::SERVER_INFO: init.server_info }));
    }
    Value::Object(result)
}

/// Declares the tasks extension (`capabilities.extensions`), which the gateway serves for the
/// legacy server's task tools.
pub(super) fn advertise_tasks(result: &mut Value) {
    let Some(caps) = result.get_mut("capabilities").and_then(Value::as_object_mut) else { return };
    let extensions = caps.entry("extensions").or_insert_with(|| json!({}));
    if let Some(extensions) = extensions.as_object_mut() {
        extensions.insert(crate::tasks::EXTENSION.to_owned(), json!({}));
    }
}

/// Keeps the capabilities a 2026-07-28 client can use through the gateway. The list-change and
/// resource-subscription flags the upstream declared stay when `subscriptions/listen` is
/// bridged (`listens`), and are dropped otherwise; `logging` is dropped because log
/// notifications are relayed per request only, `tasks` because legacy tasks are not 2026 tasks.
fn modern_capabilities(legacy: &Value, listens: bool) -> Value {
    let Value::Object(caps) = legacy else { return json!({}) };
    let mut out = Map::new();
    let dropped: &[&str] = if listens { &[] } else { &["listChanged", "subscribe"] };
    for (name, value) in caps {
        match name.as_str() {
            "tools" | "prompts" | "resources" => {
                out.insert(name.clone(), without(value, dropped));
            }
            "completions" | "experimental" | "extensions" => {
                out.insert(name.clone(), value.clone());
            }
            _ => {}
        }
    }
    Value::Object(out)
}

fn without(value: &Value, fields: &[&str]) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| !fields.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        _ => json!({}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tasks_extension_is_advertised_beside_the_servers_own() {
        let mut result = json!({"capabilities": {"tools": {}, "extensions": {"x/y": {}}}});
        advertise_tasks(&mut result);
        assert_eq!(result["capabilities"]["extensions"], json!({"x/y": {}, crate::tasks::EXTENSION: {}}));
        assert!(result["capabilities"].get("tasks").is_none(), "no legacy slot");
    }

    fn init(server_info: Value, instructions: Option<&str>) -> InitializeResult {
        InitializeResult {
            protocol_version: "2025-11-25".into(),
            capabilities: json!({"tools": {"listChanged": true}, "logging": {}}),
            server_info,
            instructions: instructions.map(str::to_owned),
            raw: serde_json::value::to_raw_value(&json!({})).unwrap(),
        }
    }

    #[test]
    fn the_result_carries_the_fronts_versions_the_cache_hints_and_what_the_server_said() {
        let info = json!({"name": "legacy", "version": "1.2.3"});
        let result = discover_result(&init(info.clone(), Some("Use the tools.")), 60_000, "public", false);
        assert_eq!(
            result,
            json!({
                "resultType": "complete",
                "supportedVersions": FRONT_SUPPORTED_VERSIONS,
                "capabilities": {"tools": {}},
                "instructions": "Use the tools.",
                "ttlMs": 60_000,
                "cacheScope": "public",
                "_meta": {meta::SERVER_INFO: info},
            })
        );
        let bare = discover_result(&init(Value::Null, None), 0, "private", true);
        assert_eq!(
            bare,
            json!({
                "resultType": "complete",
                "supportedVersions": FRONT_SUPPORTED_VERSIONS,
                "capabilities": {"tools": {"listChanged": true}},
                "ttlMs": 0,
                "cacheScope": "private",
            }),
            "no instructions and no serverInfo: neither is invented"
        );
    }

    #[test]
    fn capabilities_are_filtered() {
        let legacy = json!({"tools": {"listChanged": true}, "resources": {"subscribe": true, "listChanged": true},
            "logging": {}, "tasks": {"list": {}}, "completions": {}, "prompts": {}});
        assert_eq!(
            modern_capabilities(&legacy, false),
            json!({"tools": {}, "resources": {}, "completions": {}, "prompts": {}})
        );
    }

    #[test]
    fn listen_flags_stay_as_declared_when_listen_is_bridged() {
        let legacy = json!({"tools": {"listChanged": true}, "resources": {"subscribe": true, "listChanged": false},
            "prompts": {}, "logging": {}});
        assert_eq!(
            modern_capabilities(&legacy, true),
            json!({"tools": {"listChanged": true}, "resources": {"subscribe": true, "listChanged": false}, "prompts": {}})
        );
    }
}
