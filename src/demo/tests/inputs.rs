//! Tools, prompt and resource that ask the client for input mid-call.

use std::time::Duration;

use serde_json::{json, Value};

use super::client::{full_caps, start, tool_text, Events, TestClient};
use crate::demo::DemoOptions;

async fn session(options: DemoOptions) -> (crate::demo::DemoHandle, TestClient) {
    let server = start(options);
    let (client, _) = TestClient::connect(server.url(), full_caps(), "2025-11-25").await;
    (server, client)
}

fn accept_name(name: &str) -> Value {
    json!({"action": "accept", "content": {"name": name}})
}

#[tokio::test]
async fn greet_elicits_on_the_post_stream() {
    let (server, mut client) = session(DemoOptions::default()).await;
    let (call_id, mut events) = client.call_tool("greet", json!({})).await;
    let priming = events.event().await;
    assert!(priming.id.is_some() && priming.data.is_empty());
    let ask = events.message().await;
    assert_eq!(ask["method"], "elicitation/create");
    assert_eq!(ask["id"], 0);
    assert_eq!(ask["params"]["message"], "What is your name?");
    assert_eq!(ask["params"]["requestedSchema"]["required"], json!(["name"]));
    assert!(ask["params"].get("mode").is_none());
    client.answer(&ask["id"], accept_name("Ada")).await;
    let reply = events.message().await;
    assert_eq!(reply["id"], call_id);
    assert_eq!(tool_text(&reply), "Hello, Ada!");
    assert!(events.next().await.unwrap().is_none(), "the stream ends after the response");
    assert_eq!((server.stats.answers(), server.stats.tool_calls("greet")), (1, 1));
    assert_eq!(server.stats.outstanding(), 0);
}

#[tokio::test]
async fn declined_greeting_and_old_sessions_have_no_priming_event() {
    let server = start(DemoOptions::default());
    let caps = json!({"elicitation": {}});
    let (mut client, _) = TestClient::connect(server.url(), caps, "2025-06-18").await;
    let (_, mut events) = client.call_tool("greet", json!({})).await;
    let first = events.event().await;
    assert!(!first.data.is_empty(), "2025-06-18 streams are not primed");
    client.answer(&first.json()["id"], json!({"action": "decline"})).await;
    assert_eq!(tool_text(&events.message().await), "No name given (decline).");
}

#[tokio::test]
async fn confirm_twice_asks_twice_in_sequence() {
    let (_server, mut client) = session(DemoOptions::default()).await;
    let (_, mut events) = client.call_tool("confirm_twice", json!({})).await;
    let first = events.message().await;
    client.answer(&first["id"], accept_name("Lin")).await;
    let second = events.message().await;
    assert_eq!(second["id"], 1);
    assert!(second["params"]["message"].as_str().unwrap().contains("Lin"));
    assert_eq!(second["params"]["requestedSchema"]["properties"]["ok"]["type"], "boolean");
    client.answer(&second["id"], json!({"action": "accept", "content": {"ok": true}})).await;
    assert_eq!(tool_text(&events.message().await), "Confirmed Lin: true");
}

#[tokio::test]
async fn summarize_samples_and_an_error_answer_fails_the_tool() {
    let (server, mut client) = session(DemoOptions::default()).await;
    let (_, mut events) = client.call_tool("summarize", json!({"text": "long story"})).await;
    let ask = events.message().await;
    assert_eq!(ask["method"], "sampling/createMessage");
    assert_eq!(ask["params"]["maxTokens"], 100);
    assert!(ask["params"]["systemPrompt"].is_string());
    let text = ask["params"]["messages"][0]["content"]["text"].as_str().unwrap();
    assert!(text.contains("long story"));
    let answer = json!({"role": "assistant", "model": "m1",
        "content": [{"type": "text", "text": "short"}]});
    client.answer(&ask["id"], answer).await;
    assert_eq!(tool_text(&events.message().await), "Summary: short (model m1)");

    let (_, mut events) = client.call_tool("summarize", json!({"text": "again"})).await;
    let ask = events.message().await;
    let refusal = json!({"jsonrpc": "2.0", "id": ask["id"],
        "error": {"code": -1, "message": "User rejected sampling request"}});
    client.post(&refusal).await;
    let reply = events.message().await;
    assert_eq!(reply["result"]["isError"], true);
    let text = tool_text(&reply);
    assert!(text.contains("sampling/createMessage") && text.contains("User rejected"), "{text}");
    assert_eq!(server.stats.errors(), 1);
}

