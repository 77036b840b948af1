//! What a client browses: the list methods (never `input_required`, always cache hints),
//! `server/discover` synthesised from the legacy handshake, and the prompt and resource that
//! ask a question on the way (MRTR on `prompts/get` and `resources/read`).

use http::StatusCode;
use serde_json::json;

use super::everything;
use crate::common::answers::NAME;
use crate::common::{answer_all, Harness, TestResult};

#[tokio::test]
async fn list_methods_complete_with_cache_hints() -> TestResult {
    let h = Harness::start().await?;
    let lists = [
        ("tools/list", "tools"),
        ("prompts/list", "prompts"),
        ("resources/list", "resources"),
        ("resources/templates/list", "resourceTemplates"),
    ];
    for (method, field) in lists {
        let reply = h.client.request(method).caps(everything()).send().await?;
        let result = reply.result()?;
        assert_eq!(result["resultType"], "complete", "{method}: {result}");
        assert_eq!(result["ttlMs"], 0, "{method}");
        assert_eq!(result["cacheScope"], "private", "{method}");
        assert!(result[field].is_array(), "{method}: {result}");
    }
    let tools = h.client.request("tools/list").caps(everything()).send().await?;
    let names: Vec<&str> = tools.result()?["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"greet") && names.contains(&"ask_three"), "{names:?}");
    let prompts = h.client.request("prompts/list").caps(everything()).send().await?;
    assert_eq!(prompts.result()?["prompts"][0]["name"], "greeting_prompt");
    h.stop().await
}

#[tokio::test]
async fn tools_follow_the_declared_capabilities() -> TestResult {
    let h = Harness::start().await?;
    let bare = h.client.request("tools/list").send().await?;
    let names: Vec<&str> =
        bare.result()?["tools"].as_array().into_iter().flatten().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, ["echo", "count_down", "hang", "die", "bump_counter"]);
    h.stop().await
}

#[tokio::test]
async fn discover_describes_the_server_with_a_string_id() -> TestResult {
    let h = Harness::start().await?;
    let reply = h.client.request("server/discover").id(json!("discover-1")).send().await?;
    assert_eq!(reply.body["id"], "discover-1");
    let result = reply.result()?;
    assert_eq!(result["resultType"], "complete");
    assert_eq!(result["supportedVersions"], json!(["2026-07-28"]));
    assert!(result["capabilities"]["tools"].is_object(), "{result}");
    assert_eq!(result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "mrtr-demo-legacy");
    assert_eq!(result["cacheScope"], "private");
    h.stop().await
}

#[tokio::test]
async fn a_prompt_asks_through_mrtr() -> TestResult {
    let h = Harness::start().await?;
    let call = || {
        h.client.get_prompt("greeting_prompt", json!({"style": "pirate"})).caps(json!({"elicitation": {}}))
    };
    let (requests, state) = call().send().await?.input_required()?;
    let message = requests.values().next().map(|q| q["params"]["message"].clone()).unwrap_or_default();
    assert_eq!(message, "Whom should the greeting address?");
    let done = call().state(&state).responses(answer_all(&requests)).send().await?;
    assert_eq!(done.text()?, format!("Write a pirate greeting for {NAME}."));
    h.stop().await
}

#[tokio::test]
async fn a_resource_read_asks_through_mrtr() -> TestResult {
    let h = Harness::start().await?;
    let call = || h.client.read_resource("demo://profile").caps(json!({"elicitation": {}}));
    let (requests, state) = call().send().await?.input_required()?;
    let message = requests.values().next().map(|q| q["params"]["message"].clone()).unwrap_or_default();
    assert_eq!(message, "Whose profile is this?");
    let done = call().state(&state).responses(answer_all(&requests)).send().await?;
    assert_eq!(done.text()?, format!("Profile of {NAME}"));
    assert_eq!(done.result()?["contents"][0]["uri"], "demo://profile");
    h.stop().await
}

#[tokio::test]
async fn completions_are_relayed_without_cache_hints() -> TestResult {
    let h = Harness::start().await?;
    let reply = h
        .client
        .request("completion/complete")
        .caps(json!({"elicitation": {}}))
        .param("ref", json!({"type": "ref/prompt", "name": "greeting_prompt"}))
        .param("argument", json!({"name": "style", "value": "f"}))
        .send()
        .await?;
    let result = reply.result()?;
    assert_eq!(result["resultType"], "complete");
    assert_eq!(result["completion"]["values"], json!(["formal", "friendly", "funny"]));
    assert!(result.get("ttlMs").is_none(), "{result}");
    h.stop().await
}

#[tokio::test]
async fn a_missing_resource_is_invalid_params_naming_the_uri_not_the_legacy_code() -> TestResult {
    let h = Harness::start().await?;
    let reply = h.client.read_resource("demo://nope").caps(json!({"elicitation": {}})).send().await?;
    // The upstream's answer to the call, relayed with the 2026-07-28 code: the exchange itself
    // succeeded, so the HTTP status is 200.
    let message = reply.expect_error(StatusCode::OK, -32602)?;
    // SEP-2164: the URI the client asked for in `data.uri`, with a fixed message.
    assert_eq!(reply.error()?["data"], json!({"uri": "demo://nope"}));
    assert_eq!(message, "Resource not found");
    h.stop().await
}
