//! The stdio front: the real binary as `mrtr-gateway stdio --upstream <demo>`, driven over its
//! pipes. Discovery, lists, a plain call, a full MRTR round trip, progress before the result,
//! out-of-order responses, cancellation, a malformed line, `subscriptions/listen`, and a clean
//! exit at the end of stdin, which cancels a running task upstream (in front of the scripted
//! task server, `tests/fixtures/task_server.py`). Every stdout line of every test must parse as JSON-RPC (see `StdioFront::next`).

use mrtr_gateway::demo::{self, DemoHandle, DemoOptions};
use serde_json::{json, Value};

use super::form_only;
use super::tasks::with_extension;
use crate::common::stdio::serial;
use crate::common::stdio_front::{request, StdioFront};
use crate::common::{answer_all, bounded, eventually, HarnessError, TestResult};

fn start() -> TestResult<(DemoHandle, StdioFront)> {
    let demo = demo::spawn_loopback(DemoOptions::default())?;
    let front = StdioFront::spawn(&demo.url())?;
    Ok((demo, front))
}

/// Closes stdin and checks the process wrote only JSON-RPC and exited cleanly.
async fn finish(demo: DemoHandle, front: StdioFront) -> TestResult<Vec<Value>> {
    let (rest, status) = front.close().await?;
    assert!(status.success(), "exit status {status}");
    bounded("the demo server to stop", demo.shutdown()).await??;
    Ok(rest)
}

fn text(response: &Value) -> TestResult<&str> {
    response["result"]["content"][0]["text"]
        .as_str()
        .ok_or_else(|| HarnessError::Unexpected(format!("no text in {response}")))
}

fn call(id: i64, tool: &str, arguments: Value, caps: Value) -> Value {
    request(json!(id), "tools/call", json!({"name": tool, "arguments": arguments}), caps)
}

#[tokio::test]
async fn discover_list_and_a_plain_call() -> TestResult {
    let _serial = serial().await;
    let (demo, mut front) = start()?;
    front.send(&request(json!(1), "server/discover", json!({}), json!({}))).await?;
    let (discovered, _) = front.response(&json!(1)).await?;
    assert_eq!(discovered["result"]["supportedVersions"], json!(["2026-07-28"]), "{discovered}");
    front.send(&request(json!("list"), "tools/list", json!({}), json!({}))).await?;
    let (list, _) = front.response(&json!("list")).await?;
    let tools = list["result"]["tools"].as_array().cloned().unwrap_or_default();
    assert!(tools.iter().any(|t| t["name"] == "echo"), "{list}");
    front.send(&call(2, "echo", json!({"message": "over stdio"}), json!({}))).await?;
    let (echoed, _) = front.response(&json!(2)).await?;
    assert_eq!(echoed["result"]["resultType"], "complete");
    assert_eq!(text(&echoed)?, "Echo: over stdio");
    assert!(finish(demo, front).await?.is_empty());
    Ok(())
}

#[tokio::test]
async fn an_mrtr_round_trip_completes() -> TestResult {
    let _serial = serial().await;
    let (demo, mut front) = start()?;
    front.send(&call(1, "greet", json!({}), form_only())).await?;
    let (asked, _) = front.response(&json!(1)).await?;
    let result = &asked["result"];
    assert_eq!(result["resultType"], "input_required", "{asked}");
    let requests = result["inputRequests"].as_object().cloned().unwrap_or_default();
    let state = result["requestState"].clone();
    let mut retry = call(2, "greet", json!({}), form_only());
    retry["params"]["inputResponses"] = answer_all(&requests);
    retry["params"]["requestState"] = state;
    front.send(&retry).await?;
    let (done, _) = front.response(&json!(2)).await?;
    assert_eq!(text(&done)?, "Hello, Ada!", "{done}");
    finish(demo, front).await?;
    Ok(())
}

#[tokio::test]
async fn progress_arrives_before_the_result() -> TestResult {
    let _serial = serial().await;
    let (demo, mut front) = start()?;
    let mut counted = call(5, "count_down", json!({"steps": 3, "delay_ms": 20}), json!({}));
    counted["params"]["_meta"]["progressToken"] = json!("tok");
    front.send(&counted).await?;
    let (done, notes) = front.response(&json!(5)).await?;
    assert_eq!(notes.len(), 3, "{notes:?}");
    for (step, note) in notes.iter().enumerate() {
        assert_eq!(note["method"], "notifications/progress");
        assert_eq!(note["params"]["progressToken"], "tok");
        assert_eq!(note["params"]["progress"], json!(step + 1));
    }
    assert_eq!(text(&done)?, "Done after 3 steps");
    finish(demo, front).await?;
    Ok(())
}

