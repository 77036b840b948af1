//! How a `subscriptions/listen` stream ends, and the listen requests refused before one opens:
//! the upstream session lost (forgotten by an HTTP server, or a stdio process killed: the
//! stream ends without the graceful result; the stdio front writes `notifications/cancelled`
//! naming the request), a client that stops
//! reading (its stream alone is ended; the others go on), `subscriptions.max_listeners` (503),
//! `subscriptions.max_uris` (400, nothing subscribed upstream), and the authorization rules
//! (a URI the principal may not read is left out of the acknowledgement and never subscribed).

use std::time::Duration;

use http::StatusCode;
use mrtr_gateway::demo::{self, DemoOptions};
use rustix::process::{kill_process, Pid, Signal};
use serde_json::{json, Value};

use super::chatty_upstream::Chatty;
use super::legacy_rules::{token, with_jwt};
use super::subscriptions::{listen_call, Events};
use crate::common::harness::metric;
use crate::common::stdio::{fixture_command_line, serial, StdioGateway};
use crate::common::stdio_front::{request, StdioFront};
use crate::common::{bounded, bounded_for, eventually, HarnessError, Setup, TestResult};

const COUNTER: &str = "demo://counter";
const PROFILE: &str = "demo://profile";
const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

fn ended(reason: &str) -> String {
    format!("mrtr_gateway_listen_streams_ended_total{{reason=\"{reason}\"}}")
}

fn refused(reason: &str) -> String {
    format!("mrtr_gateway_listen_refused_total{{reason=\"{reason}\"}}")
}

/// Reads `events` to its end; fails on a JSON-RPC response (the graceful result) among them.
async fn rest_without_a_result(events: &mut Events) -> TestResult<Vec<Value>> {
    let mut rest = Vec::new();
    while let Some(message) = events.next().await? {
        if message.get("result").is_some() || message.get("id").is_some() {
            return Err(HarnessError::Unexpected(format!("a response on a dropped stream: {message}")));
        }
        rest.push(message);
    }
    Ok(rest)
}

/// Longest the gateway may take to notice a lost listen session: its health check runs every
/// 5 s, after a failed reconnection of the session's GET stream (the first after 400 ms).
const LOSS_WAIT: Duration = Duration::from_secs(30);

#[tokio::test]
async fn a_forgotten_upstream_session_ends_the_stream_without_the_graceful_result() -> TestResult {
    // The demo forgets a session idle for a second: the listening one (it only listens) too.
    let options = DemoOptions { session_idle_timeout: Duration::from_secs(1), ..DemoOptions::default() };
    let demo = demo::spawn_loopback(options)?;
    let (gateway, client) = Setup::new().attach(&demo).await?;
    let mut events = Events::open(&client, 3, json!({"resourceSubscriptions": [COUNTER]})).await?;
    assert_eq!(events.message().await?["method"], "notifications/subscriptions/acknowledged");
    let rest = bounded_for(LOSS_WAIT, "the stream to end", rest_without_a_result(&mut events)).await??;
    assert!(rest.is_empty(), "nothing after the acknowledgement: {rest:?}");
    assert_eq!(metric(&gateway, &ended("upstream_lost")), 1.0);
    assert_eq!(metric(&gateway, &ended("shutdown")), 0.0, "no graceful ending was counted");
    eventually("the stream to be released", || metric(&gateway, "mrtr_gateway_listen_streams") == 0.0)
        .await?;
    // Listening again opens a new upstream session.
    let mut again = Events::open(&client, 4, json!({"resourceSubscriptions": [COUNTER]})).await?;
    assert_eq!(
        again.message().await?["params"]["notifications"],
        json!({"resourceSubscriptions": [COUNTER]})
    );
    drop(again);
    bounded("the gateway to drain", gateway.shutdown()).await?;
    bounded("the demo server to stop", demo.shutdown()).await??;
    Ok(())
}

/// The pid of the fixture process that serves calls: with `share_with_calls` (the default),
/// the listening one, lent to the key's calls.
fn pid_in(reply: &Value) -> TestResult<i32> {
    let text = reply.pointer("/result/content/0/text").and_then(Value::as_str).unwrap_or_default();
    text.parse().map_err(|_| HarnessError::Unexpected(format!("no pid in {reply}")))
}

fn sigkill(pid: i32) {
    let pid = Pid::from_raw(pid).expect("a real pid");
    kill_process(pid, Signal::KILL).expect("the fixture process can be killed");
}

