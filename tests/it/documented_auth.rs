//! Claims of docs/src/security.md about client credentials, through a running gateway: the client's
//! `Authorization` never reaches the upstream (which gets `upstream.headers` and the configured
//! `upstream.bearer_token` instead, inline or from secret files), and JWTs are checked against
//! `auth.jwt_public_key_file` (RSA and EC keys made here, never stored), `auth.jwt_issuer` and
//! `auth.jwt_audience` (required claims when set), and an issuer and subject that join to the same
//! text are still two principals.

use http::StatusCode;
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use serde_json::{json, Value};

use super::form_only;
use crate::common::answers::NAME;
use crate::common::faulty::{tools, FaultyLegacy};
use crate::common::{answer_all, bounded, Client, HarnessError, Setup, TestResult};

const ISSUER: &str = "https://issuer.test";
const HS_SECRET: &str = "front-jwt-secret-for-tests";
const UPSTREAM_KEY: &str = "upstream-credential-42";

fn claims(issuer: &str) -> Value {
    json!({"sub": "alice", "iss": issuer, "exp": 4_000_000_000u64})
}

fn hs_token(issuer: &str) -> TestResult<String> {
    Ok(encode(
        &Header::new(Algorithm::HS256),
        &claims(issuer),
        &EncodingKey::from_secret(HS_SECRET.as_bytes()),
    )?)
}

/// Runs a two-round call and a plain one as `client`, then stops the gateway (which DELETEs its
/// sessions), so every kind of upstream request has been made.
async fn every_kind_of_upstream_request(gateway: mrtr_gateway::app::Gateway, client: &Client) -> TestResult {
    let call = || client.call_tool(tools::ASK, json!({})).caps(form_only());
    let (requests, state) = call().send().await?.input_required()?;
    let done = call().state(&state).responses(answer_all(&requests)).send().await?;
    assert_eq!(done.text()?, format!("Hello, {NAME}"));
    let ok = client.call_tool(tools::OK, json!({})).send().await?;
    assert!(ok.text()?.starts_with("ok from s"), "{ok:?}");
    bounded("the gateway to drain", gateway.shutdown()).await
}

/// Fails unless no upstream request carried `Authorization` and every one carried the
/// configured upstream credential.
fn assert_only_upstream_credentials(upstream: &FaultyLegacy) {
    let stats = upstream.stats();
    let (n, keys) = stats.requests_and_header("x-api-key");
    assert!(n >= 6, "initialize, calls, answers, cancels and DELETEs: {n}");
    assert_eq!(stats.header_values("authorization"), Vec::<String>::new());
    assert_eq!(keys, vec![UPSTREAM_KEY.to_owned(); n]);
    assert!(stats.deletes() >= 1, "the shutdown DELETEs were seen too");
}

fn with_upstream_key(setup: Setup) -> Setup {
    setup.set("upstream", &format!("headers = {{ \"x-api-key\" = {UPSTREAM_KEY:?} }}"))
}

#[tokio::test]
async fn a_validated_bearer_never_reaches_the_upstream() -> TestResult {
    let upstream = FaultyLegacy::spawn().await?;
    let setup = with_upstream_key(Setup::new())
        .set("auth", "mode = \"jwt\"")
        .set("auth", &format!("jwt_hs256_secret = {HS_SECRET:?}"));
    let (gateway, client) = setup.attach_url(&upstream.url()).await?;
    let client = client.with_bearer(&hs_token(ISSUER)?);
    every_kind_of_upstream_request(gateway, &client).await?;
    assert_only_upstream_credentials(&upstream);
    Ok(())
}

/// The upstream's own bearer token and API key come from secret files; the client's validated
/// bearer is replaced by the configured one on every upstream request, never added to it.
#[tokio::test]
async fn the_configured_upstream_bearer_is_sent_instead_of_the_clients() -> TestResult {
    const UPSTREAM_BEARER: &str = "upstream-bearer-7";
    let upstream = FaultyLegacy::spawn().await?;
    let dir = tempfile::tempdir()?;
    let (bearer_file, key_file) = (dir.path().join("bearer"), dir.path().join("api-key"));
    std::fs::write(&bearer_file, format!("{UPSTREAM_BEARER}\n"))?;
    std::fs::write(&key_file, UPSTREAM_KEY)?;
    let setup = Setup::new()
        .set("upstream", &format!("bearer_token_file = {:?}", bearer_file.display().to_string()))
        .set(
            "upstream",
            &format!("headers = {{ \"x-api-key\" = {{ file = {:?} }} }}", key_file.display().to_string()),
        )
        .set("auth", "mode = \"jwt\"")
        .set("auth", &format!("jwt_hs256_secret = {HS_SECRET:?}"));
    let (gateway, client) = setup.attach_url(&upstream.url()).await?;
    let client_token = hs_token(ISSUER)?;
    every_kind_of_upstream_request(gateway, &client.with_bearer(&client_token)).await?;
    let stats = upstream.stats();
    let (n, bearers) = stats.requests_and_header("authorization");
    assert!(n >= 6, "initialize, calls, answers, cancels and DELETEs: {n}");
    assert_eq!(bearers, vec![format!("Bearer {UPSTREAM_BEARER}"); n]);
    let (n, keys) = stats.requests_and_header("x-api-key");
    assert_eq!(keys, vec![UPSTREAM_KEY.to_owned(); n]);
    Ok(())
}

