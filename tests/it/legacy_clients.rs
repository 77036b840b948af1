//! Both eras on one endpoint: a 2025-11-25 client (`initialize`, `Mcp-Session-Id`, server
//! requests in-band) through the gateway in front of the demo server, beside 2026-07-28 clients.

use std::time::Duration;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use http::StatusCode;
use mrtr_gateway::demo::{self, DemoOptions};
use mrtr_gateway::mrtr::{KeyRing, KeySecret, SessionSealer};
use serde_json::{json, Value};

use super::{everything, form_only};
use crate::common::answers::{MODEL, NAME, ROOT, SUMMARY};
use crate::common::faulty::{tools, FaultyLegacy};
use crate::common::harness::metric;
use crate::common::legacy_client::{assert_ends_timed_out, LegacyClient, Raw};
use crate::common::{bounded, eventually, Harness, Setup, TestResult};

const SESSIONS: &str = "mrtr_gateway_legacy_sessions";

fn legacy(h: &Harness) -> LegacyClient {
    LegacyClient::new(h.gateway.url("/mcp"))
}

/// The sealer of the harness's key ring (`k1`, all bytes 0x11).
fn sealer() -> SessionSealer {
    let secret = KeySecret::new([0x11; 32], Some("k1".to_owned())).expect("key");
    SessionSealer::new(KeyRing::new(vec![secret]).expect("ring"))
}