#[tokio::test]
async fn a_killed_stdio_upstream_ends_the_stream_without_the_graceful_result() -> TestResult {
    let _serial = serial().await;
    let gw = StdioGateway::start(&["--subscriptions"], &[], &[]).await?;
    let mut events = Events::open(&gw.client, 7, json!({"resourceSubscriptions": ["file:///a"]})).await?;
    assert_eq!(
        events.message().await?["params"]["notifications"],
        json!({"resourceSubscriptions": ["file:///a"]})
    );
    let pid = gw.client.call_tool("pid", json!({})).send().await?;
    sigkill(pid_in(&pid.body)?);
    let rest = bounded_for(LOSS_WAIT, "the stream to end", rest_without_a_result(&mut events)).await??;
    assert!(rest.is_empty(), "nothing after the acknowledgement: {rest:?}");
    assert_eq!(metric(&gw.gateway, &ended("upstream_lost")), 1.0);
    gw.stop().await
}

#[tokio::test]
async fn over_the_stdio_front_a_lost_upstream_cancels_the_listen_request() -> TestResult {
    let _serial = serial().await;
    let command = fixture_command_line(&["--subscriptions"]);
    let mut front = StdioFront::spawn_with(&["--upstream-command", &command], &[])?;
    let filter = json!({"notifications": {"resourceSubscriptions": ["file:///a"]}});
    front.send(&request(json!("listen:4"), "subscriptions/listen", filter, json!({}))).await?;
    assert_eq!(front.next().await?["method"], "notifications/subscriptions/acknowledged");
    front.send(&request(json!(5), "tools/call", json!({"name": "pid", "arguments": {}}), json!({}))).await?;
    let (pid, _) = front.response(&json!(5)).await?;
    sigkill(pid_in(&pid)?);
    // The transport's one server-sent use of the notification: listen again.
    let cancelled = bounded_for(LOSS_WAIT, "the listen request to be cancelled", front.next()).await??;
    assert_eq!(cancelled["method"], "notifications/cancelled", "{cancelled}");
    assert_eq!(cancelled["params"]["requestId"], "listen:4");
    assert_eq!(cancelled["params"]["reason"], "the subscription ended: listen again");
    let (rest, status) = front.close().await?;
    assert!(rest.is_empty(), "no result for a cancelled listen request: {rest:?}");
    assert!(status.success(), "exit status {status}");
    Ok(())
}

#[tokio::test]
async fn a_client_that_stops_reading_is_dropped_and_the_others_go_on() -> TestResult {
    const SLOW: &str = "chatty://slow";
    const CALM: &str = "chatty://calm";
    const BURST: u64 = 2_000;
    const MOST_BURSTS: usize = 40;
    let upstream = Chatty::spawn(false).await?;
    let (gateway, client) = Setup::new().attach_url(&upstream.url()).await?;
    // The slow client opens its stream and never reads it; the calm one reads.
    let mut slow = Events::open(&client, 1, json!({"resourceSubscriptions": [SLOW]})).await?;
    let mut calm = Events::open(&client, 2, json!({"resourceSubscriptions": [CALM]})).await?;
    assert_eq!(calm.message().await?["params"]["notifications"], json!({"resourceSubscriptions": [CALM]}));
    // Bursts of updates for the slow client's URI, until its queues and socket are full.
    let mut sent = 0;
    for _ in 0..MOST_BURSTS {
        let reply = client.call_tool("flood", json!({"uri": SLOW, "count": BURST})).send().await?;
        assert_eq!(reply.text()?, format!("flooded {BURST}"));
        sent += BURST;
        if metric(&gateway, &ended("slow_client")) > 0.0 {
            break;
        }
    }
    assert_eq!(metric(&gateway, &ended("slow_client")), 1.0, "after {sent} updates");
    // What it had not read is still there; then the stream ends, without the graceful result.
    let rest = rest_without_a_result(&mut slow).await?;
    let updates = rest.iter().filter(|m| m["method"] == "notifications/resources/updated").count();
    assert_eq!(
        rest.first().map(|m| m["method"].clone()),
        Some(json!("notifications/subscriptions/acknowledged"))
    );
    assert!((updates as u64) < sent, "the stream was cut: {updates} of {sent} updates reached it");
    eventually("the slow listener to be released", || metric(&gateway, "mrtr_gateway_listen_streams") == 1.0)
        .await?;
    // The calm client heard none of it, and its stream goes on.
    let touched = client.call_tool("touch", json!({})).send().await?;
    assert!(touched.text()?.starts_with("touched"), "{:?}", touched.body);
    let update = calm.message().await?;
    assert_eq!(update["params"], json!({"uri": CALM, "_meta": {SUBSCRIPTION_ID: 2}}), "{update}");
    drop((slow, calm));
    bounded("the gateway to drain", gateway.shutdown()).await
}

