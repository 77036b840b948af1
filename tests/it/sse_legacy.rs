//! The deprecated HTTP+SSE upstream against a scripted server: a plain call and a list on a
//! 2024-11-05 server, an elicitation round trip, a stream dropped mid-call (a clear 502, then a
//! new stream serves the next call), an endpoint on another origin refused, and a call whose
//! client left never keeps its POST open upstream.

use std::net::SocketAddr;

use http::StatusCode;
use serde_json::json;

use super::form_only;
use crate::common::sse_legacy::{same_origin, SseLegacy};
use crate::common::{bounded, eventually, TestResult};

/// Another origin: same port, another host name.
fn elsewhere(addr: SocketAddr, session: u64) -> String {
    format!("http://localhost:{}/messages?session={session}", addr.port())
}

#[tokio::test]
async fn a_2024_11_05_server_serves_a_plain_call_and_a_list() -> TestResult {
    let server = SseLegacy::spawn("2024-11-05", same_origin).await?;
    let (gateway, client) = server.gateway().await?;
    let reply = client.call_tool("echo", json!({"message": "over SSE"})).send().await?;
    assert_eq!(reply.text()?, "Echo: over SSE");
    let list = client.request("tools/list").send().await?;
    assert_eq!(list.result()?["tools"].as_array().map(Vec::len), Some(8), "{}", list.body);
    bounded("the gateway to drain", gateway.shutdown()).await
}

#[tokio::test]
async fn elicitation_round_trip_over_sse() -> TestResult {
    // 2024-11-05 has no elicitation: the server speaks a later revision over the same transport.
    let server = SseLegacy::spawn("2025-06-18", same_origin).await?;
    let (gateway, client) = server.gateway().await?;
    let call = || client.call_tool("greet", json!({})).caps(form_only());
    let (requests, state) = call().send().await?.input_required()?;
    let (key, question) = requests.iter().next().map(|(k, q)| (k.clone(), q.clone())).unwrap_or_default();
    assert_eq!(question["params"]["message"], "What is your name?");
    let answers = json!({ key: {"action": "accept", "content": {"name": "Ada"}} });
    let done = call().state(&state).responses(answers).send().await?;
    assert_eq!(done.text()?, "Hello, Ada!");
    bounded("the gateway to drain", gateway.shutdown()).await
}

#[tokio::test]
async fn a_stream_dropped_mid_call_is_a_clear_502_and_a_new_stream_serves_the_next_call() -> TestResult {
    let server = SseLegacy::spawn("2024-11-05", same_origin).await?;
    let (gateway, client) = server.gateway().await?;
    let first = client.call_tool("stream", json!({})).send().await?.text()?;
    let reply = client.call_tool("drop", json!({})).send().await?;
    let message = reply.expect_error(StatusCode::BAD_GATEWAY, -32603)?;
    assert_eq!(message, "upstream server unavailable: its event stream ended");
    let next = client.call_tool("stream", json!({})).send().await?.text()?;
    assert_ne!(first, next, "a new stream serves the call after the drop");
    assert_eq!(client.call_tool("echo", json!({"message": "again"})).send().await?.text()?, "Echo: again");
    bounded("the gateway to drain", gateway.shutdown()).await
}

#[tokio::test]
async fn an_endpoint_on_another_origin_is_refused() -> TestResult {
    let server = SseLegacy::spawn("2024-11-05", elsewhere).await?;
    let (gateway, client) = server.gateway_unready().await?;
    let reply = client.call_tool("echo", json!({"message": "x"})).send().await?;
    let message = reply.expect_error(StatusCode::BAD_GATEWAY, -32603)?;
    assert!(message.contains("message endpoint on another origin"), "{message}");
    assert!(!gateway.ready.is_ready());
    bounded("the gateway to drain", gateway.shutdown()).await
}

#[tokio::test]
async fn a_call_whose_client_left_closes_its_post_upstream() -> TestResult {
    let server = SseLegacy::spawn("2025-06-18", same_origin).await?;
    // An upstream request timeout longer than any wait of the test: only the call's end may
    // close the POST.
    let (gateway, client) = server.gateway_timing_out_after(600_000).await?;
    eventually("the SSE upstream to answer initialize", || gateway.ready.is_ready()).await?;
    // The server holds the call's POST open without answering; the client gives up on it.
    let call = tokio::spawn(async move { client.call_tool("hold_post", json!({})).send().await.map(|_| ()) });
    eventually("the call's POST to be held upstream", || server.held_posts() == 1).await?;
    call.abort();
    // Dropped with its client's request, the call closes its POST instead of leaving it open
    // until the upstream request timeout.
    eventually("the held POST to be closed", || server.held_posts() == 0).await?;
    bounded("the gateway to drain", gateway.shutdown()).await
}

/// An event stream lives as long as its session: one whose `initialize` failed is closed at
/// once, and an open session's closes when the gateway shuts down.
#[tokio::test]
async fn a_sessions_event_stream_is_closed_with_it() -> TestResult {
    let refusing = SseLegacy::spawn("1999-01-01", same_origin).await?;
    let (gateway, client) = refusing.gateway_unready().await?;
    let reply = client.call_tool("echo", json!({"message": "x"})).send().await?;
    let message = reply.expect_error(StatusCode::BAD_GATEWAY, -32603)?;
    assert!(refusing.streams_opened() >= 1, "{message}");
    eventually("the failed session's stream to close", || refusing.open_streams() == 0).await?;
    bounded("the gateway to drain", gateway.shutdown()).await?;

    let server = SseLegacy::spawn("2024-11-05", same_origin).await?;
    let (gateway, client) = server.gateway().await?;
    assert_eq!(client.call_tool("echo", json!({"message": "x"})).send().await?.text()?, "Echo: x");
    assert!(server.open_streams() >= 1, "the session's stream is open");
    bounded("the gateway to drain", gateway.shutdown()).await?;
    eventually("the stream to close with its session", || server.open_streams() == 0).await
}
