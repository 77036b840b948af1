//! Tokens checked against keys from a JWKS served by a test issuer on loopback (and found
//! through its discovery document), the RFC 9728 metadata and challenges, and the
//! authorization rules. The sealed-state principal binding (a state of principal A refused for
//! principal B) is in `state.rs`.

mod issuer;

use std::time::Duration;

use http::header::WWW_AUTHENTICATE;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use serde_json::{json, Value};

use self::issuer::{Issuer, SigningKey};
use crate::common::client::admin_get;
use crate::common::{bounded, eventually, Client, Harness, HarnessError, Setup, TestResult};

const ISSUER: &str = "https://issuer.test";
const RESOURCE: &str = "https://gateway.test/mcp";
const METADATA_URL: &str = "https://gateway.test/.well-known/oauth-protected-resource/mcp";

fn now() -> u64 {
    jsonwebtoken::get_current_timestamp()
}

fn claims(sub: &str) -> Value {
    json!({"sub": sub, "iss": ISSUER, "aud": RESOURCE, "exp": now() + 600, "iat": now()})
}

fn with(mut claims: Value, key: &str, value: Value) -> Value {
    claims[key] = value;
    claims
}

/// A gateway whose keys come from `issuer`'s JWKS; `extra` lines go in `[auth]`.
fn setup(issuer: &Issuer, extra: &[&str]) -> Setup {
    let mut s = Setup::new()
        .set("auth", "mode = \"jwt\"")
        .set("auth", &format!("jwks_url = {:?}", issuer.jwks_url()))
        .set("auth", &format!("issuer = {ISSUER:?}"))
        .set("auth", &format!("resource = {RESOURCE:?}"))
        .set("auth", &format!("authorization_servers = [{ISSUER:?}]"))
        .set("auth", "scopes_supported = [\"tools:echo\"]")
        // Generous: a refresh on a loaded machine must not be cut short by the wait bound.
        .set("auth", "jwks_wait_ms = 30000");
    for line in extra {
        s = s.set("auth", line);
    }
    s
}

/// Status, headers and JSON body of a reply.
struct Raw {
    status: StatusCode,
    headers: HeaderMap,
    body: Value,
}

impl Raw {
    fn challenge(&self) -> String {
        self.headers.get(WWW_AUTHENTICATE).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned()
    }

    fn message(&self) -> String {
        self.body.pointer("/error/message").and_then(Value::as_str).unwrap_or_default().to_owned()
    }
}

async fn raw(call: crate::common::client::Call<'_>) -> TestResult<Raw> {
    let response = call.open().await?;
    let (parts, body) = response.into_parts();
    let bytes = bounded("a reply body", body.collect()).await??.to_bytes();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    Ok(Raw { status: parts.status, headers: parts.headers, body })
}

async fn echo(client: &Client, token: &str) -> TestResult<Raw> {
    raw(client.with_bearer(token).call_tool("echo", json!({"message": "hi"}))).await
}

fn expect_ok(r: &Raw) -> TestResult {
    match r.body.pointer("/result/content/0/text").and_then(Value::as_str) {
        Some("Echo: hi") if r.status == StatusCode::OK => Ok(()),
        _ => Err(HarnessError::Unexpected(format!("{} {}", r.status, r.body))),
    }
}

fn expect_refused(r: &Raw, status: StatusCode, message: &str) -> TestResult {
    if r.status != status || r.message() != message {
        return Err(HarnessError::Unexpected(format!(
            "wanted {status} {message:?}, got {} {}",
            r.status, r.body
        )));
    }
    Ok(())
}

