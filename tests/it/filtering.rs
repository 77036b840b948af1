//! Tool filtering: `[[auth.rules]]` allow and deny globs decide which tools, prompts and
//! resources a client sees listed and may use, for 2026-07-28 clients and for legacy clients on
//! every relay path (the HTTP relay, JSON and SSE-framed answers and a resumed stream; the seam
//! sessions of a stdio and an HTTP+SSE upstream), with or without authentication.

use http::StatusCode;
use serde_json::{json, Value};

use super::everything;
use super::legacy_rules::{token, with_jwt};
use crate::common::faulty::FaultyLegacy;
use crate::common::legacy_client::{LegacyClient, Raw};
use crate::common::sse_legacy::{same_origin, SseLegacy};
use crate::common::stdio::{serial, StdioGateway};
use crate::common::{Client, Setup, TestResult};

/// Every tool but `greet` and the `confirm_*` ones, every prompt but the demo's one, every
/// resource but the counter: for every client, without authentication.
const DENY_RULE: &str = r#"rules = [{ tools = ["*"], deny_tools = ["greet", "confirm_*"], prompts = ["*"], deny_prompts = ["greeting_prompt"], resources = ["*"], deny_resources = ["demo://counter"] }]"#;

/// The demo's tools for a client declaring everything, less the denied ones, in its order.
const VISIBLE_DEMO_TOOLS: [&str; 11] = [
    "echo",
    "summarize",
    "list_roots",
    "ask_three",
    "count_down",
    "url_login",
    "flaky_question",
    "hang",
    "die",
    "bump_counter",
    "place_order",
];

/// The `key` of each item of `result[field]`.
fn names(result: &Value, field: &str, key: &str) -> Vec<String> {
    let items = result.get(field).and_then(Value::as_array).cloned().unwrap_or_default();
    items.iter().filter_map(|i| i[key].as_str().map(str::to_owned)).collect()
}

/// The `result` of a legacy POST's response (its last message).
fn legacy_result(raw: &Raw) -> Value {
    raw.messages.last().map(|m| m["result"].clone()).unwrap_or(Value::Null)
}

async fn legacy_list(client: &LegacyClient, method: &str) -> TestResult<Raw> {
    let raw = client.post(&client.request_body(method, json!({}))).await?;
    assert_eq!(raw.status, StatusCode::OK, "{method}: {:?}", raw.messages);
    Ok(raw)
}

async fn modern_list(client: &Client, method: &str) -> TestResult<Value> {
    Ok(client.request(method).caps(everything()).send().await?.result()?.clone())
}

/// What a 2026-07-28 client may see and call under [`DENY_RULE`]; `client` carries its token.
async fn assert_denied_for_modern(client: &Client) -> TestResult {
    let tools = modern_list(client, "tools/list").await?;
    assert_eq!(names(&tools, "tools", "name"), VISIBLE_DEMO_TOOLS);
    assert!(names(&modern_list(client, "prompts/list").await?, "prompts", "name").is_empty());
    assert_eq!(names(&modern_list(client, "resources/list").await?, "resources", "uri"), ["demo://profile"]);

    let echo = client.call_tool("echo", json!({"message": "hi"})).send().await?;
    assert_eq!(echo.text()?, "Echo: hi");
    for tool in ["greet", "confirm_twice"] {
        let refused = client.call_tool(tool, json!({})).caps(everything()).send().await?;
        let message = refused.expect_error(StatusCode::FORBIDDEN, -32600)?;
        assert_eq!(
            message,
            format!("forbidden: tools/call of tool {tool:?} is outside this client's authorization")
        );
    }
    let prompt = client.get_prompt("greeting_prompt", json!({})).caps(everything()).send().await?;
    prompt.expect_error(StatusCode::FORBIDDEN, -32600)?;
    let counter = client.read_resource("demo://counter").send().await?;
    counter.expect_error(StatusCode::FORBIDDEN, -32600)?;
    Ok(())
}

