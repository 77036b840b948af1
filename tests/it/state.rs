//! The sealed `requestState`: every way a state can be wrong gets the same generic error
//! (HTTP 400, -32602 "Invalid or expired requestState") while the metrics name the exact reason;
//! and a key ring that lists the old key after a new one still opens states sealed with the old.

use http::StatusCode;
use jsonwebtoken::{encode, EncodingKey, Header};
use serde_json::{json, Map, Value};

use super::form_only;
use crate::common::answers::NAME;
use crate::common::harness::{metric, test_key};
use crate::common::{answer_all, Client, Harness, HarnessError, Reply, Setup, TestResult};
use mrtr_gateway::auth::ANONYMOUS;
use mrtr_gateway::bridge::Clock;
use mrtr_gateway::defaults::{CLOCK_SKEW, STATE_TTL};
use mrtr_gateway::mrtr::{parse_key_lines, Binding, CodecSettings, KeyRing, StateCodec};
use mrtr_gateway::protocol::methods::MrtrMethod;

const GENERIC: &str = "Invalid or expired requestState";
const JWT_SECRET: &str = "integration-test-hs256-secret";

fn rejections(h: &Harness, reason: &str) -> f64 {
    h.metric(&format!("mrtr_gateway_state_rejections_total{{reason=\"{reason}\"}}"))
}

fn assert_generic_refusal(reply: &Reply) -> TestResult {
    let message = reply.expect_error(StatusCode::BAD_REQUEST, -32602)?;
    assert_eq!(message, GENERIC);
    Ok(())
}

/// Round 1 of `greet`: its questions and state.
async fn greet_round_one(client: &Client) -> TestResult<(Map<String, Value>, String)> {
    client.call_tool("greet", json!({})).caps(form_only()).send().await?.input_required()
}

async fn greet_retry(client: &Client, state: &str, requests: &Map<String, Value>) -> TestResult<Reply> {
    client
        .call_tool("greet", json!({}))
        .caps(form_only())
        .state(state)
        .responses(answer_all(requests))
        .send()
        .await
}

/// Replaces the character in the middle of the token by another base64url character.
fn flip_middle(state: &str) -> String {
    let mut chars: Vec<char> = state.chars().collect();
    let middle = chars.len() / 2;
    chars[middle] = if chars[middle] == 'A' { 'B' } else { 'A' };
    chars.into_iter().collect()
}

#[tokio::test]
async fn tampered_states_are_refused_with_the_reason_in_metrics() -> TestResult {
    let h = Harness::start().await?;
    let (requests, state) = greet_round_one(&h.client).await?;
    let tampered = [flip_middle(&state), format!("{state}garbage!"), state.replacen("v1.", "v2.", 1)];
    for bad in &tampered {
        assert_generic_refusal(&greet_retry(&h.client, bad, &requests).await?)?;
    }
    assert_eq!(rejections(&h, "integrity"), 1.0);
    assert_eq!(rejections(&h, "malformed"), 2.0);
    // The genuine state still works, and the upstream only ever saw that one answer.
    assert_eq!(greet_retry(&h.client, &state, &requests).await?.text()?, format!("Hello, {NAME}!"));
    assert_eq!(h.demo.stats.answers(), 1);
    h.stop().await
}

/// `state` (of an anonymous `greet` call) sealed again with the test key, its claims and
/// journal unchanged, as if issued at `issued_at`. The codec takes the time as an argument, so
/// a genuine state of any age is minted at once instead of waited for.
fn resealed_at(state: &str, issued_at: u64) -> TestResult<String> {
    let unexpected = |e: &dyn std::fmt::Display| HarnessError::Unexpected(e.to_string());
    let secrets = parse_key_lines(&test_key("k1", 0x11)).map_err(|e| unexpected(&e))?;
    let codec = StateCodec::new(KeyRing::new(secrets).map_err(|e| unexpected(&e))?, CodecSettings::default());
    let params = json!({"name": "greet", "arguments": {}});
    let binding = Binding::new(ANONYMOUS, MrtrMethod::ToolsCall, "greet", Some(&params));
    let claims = codec.open_at(state, &binding, Clock::System.unix_now()).map_err(|e| unexpected(&e))?;
    codec.seal_at(&binding, claims.round, &claims.journal, issued_at).map_err(|e| unexpected(&e))
}

