//! Everything relayed to a 2026-07-28 client is valid 2026-07-28: the scripted stdio server
//! (`--schema`) lists tools as legacy servers write them (no `inputSchema.type`, a schema that
//! is not JSON Schema, an `outputSchema` without `type`, a name with a space) and broken prompt
//! and resource items; the gateway repairs or refuses each, with exact counts in `/admin/tools`
//! and `/metrics`.

use http::StatusCode;
use serde_json::{json, Value};

use crate::common::client::admin_get;
use crate::common::harness::{metric, metric_in};
use crate::common::stdio::{serial, StdioGateway};
use crate::common::{Client, HarnessError, TestResult};

/// `GET /admin/tools`, parsed.
pub(super) async fn report(gw: &StdioGateway) -> TestResult<Value> {
    let admin = gw.gateway.admin_addr.ok_or_else(|| HarnessError::Unexpected("no admin listener".into()))?;
    let (status, text) = admin_get(&gw.client, admin, "/admin/tools").await?;
    assert_eq!(status, StatusCode::OK, "{text}");
    Ok(serde_json::from_str(&text)?)
}

/// One tool's entry of the report.
pub(super) fn entry<'a>(report: &'a Value, tool: &str) -> &'a Value {
    let tools = report["tools"].as_array().map(Vec::as_slice).unwrap_or_default();
    tools.iter().find(|t| t["tool"] == tool).unwrap_or_else(|| panic!("no entry for {tool} in {report}"))
}

async fn listed(client: &Client) -> TestResult<Vec<Value>> {
    let list = client.request("tools/list").send().await?;
    Ok(list.result()?["tools"].as_array().cloned().unwrap_or_default())
}

fn named<'a>(tools: &'a [Value], name: &str) -> Option<&'a Value> {
    tools.iter().find(|t| t["name"] == name)
}

#[tokio::test]
async fn legacy_tool_lists_are_repaired_or_refused_with_a_named_reason() -> TestResult {
    let _serial = serial().await;
    let gw = StdioGateway::start(&["--schema"], &[], &[]).await?;
    let tools = listed(&gw.client).await?;
    let untyped = named(&tools, "untyped").expect("a tool without type is repaired, not dropped");
    assert_eq!(untyped["inputSchema"]["type"], "object");
    assert_eq!(untyped["inputSchema"]["$schema"], "http://json-schema.org/draft-07/schema#");
    assert_eq!(named(&tools, "weather").map(|t| &t["outputSchema"]["type"]), Some(&json!("object")));
    let encoded = named(&tools, "_.search_20files").expect("a name with a space is encoded");
    assert_eq!(encoded["title"], "search files");
    assert!(named(&tools, "broken_schema").is_none(), "an invalid schema is left out");
    assert!(named(&tools, "search files").is_none());
    assert!(tools.iter().all(|t| t["inputSchema"]["type"] == "object"), "{tools:?}");

    // The repaired tools are called by the names the client saw.
    let found = gw.client.call_tool("untyped", json!({"query": "notes"})).send().await?;
    assert_eq!(found.text()?, "found notes");
    assert_eq!(gw.client.call_tool("_.search_20files", json!({})).send().await?.text()?, "searched");
    // The refused one is refused by name, with its reason.
    let refused = gw.client.call_tool("broken_schema", json!({})).send().await?;
    let message = refused.expect_error(StatusCode::BAD_REQUEST, -32602)?;
    assert!(message.contains("inputSchema is not a valid JSON Schema"), "{message}");

    let report = report(&gw).await?;
    assert_eq!(
        entry(&report, "untyped")["schema"],
        json!({"repairs": {"input_type_added": 1}, "refusals": {}})
    );
    assert_eq!(entry(&report, "weather")["schema"]["repairs"], json!({"output_type_added": 1}));
    assert_eq!(entry(&report, "search files")["schema"]["repairs"], json!({"name_encoded": 1}));
    assert_eq!(entry(&report, "broken_schema")["schema"]["refusals"], json!({"input_schema_invalid": 1}));
    let text = metrics_text(&gw).await?;
    let untyped_repairs = r#"mrtr_gateway_schema_repairs_total{reason="input_type_added",tool="untyped"}"#;
    assert_eq!(metric_in(&text, untyped_repairs), 1.0);
    let broken = r#"mrtr_gateway_schema_refusals_total{reason="input_schema_invalid",tool="broken_schema"}"#;
    assert_eq!(metric_in(&text, broken), 1.0);
    gw.stop().await
}

