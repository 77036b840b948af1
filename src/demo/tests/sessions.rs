//! Handshake, session and transport-level rules.

use http::StatusCode;
use serde_json::{json, Value};

use super::client::{full_caps, read_json, start, TestClient};
use crate::demo::DemoOptions;

fn tool_names(list: &Value) -> Vec<String> {
    let tools = list["result"]["tools"].as_array().unwrap();
    tools.iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
}

#[tokio::test]
async fn initialize_negotiates_and_opens_a_session() {
    let server = start(DemoOptions::default());
    let (client, init) = TestClient::connect(server.url(), json!({}), "2025-06-18").await;
    let result = &init["result"];
    assert_eq!(result["protocolVersion"], "2025-06-18");
    for capability in ["tools", "prompts", "resources", "completions", "logging"] {
        assert!(result["capabilities"].get(capability).is_some(), "{capability}");
    }
    assert_eq!(result["serverInfo"]["name"], "mrtr-demo-legacy");
    assert!(result["instructions"].as_str().unwrap().contains("greet"));
    assert_eq!(client.session.as_ref().unwrap().len(), 32);

    let (other, init) = TestClient::connect(server.url(), json!({}), "2099-01-01").await;
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
    assert_ne!(client.session, other.session);
    assert_eq!(server.stats.initializes(), 2);
    assert_eq!(server.stats.sessions_alive(), 2);
}

#[tokio::test]
async fn requests_without_a_valid_session_are_refused() {
    let server = start(DemoOptions::default());
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    let mut client = TestClient::new(server.url());
    let missing = client.post(&ping).await;
    assert_eq!(missing.status(), StatusCode::BAD_REQUEST);
    assert!(read_json(missing).await["error"]["message"].as_str().unwrap().contains("Mcp-Session-Id"));
    client.session = Some("not-a-session".into());
    assert_eq!(client.post(&ping).await.status(), StatusCode::NOT_FOUND);

    let (mut client, _) = TestClient::connect(server.url(), json!({}), "2025-11-25").await;
    let pong = read_json(client.post(&ping).await).await;
    assert_eq!(pong, json!({"jsonrpc": "2.0", "id": 1, "result": {}}));
    client.version = "2025-06-18".into();
    assert_eq!(client.post(&ping).await.status(), StatusCode::BAD_REQUEST);
    client.version = String::new();
    assert_eq!(client.post(&ping).await.status(), StatusCode::BAD_REQUEST);
    client.version = "2025-11-25".into();
    assert_eq!(client.delete().await.status(), StatusCode::OK);
    assert_eq!(client.post(&ping).await.status(), StatusCode::NOT_FOUND);
    assert_eq!((server.stats.deletes(), server.stats.sessions_alive()), (1, 0));
}

#[tokio::test]
async fn old_sessions_need_no_version_header_and_initialize_refuses_a_session_id() {
    let server = start(DemoOptions::default());
    let (mut client, _) = TestClient::connect(server.url(), json!({}), "2025-03-26").await;
    client.version = String::new();
    let (_, response) = client.call("tools/list", json!({})).await;
    assert_eq!(response.status(), StatusCode::OK);
    let init = json!({"jsonrpc": "2.0", "id": 9, "method": "initialize", "params": {}});
    assert_eq!(client.post(&init).await.status(), StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn tools_are_listed_only_for_declared_capabilities() {
    let server = start(DemoOptions::default());
    let (mut bare, _) = TestClient::connect(server.url(), json!({}), "2025-11-25").await;
    let (_, response) = bare.call("tools/list", json!({})).await;
    let names = tool_names(&read_json(response).await);
    assert_eq!(names, ["echo", "count_down", "hang", "die", "bump_counter"]);
    let (_, mut events) = bare.call_tool("greet", json!({})).await;
    let reply = events.message().await;
    assert_eq!(reply["result"]["isError"], true);
    assert!(reply["result"]["content"][0]["text"].as_str().unwrap().contains("Tool greet not found"));
    assert_eq!(server.stats.tool_calls("greet"), 1);

    let (mut full, _) = TestClient::connect(server.url(), full_caps(), "2025-11-25").await;
    let (_, response) = full.call("tools/list", json!({})).await;
    assert_eq!(tool_names(&read_json(response).await).len(), 13);
}

#[tokio::test]
async fn transport_checks_answer_with_the_sdk_statuses() {
    let server = start(DemoOptions::default());
    let (mut client, _) = TestClient::connect(server.url(), full_caps(), "2025-11-25").await;
    let first = client.get_stream().await;
    assert_eq!(first.status(), StatusCode::OK);
    assert_eq!(client.get_stream().await.status(), StatusCode::CONFLICT);
    drop(first);

    let note = json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"});
    assert_eq!(client.post(&note).await.status(), StatusCode::ACCEPTED);
    let batch = json!([{"jsonrpc": "2.0", "id": 1, "method": "ping"}]);
    assert_eq!(client.post(&batch).await.status(), StatusCode::BAD_REQUEST);
    let (_, unknown) = client.call("nope/nothing", json!({})).await;
    assert_eq!(read_json(unknown).await["error"]["code"], -32601);
    let stray = json!({"jsonrpc": "2.0", "id": 77, "result": {}});
    assert_eq!(client.post(&stray).await.status(), StatusCode::ACCEPTED);
    assert_eq!(server.stats.unmatched_answers(), 1);
}

#[tokio::test]
async fn oversized_bodies_are_refused() {
    let options = DemoOptions { max_body_bytes: 200, ..DemoOptions::default() };
    let server = start(options);
    let (client, _) = TestClient::connect(server.url(), json!({}), "2025-03-26").await;
    let big = json!({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": "x".repeat(300)}});
    assert_eq!(client.post(&big).await.status(), StatusCode::PAYLOAD_TOO_LARGE);
}

#[tokio::test]
async fn prompts_resources_and_completions_answer_plain_json() {
    let server = start(DemoOptions::default());
    let (mut client, _) = TestClient::connect(server.url(), full_caps(), "2025-11-25").await;
    let (_, prompts) = client.call("prompts/list", json!({})).await;
    assert_eq!(prompts.headers()["content-type"], "application/json");
    assert_eq!(read_json(prompts).await["result"]["prompts"][0]["name"], "greeting_prompt");
    let (_, resources) = client.call("resources/list", json!({})).await;
    assert_eq!(read_json(resources).await["result"]["resources"][0]["uri"], "demo://profile");
    let (_, templates) = client.call("resources/templates/list", json!({})).await;
    assert_eq!(read_json(templates).await["result"]["resourceTemplates"], json!([]));
    let params = json!({"ref": {"type": "ref/prompt", "name": "greeting_prompt"},
        "argument": {"name": "style", "value": "p"}});
    let (_, completion) = client.call("completion/complete", params).await;
    assert_eq!(read_json(completion).await["result"]["completion"]["values"], json!(["pirate"]));
}