#[tokio::test]
async fn an_authorization_header_is_dropped_without_auth_too() -> TestResult {
    let upstream = FaultyLegacy::spawn().await?;
    let (gateway, client) = with_upstream_key(Setup::new()).attach_url(&upstream.url()).await?;
    let client = client.with_bearer("client-secret-token");
    every_kind_of_upstream_request(gateway, &client).await?;
    assert_only_upstream_credentials(&upstream);
    Ok(())
}

/// A key pair as PEM: the private half signs here, the public half goes in the gateway's file.
struct KeyPems {
    private: String,
    public: String,
}

fn ec_keys() -> TestResult<KeyPems> {
    let key = rcgen::KeyPair::generate().map_err(|e| HarnessError::Unexpected(format!("EC key: {e}")))?;
    Ok(KeyPems { private: key.serialize_pem(), public: key.public_key_pem() })
}

fn rsa_keys() -> TestResult<KeyPems> {
    use rsa::pkcs8::{EncodePrivateKey, EncodePublicKey, LineEnding};
    let fail = |e: &dyn std::fmt::Display| HarnessError::Unexpected(format!("RSA key: {e}"));
    let key = rsa::RsaPrivateKey::new(&mut rand::thread_rng(), 2048).map_err(|e| fail(&e))?;
    let private = key.to_pkcs8_pem(LineEnding::LF).map_err(|e| fail(&e))?.to_string();
    let public = rsa::RsaPublicKey::from(&key).to_public_key_pem(LineEnding::LF).map_err(|e| fail(&e))?;
    Ok(KeyPems { private, public })
}

/// Signs `claims(issuer)` with `alg` and the PEM private key.
fn signed(alg: Algorithm, private: &str, issuer: &str) -> TestResult<String> {
    let key = match alg {
        Algorithm::RS256 => EncodingKey::from_rsa_pem(private.as_bytes())?,
        _ => EncodingKey::from_ec_pem(private.as_bytes())?,
    };
    Ok(encode(&Header::new(alg), &claims(issuer), &key)?)
}

async fn echo(client: &Client) -> TestResult<crate::common::Reply> {
    client.call_tool("echo", json!({"message": "signed"})).send().await
}

/// `token` with its claims replaced by another subject's, its signature kept: a forgery.
fn forged(token: &str) -> String {
    use base64::Engine as _;
    let claims = json!({"sub": "mallory", "iss": ISSUER, "exp": 4_000_000_000u64}).to_string();
    let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(claims);
    let parts: Vec<&str> = token.split('.').collect();
    format!("{}.{payload}.{}", parts[0], parts[parts.len() - 1])
}

/// A gateway whose `jwt_public_key_file` holds `keys.public` accepts a token signed by its
/// private half, and refuses one with another issuer, a forged one and none at all.
async fn public_key_auth(alg: Algorithm, keys: KeyPems) -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("jwt-public.pem");
    std::fs::write(&path, &keys.public)?;
    let setup = Setup::new()
        .set("auth", "mode = \"jwt\"")
        .set("auth", &format!("jwt_public_key_file = {:?}", path.display().to_string()))
        .set("auth", &format!("jwt_issuer = {ISSUER:?}"));
    let h = setup.start().await?;

    let token = signed(alg, &keys.private, ISSUER)?;
    let good = h.client.with_bearer(&token);
    assert_eq!(echo(&good).await?.text()?, "Echo: signed");

    let foreign = h.client.with_bearer(&signed(alg, &keys.private, "https://other-issuer.test")?);
    let message = echo(&foreign).await?.expect_error(StatusCode::UNAUTHORIZED, -32600)?;
    assert_eq!(message, "unauthorized: token issuer or audience not accepted");

    let message =
        echo(&h.client.with_bearer(&forged(&token))).await?.expect_error(StatusCode::UNAUTHORIZED, -32600)?;
    assert_eq!(message, "unauthorized: invalid token");

    let message = echo(&h.client).await?.expect_error(StatusCode::UNAUTHORIZED, -32600)?;
    assert_eq!(message, "unauthorized: missing bearer token");
    assert_eq!(h.demo.stats.tool_calls("echo"), 1, "only the valid token reached the upstream");
    h.stop().await
}

