//! Legacy (2025-era) sessions meet the same authorization rules and rate limits as 2026-07-28
//! requests: every method is checked against `[[auth.rules]]`, legacy-only ones
//! (`resources/subscribe`, `logging/setLevel`) included, and every JSON-RPC request in a legacy
//! body takes a rate-limit token.

use http::StatusCode;
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use serde_json::{json, Value};

use crate::common::legacy_client::{LegacyClient, Raw};
use crate::common::{Harness, HarnessError, Setup, TestResult};

const ISSUER: &str = "https://issuer.test";
const SECRET: &str = "legacy-rules-secret-for-tests";

/// An HS256 token of `sub` holding `scope`, valid for the test's life.
pub(crate) fn token(sub: &str, scope: &str) -> TestResult<String> {
    let claims = json!({"sub": sub, "iss": ISSUER, "scope": scope, "exp": 4_000_000_000u64});
    Ok(encode(&Header::new(Algorithm::HS256), &claims, &EncodingKey::from_secret(SECRET.as_bytes()))?)
}

/// A gateway checking HS256 tokens signed with [`SECRET`].
pub(crate) fn with_jwt(setup: Setup) -> Setup {
    setup.set("auth", "mode = \"jwt\"").set("auth", &format!("jwt_hs256_secret = {SECRET:?}"))
}

fn message(raw: &Raw) -> String {
    let error = raw.messages.last().and_then(|m| m.pointer("/error/message"));
    error.and_then(Value::as_str).unwrap_or_default().to_owned()
}

async fn legacy(h: &Harness, token: &str) -> TestResult<LegacyClient> {
    let mut client = LegacyClient::new(h.gateway.url("/mcp")).with_bearer(token);
    client.initialize(json!({})).await?;
    Ok(client)
}

#[tokio::test]
async fn legacy_only_methods_outside_the_rules_are_forbidden() -> TestResult {
    let rule = r#"rules = [{ scopes = ["tools"], methods = ["tools/list", "tools/call"], tools = ["*"] }]"#;
    let h = with_jwt(Setup::new()).set("auth", rule).start().await?;
    // `initialize`, `notifications/initialized` and `ping` need no rule.
    let client = legacy(&h, &token("alice", "tools")?).await?;
    let pong = client.post(&client.request_body("ping", json!({}))).await?;
    assert_eq!(pong.status, StatusCode::OK, "{:?}", pong.messages);

    let listed = client.post(&client.request_body("tools/list", json!({}))).await?;
    assert_eq!(listed.status, StatusCode::OK, "{:?}", listed.messages);
    assert!(listed.messages.last().and_then(|m| m.pointer("/result/tools")).is_some(), "{listed:?}");

    let cases = [
        ("resources/subscribe", json!({"uri": "demo://resource/1"}), r#" of resource "demo://resource/1""#),
        ("logging/setLevel", json!({"level": "debug"}), ""),
    ];
    for (method, params, what) in cases {
        let refused = client.post(&client.request_body(method, params)).await?;
        assert_eq!(refused.status, StatusCode::FORBIDDEN, "{method}: {:?}", refused.messages);
        assert_eq!(
            message(&refused),
            format!("forbidden: {method}{what} is outside this client's authorization")
        );
        let series = format!("mrtr_gateway_auth_denials_total{{method=\"{method}\"}}");
        assert_eq!(h.metric(&series), 1.0, "{series}");
    }
    // A method nobody knows is refused too, under a fixed label.
    let refused = client.post(&client.request_body("x/anything", json!({}))).await?;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert_eq!(h.metric("mrtr_gateway_auth_denials_total{method=\"request\"}"), 1.0);
    h.stop().await
}

#[tokio::test]
async fn legacy_requests_take_rate_limit_tokens() -> TestResult {
    // `initialize` and two more requests: three tokens. The notification takes none.
    let h = Setup::new().set("limits", "principal = { rate_per_sec = 0.001, burst = 3 }").start().await?;
    let mut client = LegacyClient::new(h.gateway.url("/mcp"));
    client.initialize(json!({})).await?;
    let mut served = 1;
    let mut refused = None;
    // Bounded: a relay that took no token would serve every one.
    for _ in 0..10 {
        let raw = client.post(&client.request_body("tools/list", json!({}))).await?;
        if raw.status == StatusCode::TOO_MANY_REQUESTS {
            refused = Some(raw);
            break;
        }
        assert_eq!(raw.status, StatusCode::OK, "{:?}", raw.messages);
        served += 1;
    }
    let refused = refused.ok_or_else(|| HarnessError::Unexpected("never limited".into()))?;
    assert_eq!(served, 3);
    assert_eq!(message(&refused), "rate limit exceeded: principal");
    assert!(refused.headers.contains_key(http::header::RETRY_AFTER));
    assert_eq!(h.metric(r#"mrtr_gateway_rate_limited_total{limit="principal"}"#), 1.0);
    // A modern request of the same principal meets the same, spent, bucket.
    let modern = h.client.request("tools/list").send().await?;
    assert_eq!(modern.status, StatusCode::TOO_MANY_REQUESTS);
    h.stop().await
}

#[tokio::test]
async fn each_request_of_a_legacy_batch_takes_a_token_and_a_tool_token() -> TestResult {
    let limits = "tools = { echo = { rate_per_sec = 0.001, burst = 2 } }";
    let h = Setup::new().set("limits", limits).start().await?;
    let mut client = LegacyClient::new(h.gateway.url("/mcp"));
    client.initialize(json!({})).await?;
    let echo = |c: &LegacyClient| {
        c.request_body("tools/call", json!({"name": "echo", "arguments": {"message": "m"}}))
    };
    let batch = json!([echo(&client), echo(&client), echo(&client)]);
    let refused = client.post(&batch).await?;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS, "{:?}", refused.messages);
    assert_eq!(message(&refused), r#"rate limit exceeded: tool "echo""#);
    assert_eq!(h.demo.stats.tool_calls("echo"), 0, "a refused body never reaches the upstream");
    h.stop().await
}