#[tokio::test]
async fn an_expired_state_is_refused() -> TestResult {
    let h = Harness::start().await?;
    let (requests, state) = greet_round_one(&h.client).await?;
    let now = Clock::System.unix_now();
    let (ttl, skew) = (STATE_TTL.as_secs(), CLOCK_SKEW.as_secs());
    // Past its expiry and the tolerated skew by a margin no scheduling delay can cross.
    let expired = resealed_at(&state, now - ttl - skew - 300)?;
    assert_generic_refusal(&greet_retry(&h.client, &expired, &requests).await?)?;
    assert_eq!(rejections(&h, "expired"), 1.0);
    // The same claims, younger than the ttl by the same margin, still open: only age refused it.
    let aged = resealed_at(&state, now - ttl + 300)?;
    assert_eq!(greet_retry(&h.client, &aged, &requests).await?.text()?, format!("Hello, {NAME}!"));
    assert_eq!(rejections(&h, "expired"), 1.0);
    h.stop().await
}

fn jwt(subject: &str) -> TestResult<String> {
    let exp =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()) + 600;
    let claims = json!({"sub": subject, "iss": "https://issuer.test", "exp": exp});
    Ok(encode(&Header::default(), &claims, &EncodingKey::from_secret(JWT_SECRET.as_bytes()))?)
}

#[tokio::test]
async fn a_state_of_another_principal_is_refused() -> TestResult {
    let h = Setup::new()
        .set("auth", "mode = \"jwt\"")
        .set("auth", &format!("jwt_hs256_secret = {JWT_SECRET:?}"))
        .start()
        .await?;
    let alice = h.client.with_bearer(&jwt("alice")?);
    let bob = h.client.with_bearer(&jwt("bob")?);
    let anonymous = h.client.call_tool("greet", json!({})).caps(form_only()).send().await?;
    anonymous.expect_error(StatusCode::UNAUTHORIZED, -32600)?;
    let (requests, state) = greet_round_one(&alice).await?;
    assert_generic_refusal(&greet_retry(&bob, &state, &requests).await?)?;
    assert_eq!(rejections(&h, "principal"), 1.0);
    assert_eq!(greet_retry(&alice, &state, &requests).await?.text()?, format!("Hello, {NAME}!"));
    h.stop().await
}

#[tokio::test]
async fn a_state_of_another_tool_is_refused() -> TestResult {
    let h = Harness::start().await?;
    let (requests, state) = greet_round_one(&h.client).await?;
    let other = h.client.call_tool("confirm_twice", json!({})).caps(form_only());
    assert_generic_refusal(&other.state(&state).responses(answer_all(&requests)).send().await?)?;
    assert_eq!(rejections(&h, "target"), 1.0);
    assert_eq!(h.demo.stats.tool_calls("confirm_twice"), 0, "a refused state never reaches the upstream");
    h.stop().await
}

#[tokio::test]
async fn a_state_for_other_arguments_is_refused() -> TestResult {
    let h = Harness::start().await?;
    let summarize =
        |text: &str| h.client.call_tool("summarize", json!({"text": text})).caps(json!({"sampling": {}}));
    let (requests, state) = summarize("first text").send().await?.input_required()?;
    let other = summarize("second text").state(&state).responses(answer_all(&requests)).send().await?;
    assert_generic_refusal(&other)?;
    assert_eq!(rejections(&h, "arguments"), 1.0);
    assert_eq!(h.demo.stats.tool_calls("summarize"), 1, "a refused state never reaches the upstream");
    assert_eq!(h.demo.stats.answers(), 0, "the first round's answer was never given to anyone");
    h.stop().await
}

#[tokio::test]
async fn a_rotated_ring_opens_states_sealed_with_the_old_key() -> TestResult {
    let old = test_key("k1", 0x11);
    let new = test_key("k2", 0x22);
    let a = Setup::new().keys(&[&old]).start().await?;
    let (b_gateway, b) = Setup::new().keys(&[&new, &old]).attach(&a.demo).await?;

    let (requests, state) = greet_round_one(&a.client).await?;
    assert_eq!(greet_retry(&b, &state, &requests).await?.text()?, format!("Hello, {NAME}!"));

    // The other way round fails: A never had the new key.
    let (requests, state) = greet_round_one(&b).await?;
    assert_generic_refusal(&greet_retry(&a.client, &state, &requests).await?)?;
    assert_eq!(rejections(&a, "unknown_key"), 1.0);
    assert_eq!(metric(&b_gateway, "mrtr_gateway_state_rejections_total{reason=\"unknown_key\"}"), 0.0);
    b_gateway.shutdown().await;
    a.stop().await
}