#[tokio::test]
async fn list_roots_goes_out_on_the_get_stream_once_one_opens() {
    let (server, mut client) = session(DemoOptions::default()).await;
    let (_, mut call) = client.call_tool("list_roots", json!({})).await;
    call.event().await; // priming
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(server.stats.requests_sent(), 0, "roots/list waits for a GET stream");
    let mut standalone = Events::new(client.get_stream().await);
    let priming = standalone.event().await;
    assert!(priming.id.is_some() && priming.data.is_empty());
    let ask = standalone.message().await;
    assert_eq!(ask["method"], "roots/list");
    let roots = json!({"roots": [{"uri": "file:///a"}, {"uri": "file:///b", "name": "b"}]});
    client.answer(&ask["id"], roots).await;
    assert_eq!(tool_text(&call.message().await), "Roots: file:///a, file:///b");
}

#[tokio::test]
async fn ask_three_has_three_requests_outstanding_before_any_answer() {
    let (server, mut client) = session(DemoOptions::default()).await;
    let mut standalone = Events::new(client.get_stream().await);
    let (_, mut call) = client.call_tool("ask_three", json!({})).await;
    let first = call.message().await;
    let second = call.message().await;
    let roots = standalone.message().await;
    assert_eq!(server.stats.outstanding(), 3);
    let mut methods = [first["method"].as_str().unwrap(), second["method"].as_str().unwrap()];
    methods.sort_unstable();
    assert_eq!(methods, ["elicitation/create", "sampling/createMessage"]);
    assert_eq!(roots["method"], "roots/list");
    for ask in [&first, &second] {
        let answer = match ask["method"].as_str() {
            Some("elicitation/create") => accept_name("Kim"),
            _ => {
                json!({"role": "assistant", "model": "m", "content": {"type": "text", "text": "s"}})
            }
        };
        client.answer(&ask["id"], answer).await;
    }
    client.answer(&roots["id"], json!({"roots": [{"uri": "file:///r"}]})).await;
    let text = tool_text(&call.message().await).to_owned();
    assert_eq!(text, "Name: Kim; Summary: s (model m); Roots: file:///r");
}

#[tokio::test]
async fn url_login_and_flaky_question_differ_on_every_run() {
    let (_server, mut client) = session(DemoOptions::default()).await;
    let mut seen = Vec::new();
    for _ in 0..2 {
        let (_, mut events) = client.call_tool("url_login", json!({})).await;
        let ask = events.message().await;
        assert_eq!(ask["params"]["mode"], "url");
        assert!(ask["params"]["url"].as_str().unwrap().starts_with("https://"));
        seen.push(ask["params"]["elicitationId"].clone());
        client.answer(&ask["id"], json!({"action": "accept"})).await;
        assert_eq!(tool_text(&events.message().await), "Logged in (accept)");
    }
    assert_ne!(seen[0], seen[1]);
    let mut messages = Vec::new();
    for _ in 0..3 {
        let (_, mut events) = client.call_tool("flaky_question", json!({})).await;
        let ask = events.message().await;
        messages.push(ask["params"]["message"].as_str().unwrap().to_owned());
        client.answer(&ask["id"], json!({"action": "cancel"})).await;
        events.message().await;
    }
    messages.dedup();
    assert!(messages.len() > 1, "three rolls were all equal: {messages:?}");
}

