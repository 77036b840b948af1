//! Relayed methods (`tools/list`, `prompts/list`, `resources/list`, `resources/templates/list`,
//! `completion/complete`): one upstream request on a pooled session, whose server requests are
//! refused upstream (these methods may never answer `input_required`), and a result stamped
//! with `resultType` and cache hints. A list result goes through the 2026-07-28 schema checks
//! on its way ([`crate::schema`]); a `tools/list` result through [`modern_tools`], which also
//! teaches the tool catalogue; [`list_tools`] reads the whole list for that catalogue alone.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::tool_headers::ToolHeaders;
use crate::defaults;
use crate::error::{map_upstream_error, FrontError};
use crate::metrics::Metrics;
use crate::protocol::jsonrpc::Outcome;
use crate::protocol::methods::RelayMethod;
use crate::schema::{Finding, ListKind, Page, Refusal};
use crate::tasks::Catalogue;
use crate::tool_report::ToolReport;
use crate::upstream::{Pool, PoolKey};

/// A relayed result, and what the schema checks found in it.
pub(super) struct Relayed {
    pub raw: Box<RawValue>,
    pub checks: Checks,
}

/// What the schema checks found in a relayed result (for the migration report).
#[derive(Default)]
pub(super) struct Checks {
    checked: Option<(Checked, Arc<Page>)>,
    /// Tools left out for their `x-mcp-header` annotations.
    header_invalid: HashSet<String>,
}

