//! Relayed methods (`tools/list`, `prompts/list`, `resources/list`, `resources/templates/list`,
//! `completion/complete`): one upstream request on a pooled session, whose server requests are
//! refused upstream (these methods may never answer `input_required`), and a result stamped
//! with `resultType` and cache hints. A `tools/list` result goes through [`modern_tools`] on its
//! way, which also teaches the tool header catalogue; [`list_tools`] reads the whole list for
//! that catalogue alone.

use std::collections::HashSet;

use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::tool_headers::ToolHeaders;
use crate::defaults;
use crate::error::{map_upstream_error, FrontError};
use crate::metrics::Metrics;
use crate::protocol::jsonrpc::Outcome;
use crate::protocol::methods::RelayMethod;
use crate::tasks::Catalogue;
use crate::upstream::{Pool, PoolKey};

/// Runs a relayed method upstream and returns its raw result. `init_caps` is only called when
/// a new upstream session must be initialised.
pub(super) async fn relay(
    pool: &Pool,
    metrics: &Metrics,
    key: PoolKey,
    init_caps: impl FnOnce() -> Value,
    method: RelayMethod,
    params: Value,
    (tools, tasks): (&ToolHeaders, Option<&Catalogue>),
) -> Result<Box<RawValue>, FrontError> {
    let lease = pool.lease_with(key.clone(), init_caps).await?;
    let started = std::time::Instant::now();
    let outcome = match lease.session().request(method.name(), Some(params)).await {
        Ok(o) => {
            metrics.observe_upstream(method.name(), started.elapsed());
            o
        }
        Err(e) => {
            if e.poisons_session() {
                lease.poison();
            }
            return Err(e.into());
        }
    };
    match outcome {
        Outcome::Result(raw) if method == RelayMethod::ToolsList => Ok(modern_tools(raw, &key, tools, tasks)),
        Outcome::Result(raw) => Ok(raw),
        Outcome::Error(e) => Err(FrontError::Upstream(map_upstream_error(e))),
    }
}

/// Lists every page of the upstream's tools (at most [`defaults::TOOL_LIST_FETCH_PAGES`]), for
/// what [`modern_tools`] teaches `tools` on the way; the lists themselves are dropped.
pub(super) async fn list_tools(
    pool: &Pool,
    metrics: &Metrics,
    key: PoolKey,
    init_caps: impl Fn() -> Value,
    catalogues: (&ToolHeaders, Option<&Catalogue>),
) -> Result<(), FrontError> {
    let mut params = json!({});
    for _ in 0..defaults::TOOL_LIST_FETCH_PAGES {
        let page =
            relay(pool, metrics, key.clone(), &init_caps, RelayMethod::ToolsList, params, catalogues).await?;
        match next_cursor(&page) {
            Some(cursor) => params = json!({ "cursor": cursor }),
            None => return Ok(()),
        }
    }
    Ok(())
}

fn next_cursor(page: &RawValue) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Cursor {
        #[serde(rename = "nextCursor")]
        next_cursor: Option<String>,
    }
    serde_json::from_str::<Cursor>(page.get()).ok()?.next_cursor
}

/// A relayed `tools/list` page as a 2026-07-28 client may see it. Each step may leave tools out
/// or strip fields; a page none of them changes is relayed untouched:
/// - tools whose `x-mcp-header` annotations are invalid are left out (learnt by `tools`);
/// - with the task bridge on (`tasks`), every other tool is listed as it is, `execution`
///   included: the gateway serves what it says, and `tasks` learns it;
/// - with it off, tools that can only be called as legacy tasks are left out, and `execution`
///   (the legacy tasks hint) is removed from the others.
fn modern_tools(
    raw: Box<RawValue>,
    key: &PoolKey,
    tools: &ToolHeaders,
    tasks: Option<&Catalogue>,
) -> Box<RawValue> {
    let invalid = tools.learn(key, &raw);
    let legacy_tasks = raw.get().contains("\"execution\"");
    if !legacy_tasks {
        if let Some(tasks) = tasks {
            tasks.mark_listed();
        }
    }
    if invalid.is_empty() && (!legacy_tasks || tasks.is_some()) {
        if let (true, Some(tasks)) = (legacy_tasks, tasks) {
            if let Ok(page) = serde_json::from_str::<Value>(raw.get()) {
                tasks.learn(&page);
            }
        }
        return raw;
    }
    let Ok(mut result) = serde_json::from_str::<Value>(raw.get()) else { return raw };
    if let Some(tasks) = tasks {
        tasks.learn(&result);
        if let Some(Value::Array(list)) = result.get_mut("tools") {
            list.retain(|t| !invalid_annotations(t, &invalid));
        }
        return RawValue::from_string(result.to_string()).unwrap_or(raw);
    }
    if let Some(Value::Array(list)) = result.get_mut("tools") {
        let tasks: Vec<&str> = list.iter().filter(|t| task_only(t)).filter_map(tool_name).collect();
        if !tasks.is_empty() {
            // A 2026-07-28 client cannot call these (the gateway does not bridge legacy tasks).
            tracing::info!(tools = ?tasks, "left tools out of tools/list: they can only be called as legacy tasks");
        }
        list.retain(|t| !invalid_annotations(t, &invalid) && !task_only(t));
        list.iter_mut().filter_map(Value::as_object_mut).for_each(|t| {
            t.remove("execution");
        });
    }
    RawValue::from_string(result.to_string()).unwrap_or(raw)
}