#[tokio::test]
async fn concurrent_responses_come_as_they_finish() -> TestResult {
    let _serial = serial().await;
    let (demo, mut front) = start()?;
    front.send(&call(1, "count_down", json!({"steps": 3, "delay_ms": 200}), json!({}))).await?;
    front.send(&call(2, "echo", json!({"message": "quick"}), json!({}))).await?;
    let first = front.next().await?;
    assert_eq!(first["id"], 2, "the quick call answers first: {first}");
    let (slow, _) = front.response(&json!(1)).await?;
    assert_eq!(text(&slow)?, "Done after 3 steps");
    finish(demo, front).await?;
    Ok(())
}

#[tokio::test]
async fn a_cancelled_request_is_stopped_upstream_and_never_answered() -> TestResult {
    let _serial = serial().await;
    let (demo, mut front) = start()?;
    let mut long = call(7, "count_down", json!({"steps": 50, "delay_ms": 50}), json!({}));
    long["params"]["_meta"]["progressToken"] = json!(1);
    front.send(&long).await?;
    let first = front.next().await?;
    assert_eq!(first["method"], "notifications/progress", "{first}");
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}});
    front.send(&cancel).await?;
    let stats = demo.stats.clone();
    eventually("the demo to stop the cancelled call", || stats.calls_stopped() >= 1).await?;
    front.send(&call(8, "echo", json!({"message": "after"}), json!({}))).await?;
    let (after, before) = front.response(&json!(8)).await?;
    assert_eq!(text(&after)?, "Echo: after");
    let rest = finish(demo, front).await?;
    let answered = before.iter().chain(&rest).any(|m| m["id"] == 7);
    assert!(!answered, "no response for the cancelled request: {before:?} {rest:?}");
    Ok(())
}

#[tokio::test]
async fn a_malformed_line_is_a_parse_error_and_serving_goes_on() -> TestResult {
    let _serial = serial().await;
    let (demo, mut front) = start()?;
    front.send_line("{this is not json").await?;
    let error = front.next().await?;
    assert_eq!(error["id"], Value::Null, "{error}");
    assert_eq!(error["error"]["code"], -32700, "{error}");
    front.send(&call(1, "echo", json!({"message": "still here"}), json!({}))).await?;
    let (echoed, _) = front.response(&json!(1)).await?;
    assert_eq!(text(&echoed)?, "Echo: still here");
    finish(demo, front).await?;
    Ok(())
}

#[tokio::test]
async fn a_line_over_the_body_limit_is_an_invalid_request_and_serving_goes_on() -> TestResult {
    const LIMIT: usize = 4096;
    let _serial = serial().await;
    let demo = demo::spawn_loopback(DemoOptions::default())?;
    let limit = LIMIT.to_string();
    let env = [("MRTR_GATEWAY__FRONT__MAX_BODY_BYTES", limit.as_str())];
    let mut front = StdioFront::spawn_with(&["--upstream", &demo.url()], &env)?;
    // A well-formed request, only too long: its id cannot be trusted unread, so it is null.
    let long = call(1, "echo", json!({"message": "x".repeat(2 * LIMIT)}), json!({}));
    front.send(&long).await?;
    let refused = front.next().await?;
    assert_eq!(
        refused,
        json!({"jsonrpc": "2.0", "id": null,
               "error": {"code": -32600, "message": format!("request body larger than {LIMIT} bytes")}})
    );
    assert_eq!(demo.stats.tool_calls("echo"), 0, "nothing of it reached the upstream");
    // The rest of the long line is skipped: the next line is a request of its own.
    front.send(&call(2, "echo", json!({"message": "after the long line"}), json!({}))).await?;
    let (echoed, before) = front.response(&json!(2)).await?;
    assert_eq!(text(&echoed)?, "Echo: after the long line");
    assert!(before.is_empty(), "nothing else was written: {before:?}");
    finish(demo, front).await?;
    Ok(())
}