#[tokio::test]
async fn deny_globs_win_over_every_allow_for_2026_clients() -> TestResult {
    // A second rule allows everything to admins: the deny of the first, which applies to
    // every client, still wins.
    let admin = r#"{ scopes = ["admin"], tools = ["*"], prompts = ["*"], resources = ["*"] }"#;
    let rules = DENY_RULE.replace("}]", &format!("}}, {admin}]"));
    let h = with_jwt(Setup::new()).set("auth", &rules).start().await?;
    let client = h.client.with_bearer(&token("alice", "admin")?);
    assert_denied_for_modern(&client).await?;
    let refused = client.call_tool("greet", json!({})).caps(everything()).send().await?;
    let challenge = refused.headers.get(http::header::WWW_AUTHENTICATE).and_then(|v| v.to_str().ok());
    assert_eq!(challenge, Some(r#"Bearer error="insufficient_scope""#), "no scope lifts a deny");
    assert_eq!(h.metric(r#"mrtr_gateway_auth_denials_total{method="tools/call"}"#), 3.0);
    assert_eq!(h.demo.stats.tool_calls("greet"), 0, "a denied call never reaches the upstream");
    h.stop().await
}

#[tokio::test]
async fn rules_filter_without_authentication() -> TestResult {
    let h = Setup::new().set("auth", DENY_RULE).start().await?;
    assert_denied_for_modern(&h.client).await?;
    let refused = h.client.call_tool("greet", json!({})).caps(everything()).send().await?;
    assert!(refused.headers.get(http::header::WWW_AUTHENTICATE).is_none(), "no token would change it");
    h.stop().await
}

#[tokio::test]
async fn a_legacy_clients_lists_are_filtered_on_the_http_relay() -> TestResult {
    let h = with_jwt(Setup::new()).set("auth", DENY_RULE).start().await?;
    let mut client = LegacyClient::new(h.gateway.url("/mcp")).with_bearer(&token("bob", "")?);
    client.initialize(everything()).await?;
    let tools = legacy_result(&legacy_list(&client, "tools/list").await?);
    assert_eq!(names(&tools, "tools", "name"), VISIBLE_DEMO_TOOLS);
    let first = &tools["tools"][0];
    assert_eq!(first["inputSchema"]["type"], "object", "the items kept are kept whole: {first}");
    let prompts = legacy_result(&legacy_list(&client, "prompts/list").await?);
    assert_eq!(prompts, json!({"prompts": []}));
    let resources = legacy_result(&legacy_list(&client, "resources/list").await?);
    assert_eq!(names(&resources, "resources", "uri"), ["demo://profile"]);
    // What is not a list is relayed untouched, and what is hidden may not be called either.
    let echo = client.call_tool("echo", json!({"message": "as it was"})).await?;
    assert_eq!(echo["result"]["content"][0]["text"], "Echo: as it was");
    let refused = client.post(&client.request_body("tools/call", json!({"name": "greet"}))).await?;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    h.stop().await
}

#[tokio::test]
async fn sse_framed_and_resumed_list_results_are_filtered() -> TestResult {
    let faulty = FaultyLegacy::spawn().await?;
    let rule = r#"rules = [{ prompts = ["*"], deny_prompts = ["secret"], resources = ["*"], deny_resources = ["faulty://secret"] }]"#;
    let (gateway, _) = Setup::new().set("auth", rule).attach_url(&faulty.url()).await?;
    let mut client = LegacyClient::new(gateway.url("/mcp"));
    client.initialize(json!({})).await?;
    // An SSE answer: the notification before the response passes as it came.
    let prompts = legacy_list(&client, "prompts/list").await?;
    assert_eq!(prompts.messages.len(), 2, "{:?}", prompts.messages);
    assert_eq!(prompts.messages[0]["params"]["data"], "listing");
    assert_eq!(legacy_result(&prompts), json!({"prompts": [{"name": "public"}]}));
    // The response comes on the stream resumed with GET + Last-Event-ID.
    let resources = client.call("resources/list", json!({})).await?;
    assert_eq!(names(&resources["result"], "resources", "uri"), ["faulty://public"]);
    assert_eq!(faulty.stats().resumes().len(), 1, "the list came on the resumed stream");
    mrtr_gateway_shutdown(gateway).await
}

#[tokio::test]
async fn an_unrestricted_legacy_client_gets_the_upstream_bytes() -> TestResult {
    let faulty = FaultyLegacy::spawn().await?;
    let (gateway, _) = Setup::new().attach_url(&faulty.url()).await?;
    let mut client = LegacyClient::new(gateway.url("/mcp"));
    client.initialize(json!({})).await?;
    let prompts = legacy_list(&client, "prompts/list").await?;
    assert_eq!(legacy_result(&prompts), json!({"prompts": [{"name": "public"}, {"name": "secret"}]}));
    mrtr_gateway_shutdown(gateway).await
}

#[tokio::test]
async fn a_legacy_clients_lists_are_filtered_on_a_stdio_session() -> TestResult {
    let _serial = serial().await;
    let rule = r#"rules = [{ tools = ["*"], deny_tools = ["e*", "pid"] }]"#;
    let gw = StdioGateway::start(&[], &[], &["[auth]", rule]).await?;
    let mut client = LegacyClient::new(gw.gateway.url("/mcp"));
    client.initialize(json!({})).await?;
    let tools = legacy_result(&legacy_list(&client, "tools/list").await?);
    let listed = names(&tools, "tools", "name");
    assert_eq!(listed.len(), 13, "{listed:?}");
    assert!(listed.iter().all(|t| !t.starts_with('e') && t != "pid"), "{listed:?}");
    assert!(listed.contains(&"greet".to_owned()));
    // In a batch, the list's response is filtered and the other request's is not.
    let batch = json!([client.request_body("tools/list", json!({})), client.request_body("ping", json!({}))]);
    let raw = client.post(&batch).await?;
    let list = raw.messages.iter().find(|m| m["result"].get("tools").is_some()).cloned().unwrap_or_default();
    assert_eq!(names(&list["result"], "tools", "name"), listed);
    assert!(raw.messages.iter().any(|m| m["result"] == json!({})), "{:?}", raw.messages);
    gw.stop().await
}

#[tokio::test]
async fn a_legacy_clients_lists_are_filtered_on_an_http_sse_session() -> TestResult {
    let upstream = SseLegacy::spawn("2024-11-05", same_origin).await?;
    let rule = r#"rules = [{ tools = ["*"], deny_tools = ["drop", "meta"] }]"#;
    let config = Setup::new().set("auth", rule).toml_with("sse_url", &upstream.url());
    let gateway =
        mrtr_gateway::app::Gateway::start(mrtr_gateway::config::Config::from_toml(&config)?).await?;
    let mut client = LegacyClient::new(gateway.url("/mcp"));
    client.initialize(json!({})).await?;
    let tools = legacy_result(&legacy_list(&client, "tools/list").await?);
    assert_eq!(
        names(&tools, "tools", "name"),
        ["echo", "stream", "greet", "place_order", "confirm_twice", "flaky_question"]
    );
    mrtr_gateway_shutdown(gateway).await
}

async fn mrtr_gateway_shutdown(gateway: mrtr_gateway::app::Gateway) -> TestResult {
    crate::common::bounded("the gateway to drain", gateway.shutdown()).await
}