#[tokio::test]
async fn tokens_of_every_key_type_are_checked_against_the_jwks() -> TestResult {
    let keys = [
        SigningKey::rsa("rs", Algorithm::RS256)?,
        SigningKey::rsa("ps", Algorithm::PS384)?,
        SigningKey::ec("es")?,
        SigningKey::ed25519("ed")?,
        SigningKey::hmac("hs", b"a-shared-secret-of-the-issuer-32b"),
    ];
    let issuer = Issuer::spawn(&keys.iter().collect::<Vec<_>>()).await?;
    let h = setup(&issuer, &[]).start().await?;
    for key in &keys {
        expect_ok(&echo(&h.client, &key.sign(&claims("alice"))?).await?)?;
    }
    // A key is tried only for its own alg: the PS384 key refuses a PS256 token of its kid.
    let wrong_alg = SigningKey::rsa("ps", Algorithm::PS256)?;
    expect_refused(
        &echo(&h.client, &wrong_alg.sign(&claims("a"))?).await?,
        StatusCode::UNAUTHORIZED,
        "unauthorized: invalid token",
    )?;
    assert_eq!(h.demo.stats.tool_calls("echo"), keys.len() as u64);
    h.stop().await
}

#[tokio::test]
async fn bad_claims_are_refused_and_every_401_names_the_metadata() -> TestResult {
    let key = SigningKey::ec("k1")?;
    let issuer = Issuer::spawn(&[&key]).await?;
    let h = setup(&issuer, &["leeway_secs = 5"]).start().await?;
    let cases = [
        (with(claims("a"), "exp", json!(now() - 60)), "unauthorized: token expired"),
        (with(claims("a"), "nbf", json!(now() + 60)), "unauthorized: token not yet valid"),
        (
            with(claims("a"), "aud", json!("https://other.test/mcp")),
            "unauthorized: token issuer or audience not accepted",
        ),
        (
            with(claims("a"), "iss", json!("https://other-issuer.test")),
            "unauthorized: token issuer or audience not accepted",
        ),
    ];
    for (claims, message) in &cases {
        let r = echo(&h.client, &key.sign(claims)?).await?;
        expect_refused(&r, StatusCode::UNAUTHORIZED, message)?;
        let want = format!(
            r#"Bearer realm="mrtr-gateway", error="invalid_token", resource_metadata="{METADATA_URL}""#
        );
        assert_eq!(r.challenge(), want);
    }
    // Within the leeway.
    expect_ok(&echo(&h.client, &key.sign(&with(claims("a"), "exp", json!(now() - 1)))?).await?)?;
    let none = raw(h.client.call_tool("echo", json!({"message": "hi"}))).await?;
    expect_refused(&none, StatusCode::UNAUTHORIZED, "unauthorized: missing bearer token")?;
    assert_eq!(
        none.challenge(),
        format!(r#"Bearer realm="mrtr-gateway", resource_metadata="{METADATA_URL}""#)
    );
    assert_eq!(h.metric("mrtr_gateway_auth_rejections_total{reason=\"expired\"}"), 1.0);
    assert_eq!(h.metric("mrtr_gateway_auth_rejections_total{reason=\"audience\"}"), 1.0);
    h.stop().await
}

/// `claims` without `key`.
fn without(mut claims: Value, key: &str) -> Value {
    if let Some(map) = claims.as_object_mut() {
        map.remove(key);
    }
    claims
}

/// With an audience (from `resource`) and an issuer configured, a token must carry both: one
/// that leaves either out, or sets `aud` to `null`, is refused like a wrong one, before any
/// upstream work. So is an empty subject.
#[tokio::test]
async fn a_token_without_the_configured_audience_or_issuer_is_refused() -> TestResult {
    let key = SigningKey::rsa("r1", Algorithm::RS256)?;
    let issuer = Issuer::spawn(&[&key]).await?;
    let h = setup(&issuer, &[]).start().await?;
    let cases = [
        (without(claims("a"), "aud"), "unauthorized: token has no `aud` claim"),
        (with(claims("a"), "aud", Value::Null), "unauthorized: token has no `aud` claim"),
        (without(claims("a"), "iss"), "unauthorized: token has no `iss` claim"),
        (with(claims("a"), "iss", Value::Null), "unauthorized: token has no `iss` claim"),
        (
            with(claims("a"), "aud", json!("https://other.test/mcp")),
            "unauthorized: token issuer or audience not accepted",
        ),
        (
            with(claims("a"), "iss", json!("https://other-issuer.test")),
            "unauthorized: token issuer or audience not accepted",
        ),
        (claims(""), "unauthorized: token has no `sub` claim (a non-empty string)"),
    ];
    for (claims, message) in &cases {
        let r = echo(&h.client, &key.sign(claims)?).await?;
        expect_refused(&r, StatusCode::UNAUTHORIZED, message)?;
        assert!(r.challenge().contains(r#"error="invalid_token""#), "{}", r.challenge());
    }
    expect_ok(&echo(&h.client, &key.sign(&claims("alice"))?).await?)?;
    assert_eq!(h.demo.stats.tool_calls("echo"), 1, "only the complete token reached the upstream");
    assert_eq!(h.metric("mrtr_gateway_auth_rejections_total{reason=\"missing_claim\"}"), 4.0);
    assert_eq!(h.metric("mrtr_gateway_auth_rejections_total{reason=\"no_subject\"}"), 1.0);
    h.stop().await
}

#[tokio::test]
async fn alg_none_and_algorithm_confusion_are_refused() -> TestResult {
    use base64::Engine as _;
    let rsa = SigningKey::rsa("r1", Algorithm::RS256)?;
    let issuer = Issuer::spawn(&[&rsa]).await?;
    let h = setup(&issuer, &[]).start().await?;
    let b64 = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    let body = b64(&claims("mallory"));
    let none = format!("{}.{body}.", b64(&json!({"alg": "none", "typ": "JWT", "kid": "r1"})));
    expect_refused(&echo(&h.client, &none).await?, StatusCode::UNAUTHORIZED, "unauthorized: invalid token")?;
    // HS256 keyed with the RSA public key's own bytes, naming the RSA key's kid.
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some("r1".into());
    let pem = SigningKey::rsa_public_pem()?;
    let confused = encode(&header, &claims("mallory"), &EncodingKey::from_secret(pem.as_bytes()))?;
    expect_refused(
        &echo(&h.client, &confused).await?,
        StatusCode::UNAUTHORIZED,
        "unauthorized: invalid token",
    )?;
    expect_ok(&echo(&h.client, &rsa.sign(&claims("alice"))?).await?)?;
    assert_eq!(h.demo.stats.tool_calls("echo"), 1, "only the genuine token reached the upstream");
    h.stop().await
}

#[tokio::test]
async fn an_unknown_kid_is_accepted_once_the_rotated_jwks_serves_it() -> TestResult {
    let (old, new) = (SigningKey::ec("2026-01")?, SigningKey::ec("2026-02")?);
    let issuer = Issuer::spawn(&[&old]).await?;
    let h = setup(&issuer, &["jwks_min_refresh_secs = 1"]).start().await?;
    expect_ok(&echo(&h.client, &old.sign(&claims("alice"))?).await?)?;
    expect_refused(
        &echo(&h.client, &new.sign(&claims("alice"))?).await?,
        StatusCode::UNAUTHORIZED,
        "unauthorized: invalid token",
    )?;

    issuer.serve(&[&new]);
    // Past the refresh rate limit, the unknown kid causes one refresh, which the request awaits.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let before = issuer.jwks_fetches();
    expect_ok(&echo(&h.client, &new.sign(&claims("alice"))?).await?)?;
    assert_eq!(issuer.jwks_fetches(), before + 1);
    // The retired key is gone with the refresh.
    let retired = echo(&h.client, &old.sign(&claims("alice"))?).await?;
    expect_refused(&retired, StatusCode::UNAUTHORIZED, "unauthorized: invalid token")?;
    h.stop().await
}

#[tokio::test]
async fn unknown_kids_do_not_refresh_more_than_the_rate_limit_allows() -> TestResult {
    let key = SigningKey::ec("k1")?;
    let stranger = SigningKey::ec("never-served")?;
    let issuer = Issuer::spawn(&[&key]).await?;
    let h = setup(&issuer, &["jwks_min_refresh_secs = 3600"]).start().await?;
    assert_eq!(issuer.jwks_fetches(), 1, "the fetch at start");
    let token = stranger.sign(&claims("mallory"))?;
    let burst = (0..16).map(|_| echo(&h.client, &token));
    for r in futures_util::future::join_all(burst).await {
        expect_refused(&r?, StatusCode::UNAUTHORIZED, "unauthorized: invalid token")?;
    }
    assert_eq!(issuer.jwks_fetches(), 1, "a flood of unknown kids does not reach the issuer");
    assert_eq!(h.metric("mrtr_gateway_auth_rejections_total{reason=\"unknown_key\"}"), 16.0);
    h.stop().await
}

#[tokio::test]
async fn the_last_good_keys_are_served_while_the_issuer_is_down() -> TestResult {
    let key = SigningKey::ec("k1")?;
    let issuer = Issuer::spawn(&[&key]).await?;
    let h = setup(&issuer, &["jwks_refresh_secs = 1", "jwks_max_stale_secs = 3600"]).start().await?;
    issuer.set_down(true);
    eventually("a background refresh to fail", || issuer.failed_fetches() >= 1).await?;
    expect_ok(&echo(&h.client, &key.sign(&claims("alice"))?).await?)?;
    assert!(h.gateway.ready.is_ready(), "stale keys within the bound keep the gateway ready");
    eventually("the failure to be counted", || {
        h.metric("mrtr_gateway_auth_key_fetches_total{outcome=\"status\"}") >= 1.0
    })
    .await?;
    h.stop().await
}

#[tokio::test]
async fn keys_staler_than_the_bound_are_dropped_and_the_gateway_turns_unready() -> TestResult {
    let key = SigningKey::ec("k1")?;
    let issuer = Issuer::spawn(&[&key]).await?;
    let h = setup(&issuer, &["jwks_refresh_secs = 3600", "jwks_max_stale_secs = 1"]).start().await?;
    issuer.set_down(true);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let r = echo(&h.client, &key.sign(&claims("alice"))?).await?;
    expect_refused(
        &r,
        StatusCode::SERVICE_UNAVAILABLE,
        "unauthorized: token keys unavailable, try again later",
    )?;
    assert!(!h.gateway.ready.is_ready());
    let admin = h.gateway.admin_addr.ok_or_else(|| HarnessError::Unexpected("no admin listener".into()))?;
    let (status, text) = admin_get(&h.client, admin, "/readyz").await?;
    assert_eq!(
        (status, text.as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, "token keys not loaded (the key source has not answered)\n")
    );
    h.stop().await
}

#[tokio::test]
async fn a_gateway_started_while_the_issuer_is_down_becomes_ready_when_keys_load() -> TestResult {
    let key = SigningKey::ec("k1")?;
    let issuer = Issuer::spawn(&[&key]).await?;
    issuer.set_down(true);
    let demo = mrtr_gateway::demo::spawn_loopback(Default::default())?;
    let toml = setup(&issuer, &["jwks_min_refresh_secs = 1", "jwks_timeout_ms = 2000"]).toml(&demo.url());
    let gateway = bounded(
        "the start",
        mrtr_gateway::app::Gateway::start(mrtr_gateway::config::Config::from_toml(&toml)?),
    )
    .await??;
    let client = Client::new(gateway.url("/mcp"));
    assert!(!gateway.ready.is_ready());
    let r = echo(&client, &key.sign(&claims("alice"))?).await?;
    expect_refused(
        &r,
        StatusCode::SERVICE_UNAVAILABLE,
        "unauthorized: token keys unavailable, try again later",
    )?;

    issuer.set_down(false);
    eventually("the keys to load and the gateway to be ready", || gateway.ready.is_ready()).await?;
    expect_ok(&echo(&client, &key.sign(&claims("alice"))?).await?)?;
    bounded("the gateway to drain", gateway.shutdown()).await?;
    bounded("the demo to stop", demo.shutdown()).await??;
    Ok(())
}

#[tokio::test]
async fn keys_are_found_through_the_issuers_discovery_document() -> TestResult {
    let key = SigningKey::ed25519("d1")?;
    let issuer = Issuer::spawn(&[&key]).await?;
    let setup = Setup::new()
        .set("auth", "mode = \"jwt\"")
        .set("auth", &format!("issuer = {:?}", issuer.url()))
        .set("auth", "oidc_discovery = true")
        .set("auth", "audience = \"mrtr\"");
    let h = setup.start().await?;
    let token = key.sign(&json!({"sub": "alice", "iss": issuer.url(), "aud": "mrtr", "exp": now() + 600}))?;
    expect_ok(&echo(&h.client, &token).await?)?;
    assert_eq!((issuer.discovery_fetches(), issuer.jwks_fetches()), (1, 1));
    let foreign = key.sign(&json!({"sub": "alice", "iss": ISSUER, "aud": "mrtr", "exp": now() + 600}))?;
    expect_refused(
        &echo(&h.client, &foreign).await?,
        StatusCode::UNAUTHORIZED,
        "unauthorized: token issuer or audience not accepted",
    )?;
    h.stop().await
}

#[tokio::test]
async fn the_protected_resource_metadata_is_served_on_the_front() -> TestResult {
    let key = SigningKey::ec("k1")?;
    let issuer = Issuer::spawn(&[&key]).await?;
    let h = setup(&issuer, &[]).start().await?;
    let want = json!({
        "resource": RESOURCE,
        "authorization_servers": [ISSUER],
        "scopes_supported": ["tools:echo"],
        "bearer_methods_supported": ["header"],
    });
    for path in ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"] {
        let request = Request::builder()
            .method(Method::GET)
            .uri(h.gateway.url(path))
            .body(Full::new(bytes::Bytes::new()))?;
        let reply = h.client.send_raw(request).await?;
        assert_eq!(
            (reply.status, &reply.content_type, &reply.body),
            (StatusCode::OK, &"application/json".to_owned(), &want),
            "{path}"
        );
    }
    h.stop().await
}

/// A gateway whose one rule lets `tools:echo` holders list tools and call `echo` only, and
/// whose cacheable results are marked `public`.
async fn with_rules() -> TestResult<(Issuer, SigningKey, Harness)> {
    let key = SigningKey::ec("k1")?;
    let issuer = Issuer::spawn(&[&key]).await?;
    let rule =
        r#"rules = [{ scopes = ["tools:echo"], methods = ["tools/list", "tools/call"], tools = ["echo"] }]"#;
    let h = setup(&issuer, &[rule]).set("front", "cache_scope = \"public\"").start().await?;
    Ok((issuer, key, h))
}

#[tokio::test]
async fn a_tool_outside_the_rules_is_forbidden_and_left_out_of_the_list() -> TestResult {
    let (_issuer, key, h) = with_rules().await?;
    let scoped =
        h.client.with_bearer(&key.sign(&with(claims("alice"), "scope", json!("openid tools:echo")))?);
    expect_ok(&raw(scoped.call_tool("echo", json!({"message": "hi"}))).await?)?;

    let r = raw(scoped.call_tool("greet", json!({}))).await?;
    expect_refused(
        &r,
        StatusCode::FORBIDDEN,
        r#"forbidden: tools/call of tool "greet" is outside this client's authorization"#,
    )?;
    assert_eq!(r.body.pointer("/error/code"), Some(&json!(-32600)));
    // No scope would allow `greet`, so the challenge names none.
    assert_eq!(
        r.challenge(),
        format!(r#"Bearer error="insufficient_scope", resource_metadata="{METADATA_URL}""#)
    );

    let list = raw(scoped.request("tools/list")).await?;
    let names: Vec<&str> = list
        .body
        .pointer("/result/tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, vec!["echo"], "{}", list.body);
    assert_eq!(
        list.body.pointer("/result/cacheScope"),
        Some(&json!("private")),
        "a filtered list is never public"
    );
    // Prompts are outside the rule's methods altogether.
    expect_refused(
        &raw(scoped.request("prompts/list")).await?,
        StatusCode::FORBIDDEN,
        "forbidden: prompts/list is outside this client's authorization",
    )?;

    // Without the scope, nothing but discovery.
    let bare = h.client.with_bearer(&key.sign(&claims("bob"))?);
    let r = raw(bare.call_tool("echo", json!({"message": "hi"}))).await?;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    assert_eq!(
        r.challenge(),
        format!(
            r#"Bearer error="insufficient_scope", scope="tools:echo", resource_metadata="{METADATA_URL}""#
        ),
        "the challenge names the scope that would allow the call"
    );
    assert_eq!(raw(bare.request("server/discover")).await?.status, StatusCode::OK);
    assert_eq!(h.demo.stats.tool_calls("greet"), 0);
    assert_eq!(h.metric("mrtr_gateway_auth_denials_total{method=\"tools/call\"}"), 2.0);
    h.stop().await
}

#[tokio::test]
async fn a_legacy_clients_calls_are_held_to_the_same_rules() -> TestResult {
    let (_issuer, key, h) = with_rules().await?;
    let token = key.sign(&with(claims("alice"), "scope", json!("tools:echo")))?;
    let mut client =
        crate::common::legacy_client::LegacyClient::new(h.gateway.url("/mcp")).with_bearer(&token);
    client.initialize(json!({"elicitation": {}})).await?;
    let echoed = client.call_tool("echo", json!({"message": "hi"})).await?;
    assert_eq!(echoed.pointer("/result/content/0/text"), Some(&json!("Echo: hi")), "{echoed}");

    let refused =
        client.post(&client.request_body("tools/call", json!({"name": "greet", "arguments": {}}))).await?;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    let challenge = refused.headers.get(WWW_AUTHENTICATE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    assert!(challenge.starts_with(r#"Bearer error="insufficient_scope""#), "{challenge}");
    let message = refused.messages.last().and_then(|m| m.pointer("/error/message")).cloned();
    assert_eq!(
        message,
        Some(json!(r#"forbidden: tools/call of tool "greet" is outside this client's authorization"#))
    );
    assert_eq!(h.demo.stats.tool_calls("greet"), 0);
    h.stop().await
}

#[tokio::test]
async fn keys_are_fetched_over_tls_trusting_the_configured_ca() -> TestResult {
    let key = SigningKey::ec("k1")?;
    let issuer = Issuer::spawn(&[&key]).await?;
    let pki = super::https::pki("jwks test CA")?;
    let tls = super::https::Terminator::start(&pki, issuer.addr()?).await?;
    let dir = tempfile::tempdir()?;
    let ca = dir.path().join("issuer-ca.pem");
    std::fs::write(&ca, &pki.ca_pem)?;
    let setup = setup(
        &issuer,
        &[
            &format!("jwks_url = \"https://localhost:{}/jwks\"", tls.port()),
            &format!("jwks_ca_file = {:?}", ca.display().to_string()),
        ],
    );
    let h = setup.start().await?;
    expect_ok(&echo(&h.client, &key.sign(&claims("alice"))?).await?)?;
    assert_eq!(issuer.jwks_fetches(), 1);
    h.stop().await?;

    // Without the CA the certificate is not trusted: no keys, and the failure is counted.
    let untrusted = self::setup(
        &issuer,
        &[&format!("jwks_url = \"https://localhost:{}/jwks\"", tls.port()), "jwks_timeout_ms = 2000"],
    );
    let demo = mrtr_gateway::demo::spawn_loopback(Default::default())?;
    let config = mrtr_gateway::config::Config::from_toml(&untrusted.toml(&demo.url()))?;
    let gateway = bounded("the start", mrtr_gateway::app::Gateway::start(config)).await??;
    let client = Client::new(gateway.url("/mcp"));
    let r = echo(&client, &key.sign(&claims("alice"))?).await?;
    expect_refused(
        &r,
        StatusCode::SERVICE_UNAVAILABLE,
        "unauthorized: token keys unavailable, try again later",
    )?;
    assert_eq!(issuer.jwks_fetches(), 1, "no request got through the TLS handshake");
    assert!(
        crate::common::harness::metric(&gateway, "mrtr_gateway_auth_key_fetches_total{outcome=\"connect\"}")
            >= 1.0
    );
    bounded("the gateway to drain", gateway.shutdown()).await?;
    bounded("the demo to stop", demo.shutdown()).await??;
    Ok(())
}