#[tokio::test]
async fn the_end_of_stdin_lets_in_flight_requests_finish() -> TestResult {
    let _serial = serial().await;
    let (demo, mut front) = start()?;
    front.send(&call(3, "count_down", json!({"steps": 3, "delay_ms": 100}), json!({}))).await?;
    // Closing stdin at once: the call is in flight, and its answer must still come.
    let rest = finish(demo, front).await?;
    let done = rest.iter().find(|m| m["id"] == 3).cloned().unwrap_or_default();
    assert_eq!(text(&done)?, "Done after 3 steps", "{rest:?}");
    Ok(())
}

#[tokio::test]
async fn a_cancelled_plain_json_request_is_stopped_upstream_too() -> TestResult {
    let _serial = serial().await;
    let (demo, mut front) = start()?;
    front.send(&call(4, "count_down", json!({"steps": 50, "delay_ms": 50}), json!({}))).await?;
    let stats = demo.stats.clone();
    eventually("the call to reach the demo", || stats.tool_calls("count_down") >= 1).await?;
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 4}});
    front.send(&cancel).await?;
    eventually("the demo to stop the cancelled call", || stats.calls_stopped() >= 1).await?;
    let rest = finish(demo, front).await?;
    assert!(rest.is_empty(), "no response for the cancelled request: {rest:?}");
    Ok(())
}

const COUNTER: &str = "demo://counter";
const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

fn listen(id: &str) -> Value {
    request(
        json!(id),
        "subscriptions/listen",
        json!({"notifications": {"resourceSubscriptions": [COUNTER]}}),
        json!({}),
    )
}

#[tokio::test]
async fn a_listen_request_streams_its_notifications_until_the_client_cancels_it() -> TestResult {
    let _serial = serial().await;
    let (demo, mut front) = start()?;
    front.send(&listen("listen:1")).await?;
    let ack = front.next().await?;
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged", "{ack}");
    assert_eq!(ack["params"]["notifications"], json!({"resourceSubscriptions": [COUNTER]}));
    assert_eq!(ack["params"]["_meta"][SUBSCRIPTION_ID], "listen:1");
    front.send(&call(2, "bump_counter", json!({}), json!({}))).await?;
    let (bumped, before) = front.response(&json!(2)).await?;
    assert!(text(&bumped)?.starts_with("demo://counter is now"), "{bumped}");
    let mut notes = before;
    if notes.is_empty() {
        notes.push(front.next().await?);
    }
    assert_eq!(
        notes,
        [json!({"jsonrpc": "2.0", "method": "notifications/resources/updated",
                "params": {"uri": COUNTER, "_meta": {SUBSCRIPTION_ID: "listen:1"}}})]
    );
    let cancel =
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "listen:1"}});
    front.send(&cancel).await?;
    let stats = demo.stats.clone();
    eventually("the upstream subscription to end", || stats.unsubscribes() >= 1).await?;
    let rest = finish(demo, front).await?;
    assert!(rest.is_empty(), "nothing more for a cancelled listen request: {rest:?}");
    Ok(())
}

#[tokio::test]
async fn the_end_of_stdin_ends_a_listen_request_with_the_graceful_result() -> TestResult {
    let _serial = serial().await;
    let (demo, mut front) = start()?;
    front.send(&listen("listen:9")).await?;
    assert_eq!(front.next().await?["method"], "notifications/subscriptions/acknowledged");
    // Had the drain waited for the stream instead, its end would have aborted it unanswered.
    let rest = finish(demo, front).await?;
    assert_eq!(
        rest,
        [json!({"jsonrpc": "2.0", "id": "listen:9",
                "result": {"resultType": "complete", "_meta": {SUBSCRIPTION_ID: "listen:9"}}})]
    );
    Ok(())
}

#[tokio::test]
async fn the_end_of_stdin_cancels_a_running_task_upstream() -> TestResult {
    let _serial = serial().await;
    let dir = tempfile::tempdir()?;
    let log = dir.path().join("task-server.log");
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/task_server.py");
    let command = format!("python3 {fixture} --log {}", log.display());
    let mut front = StdioFront::spawn_with(&["--upstream-command", &command], &[])?;
    front.send(&call(1, "slow_job", json!({}), with_extension())).await?;
    let (created, _) = front.response(&json!(1)).await?;
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let (rest, status) = front.close().await?;
    assert!(status.success() && rest.is_empty(), "exit status {status}, then {rest:?}");
    let events = std::fs::read_to_string(&log)?;
    assert!(events.lines().any(|l| l == "cancel slow_job"), "the task was cancelled upstream: {events}");
    Ok(())
}