#[tokio::test]
async fn past_max_listeners_a_listen_request_is_503_naming_the_bound() -> TestResult {
    let h = Setup::new().set("subscriptions", "max_listeners = 1").start().await?;
    let mut open = Events::open(&h.client, 1, json!({"resourceSubscriptions": [COUNTER]})).await?;
    open.message().await?;
    let refused_reply = listen_call(&h.client, 2, json!({})).send().await?;
    let message = refused_reply.expect_error(StatusCode::SERVICE_UNAVAILABLE, -32603)?;
    assert_eq!(message, "too many subscriptions/listen streams open on this gateway (the limit is 1)");
    assert_eq!(h.metric(&refused("total")), 1.0);
    // The open stream is untouched by the refusal.
    let bumped = h.client.call_tool("bump_counter", json!({})).send().await?;
    assert!(bumped.text()?.starts_with("demo://counter is now"), "{:?}", bumped.body);
    assert_eq!(open.message().await?["params"]["uri"], COUNTER);
    drop(open);
    h.stop().await
}

#[tokio::test]
async fn more_uris_than_max_uris_is_400_and_subscribes_nothing() -> TestResult {
    let h = Setup::new().set("subscriptions", "max_uris = 2").start().await?;
    let uris = json!({"resourceSubscriptions": [COUNTER, PROFILE, "demo://third"]});
    let reply = listen_call(&h.client, 1, uris).caps(json!({"elicitation": {}})).send().await?;
    let message = reply.expect_error(StatusCode::BAD_REQUEST, -32602)?;
    assert_eq!(
        message,
        "invalid params: too many resourceSubscriptions in one subscriptions/listen request (the limit is 2)"
    );
    assert_eq!(h.metric(&refused("too_many_uris")), 1.0);
    assert_eq!(h.demo.stats.subscribes(), 0, "nothing was subscribed upstream");
    assert_eq!(h.metric("mrtr_gateway_listen_upstream_sessions"), 0.0, "no upstream session was taken");
    // At the bound it is served.
    let at_bound = json!({"resourceSubscriptions": [COUNTER, PROFILE]});
    let mut events =
        Events::open_call(listen_call(&h.client, 2, at_bound).caps(json!({"elicitation": {}}))).await?;
    let ack = events.message().await?;
    assert_eq!(ack["params"]["notifications"]["resourceSubscriptions"], json!([COUNTER, PROFILE]));
    drop(events);
    h.stop().await
}

#[tokio::test]
async fn a_uri_outside_the_principals_rules_is_never_subscribed() -> TestResult {
    let rule = r#"rules = [{ scopes = ["r"], methods = ["subscriptions/listen", "resources/read", "tools/call"], tools = ["bump_counter"], resources = ["demo://counter"] }]"#;
    let h = with_jwt(Setup::new()).set("auth", rule).start().await?;
    let client = h.client.with_bearer(&token("alice", "r")?);
    // The demo itself would subscribe either URI for a client that can answer elicitations.
    let both = json!({"resourceSubscriptions": [PROFILE, COUNTER]});
    let call = listen_call(&client, 5, both).caps(json!({"elicitation": {}}));
    let mut events = Events::open_call(call).await?;
    let ack = events.message().await?;
    assert_eq!(ack["params"]["notifications"], json!({"resourceSubscriptions": [COUNTER]}), "{ack}");
    assert_eq!(h.demo.stats.subscribes(), 1, "only the readable URI was subscribed upstream");
    let bumped = client.call_tool("bump_counter", json!({})).send().await?;
    assert!(bumped.text()?.starts_with("demo://counter is now"), "{:?}", bumped.body);
    assert_eq!(events.message().await?["params"], json!({"uri": COUNTER, "_meta": {SUBSCRIPTION_ID: 5}}));
    // A principal whose rules allow no listening at all is refused outright.
    let other = h.client.with_bearer(&token("bob", "none")?);
    let refused_reply = listen_call(&other, 6, json!({})).send().await?;
    refused_reply.expect_error(StatusCode::FORBIDDEN, -32600)?;
    drop(events);
    h.stop().await
}