#[tokio::test]
async fn an_unanswered_request_times_out_into_an_error_result() {
    let options = DemoOptions { request_timeout: Duration::from_millis(200), ..DemoOptions::default() };
    let (server, mut client) = session(options).await;
    let (_, mut events) = client.call_tool("greet", json!({})).await;
    let ask = events.message().await;
    let reply = events.message().await;
    assert_eq!(reply["result"]["isError"], true);
    assert!(tool_text(&reply).contains("timed out"), "{reply}");
    client.answer(&ask["id"], accept_name("late")).await;
    assert_eq!(server.stats.unmatched_answers(), 1);
    assert_eq!(server.stats.outstanding(), 0);
}

#[tokio::test]
async fn the_prompt_and_the_resource_elicit_a_name() {
    let (_server, mut client) = session(DemoOptions::default()).await;
    let params = json!({"name": "greeting_prompt", "arguments": {"style": "pirate"}});
    let (_, response) = client.call("prompts/get", params).await;
    let mut events = Events::new(response);
    let ask = events.message().await;
    client.answer(&ask["id"], accept_name("Bo")).await;
    let reply = events.message().await;
    let text = &reply["result"]["messages"][0]["content"]["text"];
    assert_eq!(text, "Write a pirate greeting for Bo.");

    let (_, response) = client.call("resources/read", json!({"uri": "demo://profile"})).await;
    let mut events = Events::new(response);
    let ask = events.message().await;
    client.answer(&ask["id"], accept_name("Cy")).await;
    let reply = events.message().await;
    assert_eq!(reply["result"]["contents"][0]["text"], "Profile of Cy");

    let (_, response) = client.call("resources/read", json!({"uri": "demo://nothing"})).await;
    let reply = Events::new(response).message().await;
    assert_eq!(reply["error"]["code"], -32002);
}

#[tokio::test]
async fn roots_sync_after_initialized_goes_out_with_no_call_in_flight() {
    let options =
        DemoOptions { roots_after_initialized: Some(Duration::from_millis(10)), ..DemoOptions::default() };
    let (server, mut client) = session(options).await;
    let mut standalone = Events::new(client.get_stream().await);
    let sync = standalone.message().await;
    assert_eq!((sync["method"].as_str(), sync["id"].as_i64()), (Some("roots/list"), Some(0)));
    let refusal = json!({"jsonrpc": "2.0", "id": 0,
        "error": {"code": -32601, "message": "no call in flight"}});
    client.post(&refusal).await;
    assert_eq!(server.stats.errors(), 1);
    let (_, mut call) = client.call_tool("list_roots", json!({})).await;
    let ask = standalone.message().await;
    assert_eq!(ask["id"], 1);
    client.answer(&ask["id"], json!({"roots": []})).await;
    assert_eq!(tool_text(&call.message().await), "Roots: (none)");
}

#[tokio::test]
async fn call_streams_can_close_after_priming_and_be_resumed() {
    let options =
        DemoOptions { close_after_priming: Some(Duration::from_millis(25)), ..DemoOptions::default() };
    let (_server, mut client) = session(options).await;
    let (call_id, mut post) = client.call_tool("greet", json!({})).await;
    let priming = post.event().await;
    assert_eq!((priming.data.as_str(), priming.retry.as_deref()), ("", Some("25")));
    assert!(post.next().await.unwrap().is_none(), "the POST stream ends after priming");
    let last = priming.id.unwrap();
    let mut resumed = Events::new(client.resume(&last).await);
    let ask = resumed.message().await;
    assert_eq!(ask["method"], "elicitation/create");
    client.answer(&ask["id"], accept_name("Eve")).await;
    let reply = resumed.message().await;
    assert_eq!((reply["id"].as_i64(), tool_text(&reply)), (Some(call_id), "Hello, Eve!"));
    assert!(resumed.next().await.unwrap().is_none());

    let mut replay = Events::new(client.resume(&last).await);
    assert_eq!(replay.message().await["id"], ask["id"]);
    assert_eq!(replay.message().await["id"], call_id);
    assert!(replay.next().await.unwrap().is_none(), "a finished stream only replays");
    let unknown = client.resume("999-0").await;
    assert_eq!(unknown.status(), http::StatusCode::BAD_REQUEST);
}