#[tokio::test]
async fn an_rsa_public_key_file_checks_rs256_tokens_and_the_issuer() -> TestResult {
    public_key_auth(Algorithm::RS256, rsa_keys()?).await
}

#[tokio::test]
async fn an_ec_public_key_file_checks_es256_tokens_and_the_issuer() -> TestResult {
    public_key_auth(Algorithm::ES256, ec_keys()?).await
}

fn hs_sign(claims: &Value) -> TestResult<String> {
    Ok(encode(&Header::new(Algorithm::HS256), claims, &EncodingKey::from_secret(HS_SECRET.as_bytes()))?)
}

/// `jwt_audience` and `jwt_issuer` with the shared secret: a token that leaves out the
/// audience or the issuer, or sets the audience to `null`, is refused as a wrong one is.
#[tokio::test]
async fn the_configured_audience_and_issuer_are_required_with_the_shared_secret() -> TestResult {
    let setup = Setup::new()
        .set("auth", "mode = \"jwt\"")
        .set("auth", &format!("jwt_hs256_secret = {HS_SECRET:?}"))
        .set("auth", &format!("jwt_issuer = {ISSUER:?}"))
        .set("auth", "jwt_audience = \"mrtr\"");
    let h = setup.start().await?;
    let full = json!({"sub": "alice", "iss": ISSUER, "aud": "mrtr", "exp": 4_000_000_000u64});
    let changed = |key: &str, value: Option<Value>| {
        let mut c = full.clone();
        match (c.as_object_mut(), value) {
            (Some(map), None) => drop(map.remove(key)),
            (Some(map), Some(v)) => drop(map.insert(key.to_owned(), v)),
            (None, _) => {}
        }
        hs_sign(&c)
    };
    let cases = [
        (changed("aud", None)?, "unauthorized: token has no `aud` claim"),
        (changed("aud", Some(Value::Null))?, "unauthorized: token has no `aud` claim"),
        (changed("iss", None)?, "unauthorized: token has no `iss` claim"),
        (changed("aud", Some(json!("other")))?, "unauthorized: token issuer or audience not accepted"),
        (
            changed("iss", Some(json!("https://other.test")))?,
            "unauthorized: token issuer or audience not accepted",
        ),
        (changed("sub", Some(json!("")))?, "unauthorized: token has no `sub` claim (a non-empty string)"),
    ];
    for (token, want) in &cases {
        let message =
            echo(&h.client.with_bearer(token)).await?.expect_error(StatusCode::UNAUTHORIZED, -32600)?;
        assert_eq!(&message, want);
    }
    assert_eq!(echo(&h.client.with_bearer(&hs_sign(&full)?)).await?.text()?, "Echo: signed");
    assert_eq!(h.demo.stats.tool_calls("echo"), 1, "only the complete token reached the upstream");
    h.stop().await
}

/// `iss=a, sub=b|c` and `iss=a|b, sub=c` are two clients: a state minted for one is refused
/// for the other (joined plainly, both were the principal `a|b|c`).
#[tokio::test]
async fn claims_that_join_to_the_same_text_are_distinct_principals() -> TestResult {
    let h = Setup::new()
        .set("auth", "mode = \"jwt\"")
        .set("auth", &format!("jwt_hs256_secret = {HS_SECRET:?}"))
        .start()
        .await?;
    let token = |iss: &str, sub: &str| hs_sign(&json!({"sub": sub, "iss": iss, "exp": 4_000_000_000u64}));
    let first = h.client.with_bearer(&token("a", "b|c")?);
    let second = h.client.with_bearer(&token("a|b", "c")?);
    fn greet(client: &Client) -> crate::common::client::Call<'_> {
        client.call_tool("greet", json!({})).caps(form_only())
    }
    let (requests, state) = greet(&first).send().await?.input_required()?;
    let refused = greet(&second).state(&state).responses(answer_all(&requests)).send().await?;
    assert_eq!(refused.expect_error(StatusCode::BAD_REQUEST, -32602)?, "Invalid or expired requestState");
    let done = greet(&first).state(&state).responses(answer_all(&requests)).send().await?;
    assert_eq!(done.text()?, format!("Hello, {NAME}!"));
    h.stop().await
}
