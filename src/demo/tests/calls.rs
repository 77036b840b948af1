//! Call lifecycle: plain answers, progress, crashes, cancellation, limits and shutdown.

use std::time::Duration;

use http::StatusCode;
use serde_json::json;

use super::client::{start, tool_text, TestClient, WAIT};
use crate::demo::DemoOptions;

async fn session(options: DemoOptions) -> (crate::demo::DemoHandle, TestClient) {
    let server = start(options);
    let (client, _) = TestClient::connect(server.url(), json!({}), "2025-11-25").await;
    (server, client)
}

#[tokio::test]
async fn echo_streams_a_primed_response() {
    let (server, mut client) = session(DemoOptions::default()).await;
    let (id, mut events) = client.call_tool("echo", json!({"message": "hi"})).await;
    let priming = events.event().await;
    assert!(priming.data.is_empty());
    let reply = events.event().await;
    assert!(reply.id.is_some());
    let reply = reply.json();
    assert_eq!((reply["id"].as_i64(), tool_text(&reply)), (Some(id), "Echo: hi"));
    assert!(events.next().await.unwrap().is_none());
    let (_, mut events) = client.call_tool("echo", json!({})).await;
    let reply = events.message().await;
    assert_eq!(reply["result"]["isError"], true);
    assert_eq!(server.stats.tool_calls("echo"), 2);
}

#[tokio::test]
async fn count_down_reports_progress_for_a_token() {
    let (_server, mut client) = session(DemoOptions::default()).await;
    let params = json!({"name": "count_down", "arguments": {"steps": 3, "delay_ms": 1},
        "_meta": {"progressToken": "tok"}});
    let (_, response) = client.call("tools/call", params).await;
    let mut events = super::client::Events::new(response);
    for step in 1..=3 {
        let note = events.message().await;
        assert_eq!(note["method"], "notifications/progress");
        assert_eq!(note["params"]["progressToken"], "tok");
        assert_eq!(note["params"]["progress"], json!(step));
        assert_eq!(note["params"]["total"], json!(3));
    }
    assert_eq!(tool_text(&events.message().await), "Done after 3 steps");
}

#[tokio::test]
async fn die_breaks_the_stream_without_a_response() {
    let (server, mut client) = session(DemoOptions::default()).await;
    let (_, mut events) = client.call_tool("die", json!({})).await;
    assert!(events.event().await.data.is_empty(), "priming comes first");
    assert!(events.next().await.is_err(), "the stream must break, not end cleanly");
    assert_eq!(server.stats.tool_calls("die"), 1);
    let (_, response) = client.call("ping", json!({})).await;
    assert_eq!(response.status(), StatusCode::OK, "the server survives");
}

#[tokio::test]
async fn cancellation_stops_a_hanging_call() {
    let (server, mut client) = session(DemoOptions::default()).await;
    let (id, mut events) = client.call_tool("hang", json!({})).await;
    events.event().await;
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": id, "reason": "test"}});
    assert_eq!(client.post(&cancel).await.status(), StatusCode::ACCEPTED);
    assert!(events.next().await.unwrap().is_none(), "no response after a cancel");
    assert_eq!((server.stats.cancellations(), server.stats.calls_stopped()), (1, 1));
    client.post(&cancel).await;
    assert_eq!((server.stats.cancellations(), server.stats.calls_stopped()), (2, 1));
}

#[tokio::test]
async fn calls_are_bounded_in_number() {
    // The default duration bound (minutes) keeps the first call running however slowly this
    // test is scheduled, so the second one always finds the session full.
    let options = DemoOptions { max_calls_per_session: 1, ..DemoOptions::default() };
    let (server, mut client) = session(options).await;
    let (_, mut events) = client.call_tool("hang", json!({})).await;
    assert!(events.event().await.data.is_empty(), "the first call is running");
    let (_, busy) = client.call("tools/call", json!({"name": "echo", "arguments": {"message": "x"}})).await;
    assert_eq!(busy.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(server.stats.tool_calls("echo"), 0, "the refused call never ran");
}

#[tokio::test]
async fn calls_are_bounded_in_time() {
    // `hang` never ends by itself: whenever the bound fires, this error is the only outcome.
    let options = DemoOptions { max_call_duration: Duration::from_millis(100), ..DemoOptions::default() };
    let (_server, mut client) = session(options).await;
    let (_, mut events) = client.call_tool("hang", json!({})).await;
    let reply = events.message().await;
    assert_eq!(reply["error"]["code"], -32001);
}

#[tokio::test]
async fn delete_and_shutdown_end_running_calls() {
    let (server, mut client) = session(DemoOptions::default()).await;
    let (_, mut events) = client.call_tool("hang", json!({})).await;
    events.event().await;
    assert_eq!(client.delete().await.status(), StatusCode::OK);
    assert!(events.next().await.unwrap().is_none());

    let (mut client, _) = TestClient::connect(server.url(), json!({}), "2025-11-25").await;
    let (_, mut events) = client.call_tool("hang", json!({})).await;
    events.event().await;
    let stats = std::sync::Arc::clone(&server.stats);
    tokio::time::timeout(WAIT, server.shutdown()).await.unwrap().unwrap();
    assert!(events.next().await.unwrap().is_none());
    assert_eq!(stats.sessions_alive(), 0);
    assert!(!matches!(events.next().await, Ok(Some(_))));
}

#[tokio::test]
async fn dropping_the_handle_stops_running_calls() {
    let (server, mut client) = session(DemoOptions::default()).await;
    let (_, mut events) = client.call_tool("hang", json!({})).await;
    events.event().await;
    let stats = std::sync::Arc::clone(&server.stats);
    drop(server);
    let deadline = tokio::time::Instant::now() + WAIT;
    while stats.sessions_alive() > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(stats.sessions_alive(), 0);
    assert!(!matches!(events.next().await, Ok(Some(_))));
}