#[tokio::test]
async fn a_structured_result_that_breaks_its_output_schema_is_refused() -> TestResult {
    let _serial = serial().await;
    let gw = StdioGateway::start(&["--schema"], &[], &[]).await?;
    // No listing first: the call itself makes the gateway learn the tool's outputSchema.
    let valid = gw.client.call_tool("weather", json!({"valid": true})).send().await?;
    assert_eq!(valid.result()?["structuredContent"], json!({"temp": 21.5}));
    let invalid = gw.client.call_tool("weather", json!({"valid": false})).send().await?;
    let result = invalid.result()?;
    assert_eq!(result["isError"], true, "{result}");
    assert!(result.get("structuredContent").is_none(), "{result}");
    let text = invalid.text()?;
    assert!(text.contains("\"weather\"") && text.contains("structured_content_invalid"), "{text}");
    assert!(!text.contains("warm"), "the upstream's words stay out of the reply: {text}");

    let report = report(&gw).await?;
    assert_eq!(entry(&report, "weather")["schema"]["refusals"], json!({"structured_content_invalid": 1}));
    let series = r#"mrtr_gateway_schema_refusals_total{reason="structured_content_invalid",tool="weather"}"#;
    assert_eq!(metric(&gw.gateway, series), 1.0);
    gw.stop().await
}

#[tokio::test]
async fn an_invalid_question_is_refused_upstream_and_named_to_the_client() -> TestResult {
    let _serial = serial().await;
    let gw = StdioGateway::start(&["--schema"], &[], &[]).await?;
    let reply = gw.client.call_tool("nested_form", json!({})).caps(json!({"elicitation": {}})).send().await?;
    assert_eq!(reply.result()?["isError"], true, "{:?}", reply.body);
    let text = reply.text()?;
    assert!(text.contains("\"nested_form\"") && text.contains("question_invalid"), "{text}");
    let report = report(&gw).await?;
    assert_eq!(entry(&report, "nested_form")["schema"]["refusals"], json!({"question_invalid": 1}));
    // The upstream's session is usable again: the next call is served.
    assert_eq!(gw.client.call_tool("untyped", json!({"query": "x"})).send().await?.text()?, "found x");
    gw.stop().await
}

#[tokio::test]
async fn broken_prompt_and_resource_items_are_dropped_or_repaired_and_counted_per_list() -> TestResult {
    let _serial = serial().await;
    let gw = StdioGateway::start(&["--schema"], &[], &[]).await?;
    let prompts = gw.client.request("prompts/list").send().await?;
    assert_eq!(prompts.result()?["prompts"], json!([{"name": "ok_prompt"}, {"name": "bad_args"}]));
    let resources = gw.client.request("resources/list").send().await?;
    assert_eq!(resources.result()?["resources"], json!([{"uri": "file:///a.txt", "name": "a"}]));
    let report = report(&gw).await?;
    assert_eq!(
        report["lists"],
        json!({
            "prompts": {"repairs": {"invalid_field_dropped": 1}, "refusals": {"name_invalid": 1}},
            "resources": {"repairs": {}, "refusals": {"uri_invalid": 1}},
            "resource_templates": {"repairs": {}, "refusals": {}},
        })
    );
    let series = r#"mrtr_gateway_schema_refusals_total{reason="name_invalid",tool="(prompts)"}"#;
    assert_eq!(metric(&gw.gateway, series), 1.0);
    gw.stop().await
}

async fn metrics_text(gw: &StdioGateway) -> TestResult<String> {
    let admin = gw.gateway.admin_addr.ok_or_else(|| HarnessError::Unexpected("no admin listener".into()))?;
    Ok(admin_get(&gw.client, admin, "/metrics").await?.1)
}