fn text_of(response: &Value) -> String {
    response["result"]["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn initialize_gets_a_sealed_session_id_never_the_upstream_one() -> TestResult {
    let h = Harness::start().await?;
    let mut client = legacy(&h);
    let result = client.initialize(everything()).await?;
    assert_eq!(result["protocolVersion"], "2025-11-25");
    assert!(result["capabilities"]["tools"].is_object(), "{result}");
    let front_id = client.session.clone().expect("a session id");
    let claims = sealer().open(&front_id, "anonymous").expect("the id opens with the ring");
    let upstream_id = claims.upstream.expect("the demo gives session ids");
    assert!(!front_id.contains(&upstream_id), "{front_id} shows {upstream_id}");
    assert_eq!(h.demo.stats.sessions_alive(), 2, "the pool's probe session and the legacy client's own");
    assert_eq!(h.metric(SESSIONS), 1.0);
    h.stop().await
}

#[tokio::test]
async fn elicitation_and_sampling_are_relayed_in_band() -> TestResult {
    let h = Harness::start().await?;
    let mut client = legacy(&h);
    client.initialize(everything()).await?;
    let greeting = client.call_tool("greet", json!({})).await?;
    assert_eq!(text_of(&greeting), format!("Hello, {NAME}!"));
    let confirmed = client.call_tool("confirm_twice", json!({})).await?;
    assert_eq!(text_of(&confirmed), format!("Confirmed {NAME}: true"));
    let summary = client.call_tool("summarize", json!({"text": "long text"})).await?;
    assert_eq!(text_of(&summary), format!("Summary: {SUMMARY} (model {MODEL})"));
    assert_eq!(client.answered.load(std::sync::atomic::Ordering::Relaxed), 4);
    // In-band means no replay: each tool ran once, and no input_required was produced.
    assert_eq!(h.demo.stats.tool_calls("confirm_twice"), 1);
    assert_eq!(h.metric("mrtr_gateway_input_required_questions_total{kind=\"elicitation\"}"), 0.0);
    assert_eq!(h.metric("mrtr_gateway_legacy_relayed_requests_total{method=\"initialize\"}"), 1.0);
    h.stop().await
}

#[tokio::test]
async fn roots_asked_on_the_get_stream_are_relayed() -> TestResult {
    let h = Harness::start().await?;
    let mut client = legacy(&h);
    client.initialize(everything()).await?;
    let stream = client.open_get().await?;
    assert_eq!(stream.status, StatusCode::OK);
    let roots = client.call_tool("list_roots", json!({})).await?;
    assert_eq!(text_of(&roots), format!("Roots: {ROOT}"));
    drop(stream);
    h.stop().await
}

/// A legacy session's request does not overtake its GET stream on the way upstream: received
/// after the GET, it waits until the upstream has answered the GET (a Streamable HTTP server
/// drops a server request it has no stream for, and the call that made it hangs), and no longer
/// than the relay's bound when that answer never comes.
#[tokio::test]
async fn a_request_does_not_overtake_the_get_stream_upstream() -> TestResult {
    let upstream = FaultyLegacy::spawn().await?;
    let (gateway, _) = Setup::new().attach_url(&upstream.url()).await?;
    let mut client = LegacyClient::new(gateway.url("/mcp"));
    client.initialize(json!({})).await?;
    let stats = upstream.stats();
    // What the gateway's own session sent first (its GET stream, refused) is not this test's.
    let since = stats.order().len();
    let order = || stats.order()[since..].to_vec();
    let call = |client: &LegacyClient| {
        let client = client.clone();
        let body = client.request_body("tools/call", json!({"name": tools::OK, "arguments": {}}));
        tokio::spawn(async move { client.post(&body).await })
    };
    let open_get = |client: &LegacyClient| {
        let client = client.clone();
        tokio::spawn(async move { client.open_get().await })
    };
    let answered = |raw: Raw| serde_json::to_string(&raw.messages).is_ok_and(|m| m.contains("ok from s"));

    upstream.hold_streams();
    let get = open_get(&client);
    eventually("the GET to reach the upstream", || stats.held_streams() == 1).await?;
    let held = call(&client);
    // Time for a broken relay to let the call overtake; the bound is 1 s.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(stats.calls_of(tools::OK), 0, "the call overtook the GET stream");
    upstream.release_streams();
    assert_eq!(get.await??.status, StatusCode::METHOD_NOT_ALLOWED, "the GET's own answer");
    assert!(answered(held.await??));
    assert_eq!(order(), ["GET answered", "call ok"]);

    // A GET the upstream never answers delays the call by the bound, then the call goes on.
    upstream.hold_streams();
    let stuck = open_get(&client);
    eventually("the second GET to reach the upstream", || stats.held_streams() == 1).await?;
    let started = tokio::time::Instant::now();
    assert!(answered(call(&client).await??));
    assert!(started.elapsed() >= Duration::from_secs(1), "{:?}", started.elapsed());
    assert_eq!(stats.held_streams(), 1, "answered while the GET is still held");
    upstream.release_streams();
    assert_eq!(stuck.await??.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(order(), ["GET answered", "call ok", "call ok", "GET answered"]);
    bounded("the gateway to drain", gateway.shutdown()).await
}

#[tokio::test]
async fn a_stream_cut_after_priming_is_resumed_with_last_event_id() -> TestResult {
    let options =
        DemoOptions { close_after_priming: Some(Duration::from_millis(10)), ..DemoOptions::default() };
    let demo = demo::spawn_loopback(options)?;
    let (gateway, _) = Setup::new().attach(&demo).await?;
    let mut client = LegacyClient::new(gateway.url("/mcp"));
    client.initialize(form_only()).await?;
    let greeting = client.call_tool("greet", json!({})).await?;
    assert_eq!(text_of(&greeting), format!("Hello, {NAME}!"));
    gateway.shutdown().await;
    demo.shutdown().await?;
    Ok(())
}

#[tokio::test]
async fn delete_ends_the_upstream_session() -> TestResult {
    let h = Harness::start().await?;
    let mut client = legacy(&h);
    client.initialize(form_only()).await?;
    let deletes = h.demo.stats.deletes();
    assert_eq!(client.delete().await?, StatusCode::OK);
    assert_eq!(h.demo.stats.deletes(), deletes + 1);
    assert_eq!(h.metric(SESSIONS), 0.0);
    let after = client.post(&client.request_body("tools/list", json!({}))).await?;
    assert_eq!(after.status, StatusCode::NOT_FOUND);
    assert_eq!(after.messages[0]["error"]["code"], -32001);
    h.stop().await
}

#[tokio::test]
async fn a_call_that_never_answers_ends_at_the_request_timeout() -> TestResult {
    let h = Setup::new().set("upstream", "request_timeout_ms = 500").start().await?;
    let mut client = legacy(&h);
    client.initialize(form_only()).await?;
    let started = std::time::Instant::now();
    let call = client.request_body("tools/call", json!({"name": "hang", "arguments": {}}));
    let hung = client.post(&call).await?;
    assert_eq!(hung.status, StatusCode::OK);
    assert!(hung.messages.iter().all(|m| m.get("result").is_none()), "{:?}", hung.messages);
    assert!(started.elapsed() >= Duration::from_millis(500), "not before the timeout");
    // The stream's last event answers the call with an error naming the cause.
    assert_ends_timed_out(&hung, &call, "500ms");
    h.stop().await
}

#[tokio::test]
async fn shutdown_ends_every_open_session_upstream() -> TestResult {
    let h = Harness::start().await?;
    let mut client = legacy(&h);
    client.initialize(form_only()).await?;
    assert!(h.demo.stats.sessions_alive() >= 1, "the legacy client's session is open upstream");
    let Harness { demo, gateway, .. } = h;
    bounded("the gateway to drain", gateway.shutdown()).await?;
    assert_eq!(
        demo.stats.sessions_alive(),
        0,
        "every upstream session ended by a DELETE, the legacy one's too"
    );
    bounded("the demo server to stop", demo.shutdown()).await??;
    Ok(())
}

#[tokio::test]
async fn an_idle_session_is_ended_upstream() -> TestResult {
    let h = Setup::new().set("legacy", "idle_secs = 1").start().await?;
    let mut client = legacy(&h);
    client.initialize(form_only()).await?;
    let deletes = h.demo.stats.deletes();
    eventually("the idle legacy session to end", || h.metric(SESSIONS) == 0.0).await?;
    eventually("its upstream DELETE", || h.demo.stats.deletes() > deletes).await?;
    let after = client.post(&client.request_body("tools/list", json!({}))).await?;
    assert_eq!(after.status, StatusCode::NOT_FOUND, "{:?}", after.messages);
    h.stop().await
}

#[tokio::test]
async fn past_the_session_bound_initialize_is_refused_clearly() -> TestResult {
    let h = Setup::new().set("legacy", "max_sessions = 1").start().await?;
    legacy(&h).initialize(form_only()).await?;
    let second = legacy(&h);
    let raw = second
        .post(&second.request_body(
            "initialize",
            json!({"protocolVersion": "2025-11-25",
        "capabilities": {}, "clientInfo": {"name": "second", "version": "1"}}),
        ))
        .await?;
    assert_eq!(raw.status, StatusCode::SERVICE_UNAVAILABLE);
    let message = raw.messages[0]["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("too many legacy sessions") && message.contains('1'), "{message}");
    assert_eq!(h.metric("mrtr_gateway_legacy_refused_requests_total{reason=\"too_many_sessions\"}"), 1.0);
    h.stop().await
}

#[tokio::test]
async fn switched_off_legacy_clients_are_refused() -> TestResult {
    let h = Setup::new().set("legacy", "enabled = false").start().await?;
    let client = legacy(&h);
    let raw = client
        .post(&client.request_body(
            "initialize",
            json!({"protocolVersion": "2025-11-25",
        "capabilities": {}, "clientInfo": {"name": "old", "version": "1"}}),
        ))
        .await?;
    assert_eq!(raw.status, StatusCode::NOT_FOUND);
    assert_eq!(raw.messages[0]["error"]["code"], -32601);
    let message = raw.messages[0]["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("initialize") && message.contains("2026-07-28"), "{message}");
    assert_eq!(h.demo.stats.sessions_alive(), 1, "only the pool's probe session");
    h.stop().await
}

#[tokio::test]
async fn another_replica_relays_a_session_of_a_shared_upstream() -> TestResult {
    let h = Harness::start().await?;
    let (other, _) = Setup::new().attach(&h.demo).await?;
    let mut client = legacy(&h);
    client.initialize(form_only()).await?;
    let elsewhere = client.at(other.url("/mcp"));
    let greeting = elsewhere.call_tool("greet", json!({})).await?;
    assert_eq!(text_of(&greeting), format!("Hello, {NAME}!"));
    assert_eq!(metric(&other, SESSIONS), 1.0, "adopted by the other replica");
    // The other replica did not open it, so its idle copy never ends it; the owner's DELETE does.
    assert_eq!(elsewhere.delete().await?, StatusCode::OK);
    assert_eq!(metric(&other, SESSIONS), 0.0);
    other.shutdown().await;
    h.stop().await
}

#[tokio::test]
async fn forged_or_foreign_session_ids_are_unknown_sessions() -> TestResult {
    let h = Harness::start().await?;
    let mut client = legacy(&h);
    client.initialize(form_only()).await?;
    let token = client.session.clone().expect("a session id");
    let mut forged = client.clone();
    let last = if token.ends_with('A') { 'B' } else { 'A' };
    forged.session = Some(format!("{}{last}", &token[..token.len() - 1]));
    let raw = forged.post(&forged.request_body("tools/list", json!({}))).await?;
    assert_eq!(raw.status, StatusCode::NOT_FOUND);
    let other_key = format!("s1.{}", STANDARD.encode([7u8; 64]).replace(['+', '/', '='], ""));
    forged.session = Some(other_key);
    assert_eq!(
        forged.post(&forged.request_body("tools/list", json!({}))).await?.status,
        StatusCode::NOT_FOUND
    );
    // The upstream's own id in clear is no session id either.
    let upstream = sealer().open(&token, "anonymous").expect("opens").upstream.expect("an id");
    forged.session = Some(upstream);
    assert_eq!(
        forged.post(&forged.request_body("tools/list", json!({}))).await?.status,
        StatusCode::NOT_FOUND
    );
    h.stop().await
}

#[tokio::test]
async fn modern_clients_beside_legacy_ones_still_get_input_required() -> TestResult {
    let h = Harness::start().await?;
    let mut old = legacy(&h);
    old.initialize(form_only()).await?;
    let (requests, _state) =
        h.client.call_tool("greet", json!({})).caps(form_only()).send().await?.input_required()?;
    assert_eq!(requests.len(), 1);
    assert_eq!(text_of(&old.call_tool("greet", json!({})).await?), format!("Hello, {NAME}!"));
    h.stop().await
}
