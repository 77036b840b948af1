//! Legacy clients in front of a stdio or HTTP+SSE upstream: each client session gets an
//! upstream session of its own through the seam (a child process, an SSE stream), its server
//! requests relayed in-band on the POST's stream (and on its GET stream when no call is open),
//! batches taken apart, ended by DELETE or the idle limit, and bound to the replica that holds
//! it.

use http::StatusCode;
use mrtr_gateway::mrtr::{KeyRing, KeySecret, Reach, SessionSealer};
use serde_json::{json, Value};

use super::{everything, form_only};
use crate::common::harness::metric;
use crate::common::legacy_client::{assert_ends_timed_out, LegacyClient};
use crate::common::sse_legacy::{same_origin, SseLegacy};
use crate::common::stdio::{alive, serial, StdioGateway};
use crate::common::{bounded, eventually, HarnessError, TestResult};

const SESSIONS: &str = "mrtr_gateway_legacy_sessions";

fn text_of(response: &Value) -> String {
    response["result"]["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

fn sealer() -> SessionSealer {
    let secret = KeySecret::new([0x11; 32], Some("k1".to_owned())).expect("key");
    SessionSealer::new(KeyRing::new(vec![secret]).expect("ring"))
}

async fn pid_of(client: &LegacyClient) -> TestResult<u32> {
    let text = text_of(&client.call_tool("pid", json!({})).await?);
    text.parse().map_err(|_| HarnessError::Unexpected(format!("pid {text:?}")))
}

#[tokio::test]
async fn a_stdio_session_has_its_own_process_until_deleted() -> TestResult {
    let _serial = serial().await;
    let gw = StdioGateway::start(&[], &[], &[]).await?;
    let mut client = LegacyClient::new(gw.gateway.url("/mcp"));
    let result = client.initialize(form_only()).await?;
    assert_eq!(result["serverInfo"]["name"], "stdio-fixture");
    let claims = sealer().open(client.session.as_deref().unwrap_or_default(), "anonymous").expect("opens");
    assert_eq!((claims.reach, claims.upstream), (Reach::Local, None));

    let greeting = client.call_tool("greet", json!({})).await?;
    assert_eq!(text_of(&greeting), "Hello, Ada!");
    let pid = pid_of(&client).await?;
    let modern_pid = gw.client.call_tool("pid", json!({})).send().await?.text()?;
    assert_ne!(modern_pid, pid.to_string(), "never a pooled process");

    assert_eq!(client.delete().await?, StatusCode::OK);
    assert!(!alive(pid), "the DELETE is answered once the session's process is stopped and reaped");
    assert_eq!(metric(&gw.gateway, SESSIONS), 0.0);
    let after = client.post(&client.request_body("tools/list", json!({}))).await?;
    assert_eq!(after.status, StatusCode::NOT_FOUND);
    gw.stop().await
}

#[tokio::test]
async fn an_idle_stdio_session_stops_its_process() -> TestResult {
    let _serial = serial().await;
    // The extra lines open a `[legacy]` section after `[mrtr]`.
    let gw = StdioGateway::start(&[], &[], &["[legacy]", "idle_secs = 1"]).await?;
    let mut client = LegacyClient::new(gw.gateway.url("/mcp"));
    client.initialize(form_only()).await?;
    let pid = pid_of(&client).await?;
    eventually("the idle session's process to end", || !alive(pid)).await?;
    assert_eq!(metric(&gw.gateway, SESSIONS), 0.0);
    gw.stop().await
}

#[tokio::test]
async fn another_replica_cannot_relay_a_stdio_session() -> TestResult {
    let _serial = serial().await;
    let (a, b) = (StdioGateway::start(&[], &[], &[]).await?, StdioGateway::start(&[], &[], &[]).await?);
    let mut client = LegacyClient::new(a.gateway.url("/mcp"));
    client.initialize(form_only()).await?;
    let elsewhere = client.at(b.gateway.url("/mcp"));
    let raw = elsewhere.post(&elsewhere.request_body("tools/list", json!({}))).await?;
    assert_eq!(raw.status, StatusCode::NOT_FOUND, "the process lives in the first replica");
    assert_eq!(
        text_of(&client.call_tool("echo", json!({"message": "still here"})).await?),
        "Echo: still here"
    );
    a.stop().await?;
    b.stop().await
}

#[tokio::test]
async fn an_http_sse_upstream_relays_elicitation_in_band() -> TestResult {
    let server = SseLegacy::spawn("2025-06-18", same_origin).await?;
    let (gateway, _) = server.gateway().await?;
    let mut client = LegacyClient::new(gateway.url("/mcp"));
    let result = client.initialize(form_only()).await?;
    assert_eq!(result["protocolVersion"], "2025-06-18");
    let greeting = client.call_tool("greet", json!({})).await?;
    assert_eq!(text_of(&greeting), "Hello, Ada!");
    assert_eq!(client.delete().await?, StatusCode::OK);
    bounded("the gateway to drain", gateway.shutdown()).await
}

#[tokio::test]
async fn a_dead_process_ends_its_session_and_the_client_starts_anew() -> TestResult {
    let _serial = serial().await;
    let gw = StdioGateway::start(&[], &[], &[]).await?;
    let mut client = LegacyClient::new(gw.gateway.url("/mcp"));
    client.initialize(form_only()).await?;
    let pid = pid_of(&client).await?;
    let pid_t = rustix::process::Pid::from_raw(i32::try_from(pid).unwrap_or(-1)).expect("a pid");
    rustix::process::kill_process(pid_t, rustix::process::Signal::KILL).expect("kill");
    eventually("the process to die", || !alive(pid)).await?;
    // The first request after the crash may still see it fail; the session is then gone.
    let mut status = StatusCode::OK;
    for _ in 0..3 {
        status = client.post(&client.request_body("tools/list", json!({}))).await?.status;
        if status == StatusCode::NOT_FOUND {
            break;
        }
    }
    assert_eq!(status, StatusCode::NOT_FOUND);
    client.session = None;
    client.initialize(form_only()).await?;
    assert_ne!(pid_of(&client).await?, pid);
    gw.stop().await
}

/// A gateway whose fixture logs its events to a file in `dir`, a legacy client's session on
/// it, and that file.
async fn logging_session(
    dir: &std::path::Path,
) -> TestResult<(StdioGateway, LegacyClient, std::path::PathBuf)> {
    let log = dir.join("events");
    let gw = StdioGateway::start(&["--log", log.to_str().unwrap_or_default()], &[], &[]).await?;
    let mut client = LegacyClient::new(gw.gateway.url("/mcp"));
    client.initialize(form_only()).await?;
    Ok((gw, client, log))
}

/// Calls `ask_after` (it answers, then asks for the roots with no call open, then logs), and
/// returns what the fixture learnt of the roots, read from its event log: the test makes no
/// call meanwhile, which the fixture's question would otherwise be attributed to.
async fn roots_asked_later(client: &LegacyClient, log: &std::path::Path) -> TestResult<Value> {
    assert_eq!(text_of(&client.call_tool("ask_after", json!({})).await?), "asked later");
    let learnt = || {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        text.lines().find_map(|l| l.strip_prefix("roots ").map(str::to_owned))
    };
    eventually("the fixture to learn something of the roots", || learnt().is_some()).await?;
    Ok(serde_json::from_str(&learnt().unwrap_or_default())?)
}

#[tokio::test]
async fn the_get_stream_carries_what_no_call_can_take() -> TestResult {
    let _serial = serial().await;
    let dir = tempfile::tempdir()?;
    let (gw, client, log) = logging_session(dir.path()).await?;
    let (get, messages) = client.open_get_recording().await?;
    assert_eq!(get.status, StatusCode::OK);
    let seen = roots_asked_later(&client, &log).await?;
    assert_eq!(seen["roots"][0]["uri"], crate::common::answers::ROOT, "answered on the GET stream: {seen}");
    eventually("the log after the call to reach the GET stream", || {
        messages
            .lock()
            .iter()
            .any(|m| m["method"] == "notifications/message" && m["params"]["data"] == "roots learnt")
    })
    .await?;
    drop(get);
    gw.stop().await
}

#[tokio::test]
async fn without_a_get_stream_a_request_no_call_can_take_is_refused() -> TestResult {
    let _serial = serial().await;
    let dir = tempfile::tempdir()?;
    let (gw, client, log) = logging_session(dir.path()).await?;
    let seen = roots_asked_later(&client, &log).await?;
    assert!(seen.get("error").is_some(), "refused, never invented: {seen}");
    assert_eq!(client.answered.load(std::sync::atomic::Ordering::Relaxed), 0);
    gw.stop().await
}

/// A server that asks `roots/list` a moment after `notifications/initialized` asks it before it
/// reads the ping the gateway sent to settle the new session: the request is routed while no
/// call is open and refused (no GET stream), never put to the client's first call, though the
/// client declares roots and its call is sent while the server waits.
#[tokio::test]
async fn a_request_sent_just_after_initialize_is_not_put_to_the_first_call() -> TestResult {
    let _serial = serial().await;
    let gw = StdioGateway::start(&["--roots-on-init", "--roots-delay-ms", "300"], &[], &[]).await?;
    let mut client = LegacyClient::new(gw.gateway.url("/mcp"));
    client.initialize(everything()).await?;
    assert_eq!(text_of(&client.call_tool("echo", json!({"message": "first"})).await?), "Echo: first");
    let seen: Value = serde_json::from_str(&text_of(&client.call_tool("roots_seen", json!({})).await?))?;
    assert!(seen.get("error").is_some(), "refused, never put to the call: {seen}");
    assert_eq!(client.answered.load(std::sync::atomic::Ordering::Relaxed), 0);
    gw.stop().await
}

#[tokio::test]
async fn a_request_queued_for_a_get_stream_its_client_left_is_refused_upstream() -> TestResult {
    let _serial = serial().await;
    let dir = tempfile::tempdir()?;
    let (gw, client, log) = logging_session(dir.path()).await?;
    let unread = client.open_get_unread().await?;
    // With no call open, 30 notifications of 1 MB each, then a question, all for the GET
    // stream; its client reads none of them, so once the sockets and the stream's buffer are
    // full the relay waits on a notification, with the question queued behind it.
    let flood = json!({"notes": 30, "bytes": 1 << 20});
    assert_eq!(text_of(&client.call_tool("flood_then_ask", flood).await?), "flooded");
    let asked = || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        text.lines().find_map(|l| l.strip_prefix("asked ").map(str::to_owned))
    };
    eventually("the fixture to write its question", || asked().is_some()).await?;
    let id = asked().unwrap_or_default();
    assert!(!logged(&log, &format!("answer {id}")), "nothing answers it while the stream is open");
    // The client leaves: the question it never got is refused upstream, not left waiting.
    drop(unread);
    eventually("the queued question to be refused upstream", || logged(&log, &format!("answer {id} error")))
        .await?;
    assert_eq!(client.answered.load(std::sync::atomic::Ordering::Relaxed), 0);
    gw.stop().await
}

/// Whether the fixture's event log at `log` has a line starting with `prefix`.
fn logged(log: &std::path::Path, prefix: &str) -> bool {
    std::fs::read_to_string(log).unwrap_or_default().lines().any(|l| l.starts_with(prefix))
}

#[tokio::test]
async fn a_deleted_stdio_sessions_process_is_first_asked_to_stop_by_closing_its_stdin() -> TestResult {
    let _serial = serial().await;
    let dir = tempfile::tempdir()?;
    let (gw, client, log) = logging_session(dir.path()).await?;
    let pid = pid_of(&client).await?;
    assert_eq!(client.delete().await?, StatusCode::OK);
    // Answered once the process is reaped: it ended on its own, as a server does when its
    // stdin closes, never killed first.
    assert!(!alive(pid));
    assert!(logged(&log, &format!("stdin closed {pid}")), "{}", std::fs::read_to_string(&log)?);
    gw.stop().await
}

#[tokio::test]
async fn the_upstream_hears_notifications_initialized_once_per_session() -> TestResult {
    let _serial = serial().await;
    let dir = tempfile::tempdir()?;
    // The seam sent it when it opened the session; the client's own is not sent again.
    let (gw, client, log) = logging_session(dir.path()).await?;
    let pid = pid_of(&client).await?;
    let text = std::fs::read_to_string(&log)?;
    let initialized = text.lines().filter(|l| *l == format!("initialized {pid}")).count();
    assert_eq!(initialized, 1, "{text}");
    gw.stop().await
}

#[tokio::test]
async fn a_legacy_clients_cancel_reaches_the_call_upstream() -> TestResult {
    let _serial = serial().await;
    let dir = tempfile::tempdir()?;
    let (gw, client, log) = logging_session(dir.path()).await?;
    let pid = pid_of(&client).await?;
    // `greet` asks a question that nobody answers: the POST stays open until it is cancelled.
    let mut call = client.request_body("tools/call", json!({"name": "greet", "arguments": {}}));
    // An id no upstream id can equal: the cancel reaches the call only if the seam maps it.
    call["id"] = json!("held-call");
    let call_id = call["id"].clone();
    let held = tokio::spawn({
        let client = client.clone();
        async move { client.post(&call).await }
    });
    eventually("the call to reach the fixture", || logged(&log, &format!("call {pid} greet"))).await?;
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": call_id, "reason": "changed my mind"}});
    assert_eq!(client.post(&cancel).await?.status, StatusCode::ACCEPTED);
    let cancelled = format!("cancelled {pid} greet: changed my mind");
    eventually("the cancel to reach the call upstream", || logged(&log, &cancelled)).await?;
    held.abort();
    gw.stop().await
}

#[tokio::test]
async fn a_stdio_call_left_unanswered_ends_with_an_error_naming_the_timeout() -> TestResult {
    let _serial = serial().await;
    let gw = StdioGateway::start(&[], &["request_timeout_ms = 500"], &[]).await?;
    let mut client = LegacyClient::new(gw.gateway.url("/mcp"));
    client.initialize(form_only()).await?;
    // `greet` asks a question this client never answers.
    let call = client.request_body("tools/call", json!({"name": "greet", "arguments": {}}));
    let held = client.post(&call).await?;
    assert_eq!(held.status, StatusCode::OK);
    assert_eq!(held.messages[0]["method"], "elicitation/create", "{:?}", held.messages);
    assert_ends_timed_out(&held, &call, "500ms");
    gw.stop().await
}

#[tokio::test]
async fn a_batch_is_taken_apart_and_its_responses_share_one_stream() -> TestResult {
    let _serial = serial().await;
    let gw = StdioGateway::start(&[], &[], &[]).await?;
    let mut client = LegacyClient::new(gw.gateway.url("/mcp"));
    client.initialize(form_only()).await?;
    let echo = |id: i64, message: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "echo", "arguments": {"message": message}}})
    };
    let note = json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"});
    let batch = json!([echo(101, "one"), note, echo(102, "two")]);
    let reply = client.post(&batch).await?;
    assert_eq!(reply.status, StatusCode::OK);
    let mut texts: Vec<(i64, String)> =
        reply.messages.iter().map(|m| (m["id"].as_i64().unwrap_or_default(), text_of(m))).collect();
    texts.sort();
    assert_eq!(texts, [(101, "Echo: one".to_owned()), (102, "Echo: two".to_owned())]);
    let only_notes = client.post(&json!([note])).await?;
    assert_eq!(only_notes.status, StatusCode::ACCEPTED);
    let empty = client.post(&json!([])).await?;
    assert_eq!(empty.status, StatusCode::BAD_REQUEST);
    gw.stop().await
}
