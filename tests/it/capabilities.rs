//! Capabilities the client did not declare. The gateway declares upstream exactly what the
//! client declared, so the demo (like the reference servers) simply hides the tools that would
//! need more. A server that asks anyway meets -32021 with `data.requiredCapabilities` (HTTP 400),
//! never an `inputRequests` the client cannot serve, and its call is cancelled: for a URL or a
//! form elicitation, roots, and sampling plain, with tools or with the server's context.

use http::StatusCode;
use serde_json::{json, Value};

use super::form_only;
use crate::common::legacy::ScriptedLegacy;
use crate::common::{answer_all, eventually, Client, Harness, Setup, TestResult};

async fn behind_scripted() -> TestResult<(ScriptedLegacy, mrtr_gateway::app::Gateway, Client)> {
    let upstream = ScriptedLegacy::spawn().await?;
    let (gateway, client) = Setup::new().attach_url(&upstream.url()).await?;
    Ok((upstream, gateway, client))
}

async fn assert_denied(tool: &str, caps: Value, required: Value, label: &str) -> TestResult {
    let (upstream, gateway, client) = behind_scripted().await?;
    let reply = client.call_tool(tool, json!({})).caps(caps).send().await?;
    reply.expect_error(StatusCode::BAD_REQUEST, -32021)?;
    assert_eq!(reply.error()?["data"]["requiredCapabilities"], required);
    let stats = upstream.stats.clone();
    eventually("the upstream call to be cancelled", || stats.cancellations() >= 1).await?;
    let series = format!("mrtr_gateway_capability_denials_total{{capability=\"{label}\"}}");
    assert_eq!(crate::common::harness::metric(&gateway, &series), 1.0);
    gateway.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_url_elicitation_without_the_url_capability_is_32021() -> TestResult {
    assert_denied("url_login", form_only(), json!({"elicitation": {"url": {}}}), "elicitation").await
}

#[tokio::test]
async fn sampling_without_the_sampling_capability_is_32021() -> TestResult {
    assert_denied("summarize", form_only(), json!({"sampling": {}}), "sampling").await
}

#[tokio::test]
async fn a_form_elicitation_without_the_elicitation_capability_is_32021() -> TestResult {
    // A client that declared URL mode only cannot answer a form.
    assert_denied(
        "form_ask",
        json!({"elicitation": {"url": {}}, "sampling": {}}),
        json!({"elicitation": {}}),
        "elicitation",
    )
    .await
}

#[tokio::test]
async fn roots_without_the_roots_capability_are_32021() -> TestResult {
    assert_denied("roots_ask", json!({"elicitation": {}, "sampling": {}}), json!({"roots": {}}), "roots")
        .await
}

#[tokio::test]
async fn sampling_with_tools_without_sampling_tools_is_32021() -> TestResult {
    let plain = json!({"sampling": {}, "elicitation": {}});
    assert_denied("sample_with_tools", plain, json!({"sampling": {"tools": {}}}), "sampling").await
}

#[tokio::test]
async fn sampling_with_context_without_sampling_context_is_32021() -> TestResult {
    let with_tools = json!({"sampling": {"tools": {}}});
    assert_denied("sample_with_context", with_tools, json!({"sampling": {"context": {}}}), "sampling").await
}

#[tokio::test]
async fn each_kind_is_embedded_once_its_capability_is_declared() -> TestResult {
    let (upstream, gateway, client) = behind_scripted().await?;
    let cases = [
        ("form_ask", json!({"elicitation": {}}), "elicitation/create"),
        ("roots_ask", json!({"roots": {}}), "roots/list"),
        ("sample_with_tools", json!({"sampling": {"tools": {}}}), "sampling/createMessage"),
        ("sample_with_context", json!({"sampling": {"context": {}}}), "sampling/createMessage"),
    ];
    for (tool, caps, method) in cases {
        let (requests, _) = client.call_tool(tool, json!({})).caps(caps).send().await?.input_required()?;
        let asked: Vec<Value> = requests.values().map(|q| q["method"].clone()).collect();
        assert_eq!(asked, [json!(method)], "{tool}");
    }
    let denied = crate::common::harness::metric(
        &gateway,
        "mrtr_gateway_capability_denials_total{capability=\"sampling\"}",
    );
    assert_eq!(denied, 0.0, "nothing was denied");
    drop(upstream);
    gateway.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_declared_capability_is_embedded_instead() -> TestResult {
    let (upstream, gateway, client) = behind_scripted().await?;
    let reply = client.call_tool("summarize", json!({})).caps(json!({"sampling": {}})).send().await?;
    let (requests, _) = reply.input_required()?;
    assert_eq!(requests.values().next().map(|q| q["method"].clone()), Some(json!("sampling/createMessage")));
    // Asking the client ends the round: the upstream call is cancelled, its question refused.
    let stats = upstream.stats.clone();
    eventually("the round's upstream call to be cancelled", || {
        stats.cancellations() >= 1 && stats.answers() >= 1
    })
    .await?;
    gateway.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn the_demo_hides_tools_the_client_cannot_serve() -> TestResult {
    let h = Harness::start().await?;
    let reply = h.client.call_tool("url_login", json!({})).caps(form_only()).send().await?;
    assert_eq!(reply.result()?["isError"], true);
    assert_eq!(reply.text()?, "MCP error -32602: Tool url_login not found");
    h.stop().await
}

#[tokio::test]
async fn a_url_elicitation_completes_when_declared() -> TestResult {
    let h = Harness::start().await?;
    let caps = json!({"elicitation": {"form": {}, "url": {}}});
    let call = || h.client.call_tool("url_login", json!({})).caps(caps.clone());
    let (requests, state) = call().send().await?.input_required()?;
    let question = requests.values().next().cloned().unwrap_or_default();
    assert_eq!(question["params"]["mode"], "url");
    let done = call().state(&state).responses(answer_all(&requests)).send().await?;
    assert_eq!(done.text()?, "Logged in (accept)");
    h.stop().await
}