fn invalid_annotations(tool: &Value, invalid: &HashSet<String>) -> bool {
    tool.get("name").and_then(Value::as_str).is_some_and(|n| invalid.contains(n))
}

fn tool_name(tool: &Value) -> Option<&str> {
    tool.get("name").and_then(Value::as_str)
}

fn task_only(tool: &Value) -> bool {
    tool.pointer("/execution/taskSupport").and_then(Value::as_str) == Some("required")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn key() -> PoolKey {
        (std::sync::Arc::from("alice"), 0)
    }

    #[test]
    fn execution_is_removed_and_task_only_tools_hidden() {
        let raw = RawValue::from_string(
            json!({"tools": [
                {"name": "a", "inputSchema": {}, "execution": {"taskSupport": "optional"}},
                {"name": "b", "inputSchema": {}, "execution": {"taskSupport": "required"}},
                {"name": "c", "inputSchema": {}}]})
            .to_string(),
        )
        .unwrap();
        let v: Value = serde_json::from_str(modern_tools(raw, &key(), &catalogue(), None).get()).unwrap();
        assert_eq!(v, json!({"tools": [{"name": "a", "inputSchema": {}}, {"name": "c", "inputSchema": {}}]}));
    }

    #[test]
    fn with_the_task_bridge_every_tool_is_listed_and_learnt() {
        let text = json!({"tools": [
            {"name": "a", "inputSchema": {}, "execution": {"taskSupport": "optional"}},
            {"name": "b", "inputSchema": {}, "execution": {"taskSupport": "required"}},
            {"name": "c", "inputSchema": {}}]})
        .to_string();
        let tasks = Catalogue::default();
        assert_eq!(tasks.support("c"), None, "nothing listed yet");
        let raw = RawValue::from_string(text.clone()).unwrap();
        assert_eq!(modern_tools(raw, &key(), &catalogue(), Some(&tasks)).get(), text, "untouched");
        use crate::tasks::TaskSupport as S;
        assert_eq!(
            (tasks.support("a"), tasks.support("b"), tasks.support("c")),
            (Some(S::Optional), Some(S::Required), Some(S::Forbidden))
        );
    }

    #[test]
    fn plain_lists_are_untouched() {
        let text = r#"{"tools": [{"name": "a"}]}"#;
        assert_eq!(
            modern_tools(RawValue::from_string(text.into()).unwrap(), &key(), &catalogue(), None).get(),
            text
        );
    }

    #[test]
    fn tools_with_invalid_annotations_are_hidden_and_valid_ones_kept() {
        let region =
            json!({"type": "object", "properties": {"r": {"type": "string", "x-mcp-header": "Region"}}});
        let twice = json!({"type": "object", "properties": {
            "a": {"type": "string", "x-mcp-header": "X"}, "b": {"type": "string", "x-mcp-header": "x"}}});
        let text =
            json!({"tools": [{"name": "ok", "inputSchema": region}, {"name": "dup", "inputSchema": twice},
            {"name": "plain", "inputSchema": {}}], "nextCursor": "2"})
            .to_string();
        let tools = catalogue();
        let v: Value = serde_json::from_str(
            modern_tools(RawValue::from_string(text).unwrap(), &key(), &tools, None).get(),
        )
        .unwrap();
        assert_eq!(
            v,
            json!({"tools": [{"name": "ok", "inputSchema": region}, {"name": "plain", "inputSchema": {}}],
            "nextCursor": "2"})
        );
        assert_eq!(tools.len(), 3);
    }

    #[test]
    fn a_valid_annotated_list_is_untouched() {
        let text = r#"{"tools": [{"name": "a", "inputSchema": {"type": "object", "properties": {"r": {"type": "boolean", "x-mcp-header": "R"}}}}]}"#;
        assert_eq!(
            modern_tools(RawValue::from_string(text.into()).unwrap(), &key(), &catalogue(), None).get(),
            text
        );
    }

    #[test]
    fn the_next_cursor_is_read() {
        assert_eq!(
            next_cursor(&RawValue::from_string(r#"{"tools": [], "nextCursor": "p2"}"#.into()).unwrap())
                .as_deref(),
            Some("p2")
        );
        assert_eq!(next_cursor(&RawValue::from_string(r#"{"tools": []}"#.into()).unwrap()), None);
    }

    fn catalogue() -> ToolHeaders {
        ToolHeaders::new(crate::front::tool_headers::Limits::default(), Default::default())
    }
}
