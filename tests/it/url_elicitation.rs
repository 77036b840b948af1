//! A legacy `-32042` (URL elicitation required) answer: a client that declared
//! `elicitation.url` gets a URL-mode `input_required` and completes the call by retrying after
//! the out-of-band interaction; a retry before it is done is asked again; a client that
//! declines gets a fixed `-32603` message, and one that did not declare `elicitation.url`
//! -32021 naming it, with nothing of what the upstream said. A `javascript:` URL is refused
//! (an error result naming the tool and the reason, counted), and a plain `http:` one relayed
//! and counted as a warning.

use http::StatusCode;
use serde_json::{json, Map, Value};

use super::chatty_upstream::{Chatty, UPSTREAM_WORDS};
use super::sensitive_forms::sensitive_count;
use crate::common::{Client, Setup, TestResult};

fn url_client() -> Value {
    json!({"elicitation": {"url": {}}})
}

/// The one request of an `input_required`, which must be the upstream's URL elicitation
/// without its `elicitationId` (removed in 2026-07-28).
fn only_url_request(requests: &Map<String, Value>) -> String {
    assert_eq!(requests.len(), 1, "{requests:?}");
    let (key, request) = requests.iter().next().map(|(k, v)| (k.clone(), v.clone())).unwrap_or_default();
    assert_eq!(
        request,
        json!({"method": "elicitation/create", "params":
            {"mode": "url", "message": "Sign in to continue", "url": "https://login.example.com/start"}})
    );
    key
}

async fn first_round(client: &Client) -> TestResult<(String, String)> {
    let reply = client.call_tool("url_required", json!({"doc": 1})).caps(url_client()).send().await?;
    let (requests, state) = reply.input_required()?;
    Ok((only_url_request(&requests), state))
}

async fn retry(client: &Client, state: &str, key: &str, action: &str) -> TestResult<crate::common::Reply> {
    client
        .call_tool("url_required", json!({"doc": 1}))
        .caps(url_client())
        .state(state)
        .responses(json!({ key: {"action": action} }))
        .send()
        .await
}

#[tokio::test]
async fn url_required_becomes_a_url_question_and_the_retry_completes() -> TestResult {
    let upstream = Chatty::spawn(true).await?;
    let (gateway, client) = Setup::new().attach_url(&upstream.url()).await?;
    let (key, state) = first_round(&client).await?;
    // The user opens the URL and finishes there; the client then retries with its consent.
    upstream.complete();
    let reply = retry(&client, &state, &key, "accept").await?;
    assert_eq!(reply.text()?, "signed in");
    assert_eq!(upstream.seen.calls_of("url_required"), 2, "the retry replays the call once");
    gateway.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_retry_before_the_interaction_is_done_is_asked_again() -> TestResult {
    let upstream = Chatty::spawn(true).await?;
    let (gateway, client) = Setup::new().attach_url(&upstream.url()).await?;
    let (key, state) = first_round(&client).await?;
    let reply = retry(&client, &state, &key, "accept").await?;
    let (requests, state) = reply.input_required()?;
    let key = only_url_request(&requests);
    // That round replayed the call, found the accepted URL still required, re-issued the call
    // once more (the legacy client's retry), and only then asked again.
    assert_eq!(upstream.seen.calls_of("url_required"), 3);
    upstream.complete();
    let reply = retry(&client, &state, &key, "accept").await?;
    assert_eq!(reply.text()?, "signed in");
    assert_eq!(upstream.seen.calls_of("url_required"), 4);
    gateway.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn declining_the_url_ends_the_call_with_a_fixed_message() -> TestResult {
    let upstream = Chatty::spawn(true).await?;
    let (gateway, client) = Setup::new().attach_url(&upstream.url()).await?;
    for action in ["decline", "cancel"] {
        let (key, state) = first_round(&client).await?;
        let reply = retry(&client, &state, &key, action).await?;
        let message = reply.expect_error(StatusCode::OK, -32603)?;
        assert_eq!(message, "the upstream requires a URL elicitation that the client declined");
        assert!(reply.error()?.get("data").is_none());
    }
    gateway.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_client_without_url_elicitation_gets_32021_naming_it() -> TestResult {
    let upstream = Chatty::spawn(true).await?;
    let (gateway, client) = Setup::new().attach_url(&upstream.url()).await?;
    for caps in [json!({}), json!({"elicitation": {}}), json!({"elicitation": {"form": {}}})] {
        let reply = client.call_tool("url_required", json!({})).caps(caps.clone()).send().await?;
        reply.expect_error(StatusCode::BAD_REQUEST, -32021)?;
        let required = &reply.error()?["data"]["requiredCapabilities"];
        assert_eq!(required, &json!({"elicitation": {"url": {}}}), "{caps}");
        let text = reply.body.to_string();
        assert!(!text.contains(UPSTREAM_WORDS) && !text.contains("login.example.com"), "{caps}: {text}");
    }
    gateway.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_url_required_error_that_lists_nothing_gets_a_fixed_message() -> TestResult {
    let upstream = Chatty::spawn(true).await?;
    let (gateway, client) = Setup::new().attach_url(&upstream.url()).await?;
    let reply = client.call_tool("url_required_unlisted", json!({})).caps(url_client()).send().await?;
    let message = reply.expect_error(StatusCode::OK, -32603)?;
    assert_eq!(message, "the upstream requires a URL elicitation it did not describe");
    assert!(!reply.body.to_string().contains(UPSTREAM_WORDS));
    gateway.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_url_required_error_with_a_script_url_is_refused_by_name() -> TestResult {
    let upstream = Chatty::spawn(true).await?;
    let (gateway, client) = Setup::new().attach_url(&upstream.url()).await?;
    let tool = "url_required_script";
    let reply = client.call_tool(tool, json!({})).caps(url_client()).send().await?;
    assert_eq!(reply.result()?["isError"], true, "{:?}", reply.body);
    let text = reply.text()?;
    assert!(text.contains("url_required_script") && text.contains("script_url"), "{text}");
    let body = reply.body.to_string();
    assert!(!body.contains("alert(1)") && !body.contains(UPSTREAM_WORDS), "{body}");
    assert_eq!(sensitive_count(&gateway, tool, "script_url", "refused"), 1.0);
    assert_eq!(upstream.seen.calls_of(tool), 1, "a refusal is not retried upstream");
    gateway.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_url_required_error_with_a_plain_http_url_is_relayed_and_counted() -> TestResult {
    let upstream = Chatty::spawn(true).await?;
    let (gateway, client) = Setup::new().attach_url(&upstream.url()).await?;
    let tool = "url_required_http";
    let reply = client.call_tool(tool, json!({})).caps(url_client()).send().await?;
    let (requests, _) = reply.input_required()?;
    let asked = requests.values().next().cloned().unwrap_or_default();
    assert_eq!(asked["params"]["url"], "http://login.example.com/start", "{requests:?}");
    assert_eq!(sensitive_count(&gateway, tool, "insecure_url", "warned"), 1.0);
    assert_eq!(sensitive_count(&gateway, tool, "insecure_url", "refused"), 0.0);
    gateway.shutdown().await;
    Ok(())
}
