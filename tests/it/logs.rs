//! Upstream log messages reach a 2026-07-28 request's SSE stream only when its `_meta` carries
//! `io.modelcontextprotocol/logLevel`, at or above that level, in the order the upstream sent
//! them and before the result; the gateway sets the upstream session's level with
//! `logging/setLevel` once per session and level, and only for a server that declared
//! `logging`. `notifications/elicitation/complete` never reaches the client.

use http::StatusCode;
use serde_json::{json, Value};

use super::chatty_upstream::{Chatty, LEVELS};
use crate::common::{Client, HarnessError, Setup, TestResult};

const LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";

/// The events of a streamed reply other than the last (the response).
fn notes(events: &[Value]) -> TestResult<&[Value]> {
    match events.split_last() {
        Some((last, notes)) if last.get("id").is_some() => Ok(notes),
        _ => Err(HarnessError::Unexpected(format!("no response ends the stream: {events:?}"))),
    }
}

/// A compact view of each note: `progress:<n>` or `log:<level>`; anything else verbatim.
fn shape(notes: &[Value]) -> Vec<String> {
    notes
        .iter()
        .map(|n| match n["method"].as_str() {
            Some("notifications/progress") => format!("progress:{}", n["params"]["progress"]),
            Some("notifications/message") => format!("log:{}", n["params"]["level"].as_str().unwrap_or("?")),
            _ => n.to_string(),
        })
        .collect()
}

async fn burst(
    client: &Client,
    level: Option<&str>,
    token: Option<Value>,
) -> TestResult<crate::common::Reply> {
    let mut call = client.call_tool("log_burst", json!({}));
    if let Some(level) = level {
        call = call.meta(LOG_LEVEL, json!(level));
    }
    if let Some(token) = token {
        call = call.progress(token);
    }
    call.send().await
}

#[tokio::test]
async fn a_warning_level_sees_warning_and_above_in_order_before_the_result() -> TestResult {
    let upstream = Chatty::spawn(true).await?;
    let (gateway, client) = Setup::new().attach_url(&upstream.url()).await?;
    let reply = burst(&client, Some("warning"), None).await?;
    assert_eq!(reply.content_type, "text/event-stream");
    let notes = notes(&reply.events)?;
    assert_eq!(shape(notes), ["log:warning", "log:error", "log:critical", "log:alert", "log:emergency"]);
    assert_eq!(
        notes[0],
        json!({"jsonrpc": "2.0", "method": "notifications/message",
               "params": {"level": "warning", "logger": "chatty", "data": "warning message"}})
    );
    assert_eq!(reply.text()?, "burst done");
    gateway.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn logs_and_progress_keep_the_upstream_order() -> TestResult {
    let upstream = Chatty::spawn(true).await?;
    let (gateway, client) = Setup::new().attach_url(&upstream.url()).await?;
    let reply = burst(&client, Some("error"), Some(json!("tok"))).await?;
    let notes = notes(&reply.events)?;
    assert_eq!(
        shape(notes),
        ["progress:1", "log:error", "log:critical", "log:alert", "log:emergency", "progress:2"]
    );
    assert!(notes.iter().all(|n| n["method"] != "notifications/elicitation/complete"));
    gateway.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_debug_level_sees_every_level_but_never_elicitation_complete() -> TestResult {
    let upstream = Chatty::spawn(true).await?;
    let (gateway, client) = Setup::new().attach_url(&upstream.url()).await?;
    let reply = burst(&client, Some("debug"), None).await?;
    let wanted: Vec<String> = LEVELS.iter().map(|l| format!("log:{l}")).collect();
    assert_eq!(shape(notes(&reply.events)?), wanted);
    gateway.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_request_without_a_level_sees_no_log() -> TestResult {
    let upstream = Chatty::spawn(true).await?;
    let (gateway, client) = Setup::new().attach_url(&upstream.url()).await?;
    // With a progress token the reply streams: progress only.
    let reply = burst(&client, None, Some(json!(5))).await?;
    assert_eq!(shape(notes(&reply.events)?), ["progress:1", "progress:2"]);
    // Without one it is plain JSON: nothing to stream.
    let reply = burst(&client, None, None).await?;
    assert_eq!(reply.content_type, "application/json");
    assert_eq!(reply.text()?, "burst done");
    assert!(upstream.seen.set_levels().is_empty(), "{:?}", upstream.seen.set_levels());
    gateway.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn set_level_is_sent_once_per_session_and_level() -> TestResult {
    let upstream = Chatty::spawn(true).await?;
    let (gateway, client) = Setup::new().attach_url(&upstream.url()).await?;
    for _ in 0..3 {
        burst(&client, Some("warning"), None).await?;
    }
    burst(&client, None, None).await?;
    burst(&client, Some("debug"), None).await?;
    burst(&client, Some("debug"), None).await?;
    let reply = burst(&client, Some("warning"), None).await?;
    assert_eq!(shape(notes(&reply.events)?).len(), 5, "the session is back at warning");
    let sent = upstream.seen.set_levels();
    let levels: Vec<&str> = sent.iter().map(|(_, l)| l.as_str()).collect();
    assert_eq!(levels, ["warning", "debug", "warning"], "{sent:?}");
    // Serial calls of one client reuse one pooled session.
    assert!(sent.iter().all(|(s, _)| *s == sent[0].0), "{sent:?}");
    assert_eq!(upstream.seen.calls_of("log_burst"), 7);
    gateway.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_server_without_logging_is_never_sent_set_level() -> TestResult {
    let upstream = Chatty::spawn(false).await?;
    let (gateway, client) = Setup::new().attach_url(&upstream.url()).await?;
    let reply = burst(&client, Some("critical"), None).await?;
    // Its messages are still filtered by the request's level.
    assert_eq!(shape(notes(&reply.events)?), ["log:critical", "log:alert", "log:emergency"]);
    assert!(upstream.seen.set_levels().is_empty());
    gateway.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn an_unknown_level_is_invalid_params() -> TestResult {
    let upstream = Chatty::spawn(true).await?;
    let (gateway, client) = Setup::new().attach_url(&upstream.url()).await?;
    for level in [json!("verbose"), json!("WARNING"), json!(4)] {
        let reply = client.call_tool("log_burst", json!({})).meta(LOG_LEVEL, level.clone()).send().await?;
        let message = reply.expect_error(StatusCode::BAD_REQUEST, -32602)?;
        assert!(message.contains(LOG_LEVEL), "{level}: {message}");
    }
    assert_eq!(upstream.seen.calls_of("log_burst"), 0);
    gateway.shutdown().await;
    Ok(())
}