/// Which list a checked page is.
#[derive(Clone, Copy)]
enum Checked {
    Tools,
    List(ListKind),
}

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
) -> Result<Relayed, FrontError> {
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
        Outcome::Result(raw) => Ok(modern(raw, method, &key, (tools, tasks))),
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
        match next_cursor(&page.raw) {
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

/// A relayed result as a 2026-07-28 client may see it: lists checked, others untouched.
fn modern(
    raw: Box<RawValue>,
    method: RelayMethod,
    key: &PoolKey,
    (tools, tasks): (&ToolHeaders, Option<&Catalogue>),
) -> Relayed {
    let kind = match method {
        RelayMethod::ToolsList => return modern_tools(raw, key, tools, tasks),
        RelayMethod::PromptsList => ListKind::Prompts,
        RelayMethod::ResourcesList => ListKind::Resources,
        RelayMethod::ResourcesTemplatesList => ListKind::ResourceTemplates,
        RelayMethod::CompletionComplete => return Relayed { raw, checks: Checks::default() },
    };
    let page = tools.schema().list(kind, &raw);
    let raw = page.text.clone().unwrap_or(raw);
    let checks = Checks { checked: Some((Checked::List(kind), page)), header_invalid: HashSet::new() };
    Relayed { raw, checks }
}

/// A relayed `tools/list` page as a 2026-07-28 client may see it. Each step may leave tools out
/// or change them; a page none of them changes is relayed untouched:
/// - the schema checks repair what they can (a missing `type`) and leave out what they cannot
///   (an invalid schema);
/// - with the task bridge on (`tasks`), every tool is listed with its `execution`: the gateway
///   serves what it says, and `tasks` learns it; with it off, `execution` (the legacy tasks
///   hint) is removed and tools that can only be called as legacy tasks are left out;
/// - tools whose `x-mcp-header` annotations are invalid are left out (learnt by `tools`).
///
/// Names that cannot travel in `Mcp-Name` are encoded later, after the authorization rules
/// filtered the page by the upstream's names ([`Relayed::encode_names`]).
fn modern_tools(
    raw: Box<RawValue>,
    key: &PoolKey,
    tools: &ToolHeaders,
    tasks: Option<&Catalogue>,
) -> Relayed {
    if let Some(tasks) = tasks {
        learn_tasks(tasks, &raw);
    }
    let page = tools.schema().tools(&raw, tasks.is_some());
    let header_invalid = tools.learn_checked(key, &raw, &page);
    let mut text = page.text.clone().unwrap_or(raw);
    if !header_invalid.is_empty() {
        text = without(text, &header_invalid);
    }
    Relayed { raw: text, checks: Checks { checked: Some((Checked::Tools, page)), header_invalid } }
}

/// Teaches the task catalogue which tools run as legacy tasks, from the upstream's own page.
fn learn_tasks(tasks: &Catalogue, raw: &RawValue) {
    if !raw.get().contains("\"execution\"") {
        tasks.mark_listed();
    } else if let Ok(page) = serde_json::from_str::<Value>(raw.get()) {
        tasks.learn(&page);
    }
}

/// `page` without the tools named in `names`.
fn without(page: Box<RawValue>, names: &HashSet<String>) -> Box<RawValue> {
    let Ok(mut result) = serde_json::from_str::<Value>(page.get()) else { return page };
    if let Some(Value::Array(list)) = result.get_mut("tools") {
        list.retain(|t| !t.get("name").and_then(Value::as_str).is_some_and(|n| names.contains(n)));
    }
    RawValue::from_string(result.to_string()).unwrap_or(page)
}

// === impl Checks ===

impl Checks {
    /// Counts what the schema checks repaired and refused in this result, as relayed to a
    /// client (a listing the gateway makes for itself is not counted).
    pub(super) fn record(&self, report: &ToolReport) {
        let Some((checked, page)) = &self.checked else { return };
        match checked {
            Checked::List(kind) => {
                for (finding, detail) in &page.items {
                    report.list(*kind, *finding, detail);
                }
            }
            Checked::Tools => {
                for tool in &page.tools {
                    let name = tool.name.as_deref();
                    for repair in &tool.repairs {
                        report.schema(name, Finding::Repair(*repair), "");
                    }
                    if let Some(refusal) = tool.refused {
                        report.schema(name, Finding::Refusal(refusal), &tool.detail);
                    }
                }
                for name in &self.header_invalid {
                    report.schema(Some(name), Finding::Refusal(Refusal::HeaderAnnotationInvalid), "");
                }
            }
        }
    }

    /// `raw` (this result, filtered by the authorization rules) with the tool names that
    /// cannot travel in `Mcp-Name` encoded, each counted.
    pub(super) fn encode_names(&self, raw: Box<RawValue>, report: &ToolReport) -> Box<RawValue> {
        let needed = matches!(&self.checked, Some((Checked::Tools, page)) if page.encode_names);
        if !needed {
            return raw;
        }
        let (raw, encoded) = crate::schema::encode_names(raw);
        for name in encoded {
            report.schema(Some(&name), Finding::Repair(crate::schema::Repair::NameEncoded), "");
        }
        raw
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn key() -> PoolKey {
        (std::sync::Arc::from("alice"), 0)
    }

    fn raw(v: Value) -> Box<RawValue> {
        RawValue::from_string(v.to_string()).unwrap()
    }

    fn relayed(v: Value, tools: &ToolHeaders) -> Value {
        serde_json::from_str(modern_tools(raw(v), &key(), tools, None).raw.get()).unwrap()
    }

    #[test]
    fn execution_is_removed_and_task_only_tools_hidden() {
        let object = json!({"type": "object"});
        let v = relayed(
            json!({"tools": [
                {"name": "a", "inputSchema": object, "execution": {"taskSupport": "optional"}},
                {"name": "b", "inputSchema": object, "execution": {"taskSupport": "required"}},
                {"name": "c", "inputSchema": object}]}),
            &catalogue(),
        );
        assert_eq!(
            v,
            json!({"tools": [{"name": "a", "inputSchema": object}, {"name": "c", "inputSchema": object}]})
        );
    }

    #[test]
    fn with_the_task_bridge_every_tool_is_listed_and_learnt() {
        let object = json!({"type": "object"});
        let text = json!({"tools": [
            {"name": "a", "inputSchema": object, "execution": {"taskSupport": "optional"}},
            {"name": "b", "inputSchema": object, "execution": {"taskSupport": "required"}},
            {"name": "c", "inputSchema": object}]})
        .to_string();
        let tasks = Catalogue::default();
        assert_eq!(tasks.support("c"), None, "nothing listed yet");
        let page =
            modern_tools(RawValue::from_string(text.clone()).unwrap(), &key(), &catalogue(), Some(&tasks));
        assert_eq!(page.raw.get(), text, "untouched");
        use crate::tasks::TaskSupport as S;
        assert_eq!(
            (tasks.support("a"), tasks.support("b"), tasks.support("c")),
            (Some(S::Optional), Some(S::Required), Some(S::Forbidden))
        );
    }

    #[test]
    fn plain_lists_are_untouched() {
        let text = r#"{"tools": [{"name": "a", "inputSchema": {"type": "object"}}]}"#;
        let page = modern_tools(RawValue::from_string(text.into()).unwrap(), &key(), &catalogue(), None);
        assert_eq!(page.raw.get(), text);
    }

    #[test]
    fn tools_with_invalid_annotations_are_hidden_and_valid_ones_kept() {
        let region =
            json!({"type": "object", "properties": {"r": {"type": "string", "x-mcp-header": "Region"}}});
        let twice = json!({"type": "object", "properties": {
            "a": {"type": "string", "x-mcp-header": "X"}, "b": {"type": "string", "x-mcp-header": "x"}}});
        let tools = catalogue();
        let v = relayed(
            json!({"tools": [{"name": "ok", "inputSchema": region}, {"name": "dup", "inputSchema": twice},
            {"name": "plain", "inputSchema": {}}], "nextCursor": "2"}),
            &tools,
        );
        assert_eq!(
            v,
            json!({"tools": [{"name": "ok", "inputSchema": region},
            {"name": "plain", "inputSchema": {"type": "object"}}], "nextCursor": "2"})
        );
        assert_eq!(tools.len(), 3);
    }

    #[test]
    fn a_valid_annotated_list_is_untouched() {
        let text = r#"{"tools": [{"name": "a", "inputSchema": {"type": "object", "properties": {"r": {"type": "boolean", "x-mcp-header": "R"}}}}]}"#;
        let page = modern_tools(RawValue::from_string(text.into()).unwrap(), &key(), &catalogue(), None);
        assert_eq!(page.raw.get(), text);
    }

    #[test]
    fn refused_tools_are_hidden_counted_and_refused_when_called() {
        let m = Metrics::new().unwrap();
        let tools = catalogue();
        let page = modern_tools(
            raw(json!({"tools": [
                {"name": "untyped", "inputSchema": {"properties": {}}},
                {"name": "broken", "inputSchema": {"type": "object", "properties": {"x": {"type": 12}}}},
                {"name": "typed", "inputSchema": {"type": "object"}, "outputSchema": {"properties": {}}}]})),
            &key(),
            &tools,
            None,
        );
        let v: Value = serde_json::from_str(page.raw.get()).unwrap();
        assert_eq!(v["tools"].as_array().map(Vec::len), Some(2));
        page.checks.record(&m.tools);
        let report = m.tools.snapshot();
        let find = |t: &str| report.tools.iter().find(|e| e.tool == t).unwrap().schema.clone();
        assert_eq!(find("untyped").repairs.get("input_type_added"), Some(&1));
        assert_eq!(find("broken").refusals.get("input_schema_invalid"), Some(&1));
        assert_eq!(find("typed").repairs.get("output_type_added"), Some(&1));
        let refused = tools.lookup(&key(), "broken", None, None).unwrap().unwrap_err();
        assert!(refused.to_string().contains("not a valid JSON Schema"), "{refused}");
        let output = tools.lookup(&key(), "typed", None, None).unwrap().unwrap();
        assert!(output.is_some_and(|o| o.check(&json!([])).is_err()), "its outputSchema is learnt");
    }

    #[test]
    fn names_are_encoded_after_the_filter_and_counted() {
        let m = Metrics::new().unwrap();
        let tools = catalogue();
        let page = modern_tools(
            raw(json!({"tools": [{"name": "search files", "inputSchema": {"type": "object"}}]})),
            &key(),
            &tools,
            None,
        );
        let encoded = page.checks.encode_names(page.raw, &m.tools);
        let v: Value = serde_json::from_str(encoded.get()).unwrap();
        assert_eq!(v["tools"][0]["name"], "_.search_20files");
        let report = m.tools.snapshot();
        assert_eq!(report.tools[0].schema.repairs.get("name_encoded"), Some(&1));
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
