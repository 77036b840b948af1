//! The authenticator over static keys: principals, claim checks, `alg: none`, algorithm
//! confusion, and grants from scopes.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use http::header::AUTHORIZATION;
use http::{HeaderMap, HeaderValue};
use jsonwebtoken::{encode, Algorithm, DecodingKey, EncodingKey, Header};
use serde_json::json;

use super::*;
use crate::config::{RuleConfig, StaticKey};

const SECRET: &[u8] = b"test-secret";

fn config(keys: Vec<StaticKey>, rules: Vec<RuleConfig>) -> AuthConfig {
    AuthConfig::Jwt(Box::new(JwtConfig {
        keys,
        remote: None,
        issuer: Some("https://issuer.test".into()),
        audience: Some("mrtr".into()),
        leeway: std::time::Duration::from_secs(5),
        resource: None,
        rules,
    }))
}

fn hs_key() -> StaticKey {
    StaticKey { key: DecodingKey::from_secret(SECRET), algorithms: vec![Algorithm::HS256, Algorithm::HS512] }
}

fn auth(keys: Vec<StaticKey>) -> Auth {
    Auth::new(&config(keys, vec![]), AuthMetrics::detached().unwrap())
}

fn headers(token: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(AUTHORIZATION, HeaderValue::from_str(&format!("Bearer {token}")).unwrap());
    h
}

fn hs(claims: &serde_json::Value, alg: Algorithm, secret: &[u8]) -> String {
    encode(&Header::new(alg), claims, &EncodingKey::from_secret(secret)).unwrap()
}

fn now() -> u64 {
    jsonwebtoken::get_current_timestamp()
}

fn claims(sub: &str) -> serde_json::Value {
    json!({"sub": sub, "iss": "https://issuer.test", "aud": "mrtr", "exp": now() + 600})
}

async fn check(a: &Auth, token: &str) -> Result<Arc<str>, AuthError> {
    a.authenticate(&headers(token)).await.map(|i| i.principal)
}

#[tokio::test]
async fn anonymous_without_auth() {
    let a = Auth::new(&AuthConfig::OPEN, AuthMetrics::detached().unwrap());
    assert_eq!(&*a.authenticate(&HeaderMap::new()).await.unwrap().principal, ANONYMOUS);
}

#[tokio::test]
async fn rules_without_auth_hold_every_anonymous_client() {
    let rule = RuleConfig {
        methods: vec!["*".into()],
        tools: vec!["*".into()],
        deny_tools: vec!["rm".into()],
        ..RuleConfig::default()
    };
    let a = Auth::new(&AuthConfig::None { rules: vec![rule] }, AuthMetrics::detached().unwrap());
    let identity = a.authenticate(&HeaderMap::new()).await.unwrap();
    assert_eq!(&*identity.principal, ANONYMOUS);
    assert!(identity.grants.is_restricted());
    assert!(identity.grants.check("tools/call", Some(&json!({"name": "echo"}))).is_ok());
    let denied = identity.grants.check("tools/call", Some(&json!({"name": "rm"}))).unwrap_err();
    assert!(denied.challenge.is_none(), "no bearer challenge without authentication");
}

#[tokio::test]
async fn a_valid_token_gives_issuer_and_subject_for_each_allowed_hs_algorithm() {
    let a = auth(vec![hs_key()]);
    for alg in [Algorithm::HS256, Algorithm::HS512] {
        assert_eq!(
            &*check(&a, &hs(&claims("alice"), alg, SECRET)).await.unwrap(),
            "https://issuer.test|alice"
        );
    }
    // HS384 is not among this key's algorithms.
    let e = check(&a, &hs(&claims("alice"), Algorithm::HS384, SECRET)).await.unwrap_err();
    assert!(matches!(e, AuthError::UnknownKey), "{e:?}");
}

/// The case fuzzing found when the secret grew from HS256 to the HS family: an HS384 token
/// signed with `jwt_hs256_secret` is accepted, an RS256 header over the same bytes is not.
#[tokio::test]
async fn a_configured_shared_secret_verifies_every_hs_algorithm_and_nothing_else() {
    let toml = "[auth]\nmode = \"jwt\"\njwt_hs256_secret = \"test-secret\"\n";
    let cfg = crate::config::Config::from_toml(toml).unwrap();
    let a = Auth::new(&cfg.auth, AuthMetrics::detached().unwrap());
    let plain = json!({"sub": "alice", "iss": "https://issuer.test", "exp": now() + 600});
    for alg in [Algorithm::HS256, Algorithm::HS384, Algorithm::HS512] {
        assert_eq!(&*check(&a, &hs(&plain, alg, SECRET)).await.unwrap(), "https://issuer.test|alice");
    }
    let token = hs(&plain, Algorithm::HS256, SECRET);
    let rs_header = URL_SAFE_NO_PAD.encode(br#"{"typ":"JWT","alg":"RS256"}"#);
    let forged = format!("{rs_header}.{}", token.split_once('.').unwrap().1);
    assert!(check(&a, &forged).await.is_err());
}

#[tokio::test]
async fn claims_are_checked_with_the_leeway() {
    let a = auth(vec![hs_key()]);
    let with = |k: &str, v: serde_json::Value| {
        let mut c = claims("a");
        c[k] = v;
        hs(&c, Algorithm::HS256, SECRET)
    };
    let kind = |r: Result<Arc<str>, AuthError>| match r {
        Err(AuthError::Invalid(e)) => format!("{:?}", e.kind()),
        other => format!("{other:?}"),
    };
    assert_eq!(kind(check(&a, &with("exp", json!(now() - 60))).await), "ExpiredSignature");
    assert_eq!(kind(check(&a, &with("nbf", json!(now() + 60))).await), "ImmatureSignature");
    assert_eq!(kind(check(&a, &with("aud", json!("other"))).await), "InvalidAudience");
    assert_eq!(kind(check(&a, &with("iss", json!("https://other.test"))).await), "InvalidIssuer");
    // Within the 5 s leeway both ways.
    assert!(check(&a, &with("exp", json!(now() - 2))).await.is_ok());
    assert!(check(&a, &with("nbf", json!(now() + 2))).await.is_ok());
    assert!(matches!(
        check(&a, &hs(&claims("a"), Algorithm::HS256, b"wrong")).await,
        Err(AuthError::Invalid(_))
    ));
}

#[tokio::test]
async fn alg_none_is_refused() {
    let a = auth(vec![hs_key()]);
    let head = URL_SAFE_NO_PAD.encode(br#"{"alg":"none","typ":"JWT"}"#);
    let body = URL_SAFE_NO_PAD.encode(claims("mallory").to_string());
    for token in [format!("{head}.{body}."), format!("{head}.{body}.c2ln")] {
        assert!(matches!(check(&a, &token).await, Err(AuthError::Invalid(_))), "{token}");
    }
}

#[tokio::test]
async fn an_hs_token_signed_with_the_rsa_public_key_is_refused() {
    use rsa::pkcs8::{EncodePublicKey, LineEnding};
    let private = rsa::RsaPrivateKey::new(&mut rand::thread_rng(), 2048).unwrap();
    let public_pem = rsa::RsaPublicKey::from(&private).to_public_key_pem(LineEnding::LF).unwrap();
    let rsa_key = StaticKey {
        key: DecodingKey::from_rsa_pem(public_pem.as_bytes()).unwrap(),
        algorithms: vec![Algorithm::RS256],
    };
    let a = auth(vec![rsa_key]);
    let forged = hs(&claims("mallory"), Algorithm::HS256, public_pem.as_bytes());
    assert!(matches!(check(&a, &forged).await, Err(AuthError::UnknownKey)));
}

#[tokio::test]
async fn bearer_parsing() {
    let a = auth(vec![hs_key()]);
    assert!(matches!(a.authenticate(&HeaderMap::new()).await, Err(AuthError::Missing)));
    let mut basic = HeaderMap::new();
    basic.insert(AUTHORIZATION, HeaderValue::from_static("Basic YTpi"));
    assert!(matches!(a.authenticate(&basic).await, Err(AuthError::NotBearer)));
    let token = hs(&claims("bob"), Algorithm::HS256, SECRET);
    // The scheme is case-insensitive (RFC 7235), in any mix of cases (a case fuzzing found).
    for scheme in ["bearer", "BEARER", "BearEr"] {
        let mut h = HeaderMap::new();
        h.insert(AUTHORIZATION, HeaderValue::from_str(&format!("{scheme} {token}")).unwrap());
        assert_eq!(&*a.authenticate(&h).await.unwrap().principal, "https://issuer.test|bob");
    }
}

#[tokio::test]
async fn grants_follow_the_token_scopes() {
    let rule = RuleConfig {
        scopes: vec!["tools:echo".into()],
        methods: vec!["*".into()],
        tools: vec!["echo".into()],
        ..RuleConfig::default()
    };
    let a = Auth::new(&config(vec![hs_key()], vec![rule]), AuthMetrics::detached().unwrap());
    let mut scoped = claims("a");
    scoped["scope"] = json!("openid tools:echo");
    let grants = a.authenticate(&headers(&hs(&scoped, Algorithm::HS256, SECRET))).await.unwrap().grants;
    assert!(grants.check("tools/call", Some(&json!({"name": "echo"}))).is_ok());
    assert!(grants.check("tools/call", Some(&json!({"name": "other"}))).is_err());
    let bare = a.authenticate(&headers(&hs(&claims("b"), Algorithm::HS256, SECRET))).await.unwrap().grants;
    let denied = bare.check("tools/call", Some(&json!({"name": "echo"}))).unwrap_err();
    assert_eq!(
        denied.challenge.as_ref().unwrap().to_str().unwrap(),
        r#"Bearer error="insufficient_scope", scope="tools:echo""#
    );
}

#[tokio::test]
async fn a_token_is_tried_against_every_key_that_may_verify_it() {
    let other =
        StaticKey { key: DecodingKey::from_secret(b"older-secret"), algorithms: vec![Algorithm::HS256] };
    let a = auth(vec![other, hs_key()]);
    // The first key's signature check fails; the second one verifies.
    assert_eq!(
        &*check(&a, &hs(&claims("carol"), Algorithm::HS256, SECRET)).await.unwrap(),
        "https://issuer.test|carol"
    );
    // A claim failure after a good signature is final, whatever keys follow.
    let expired = with_exp(claims("carol"), now() - 600);
    let e = check(&a, &hs(&expired, Algorithm::HS256, b"older-secret")).await.unwrap_err();
    assert!(
        matches!(&e, AuthError::Invalid(j) if *j.kind() == jsonwebtoken::errors::ErrorKind::ExpiredSignature),
        "{e:?}"
    );
}

fn with_exp(mut c: serde_json::Value, exp: u64) -> serde_json::Value {
    c["exp"] = json!(exp);
    c
}

fn missing_claim(r: Result<Arc<str>, AuthError>) -> String {
    match r {
        Err(AuthError::Invalid(e)) => match e.kind() {
            jsonwebtoken::errors::ErrorKind::MissingRequiredClaim(c) => c.clone(),
            other => format!("{other:?}"),
        },
        other => format!("{other:?}"),
    }
}

/// A configured audience or issuer is required, not only checked when the token carries it:
/// a token that leaves it out, or sets it to `null`, is refused like a wrong one.
#[tokio::test]
async fn a_configured_audience_and_issuer_are_required_claims() {
    let a = auth(vec![hs_key()]);
    let without = |k: &str| {
        let mut c = claims("a");
        c.as_object_mut().unwrap().remove(k);
        hs(&c, Algorithm::HS256, SECRET)
    };
    let with = |k: &str, v: serde_json::Value| {
        let mut c = claims("a");
        c[k] = v;
        hs(&c, Algorithm::HS256, SECRET)
    };
    assert_eq!(missing_claim(check(&a, &without("aud")).await), "aud");
    assert_eq!(missing_claim(check(&a, &with("aud", json!(null))).await), "aud");
    assert_eq!(missing_claim(check(&a, &with("aud", json!(7))).await), "aud");
    assert_eq!(missing_claim(check(&a, &without("iss")).await), "iss");
    assert_eq!(missing_claim(check(&a, &with("iss", json!(null))).await), "iss");
    // An empty list names no audience.
    assert!(matches!(check(&a, &with("aud", json!([]))).await, Err(AuthError::Invalid(_))));
    // A list holding the audience is an audience (RFC 7519 §4.1.3).
    assert!(check(&a, &with("aud", json!(["other", "mrtr"]))).await.is_ok());
    // A list of issuers passes the library's check but names no one principal.
    let listed = check(&a, &with("iss", json!(["https://issuer.test"]))).await;
    assert!(matches!(listed, Err(AuthError::IssuerNotString)), "{listed:?}");

    // Neither is required when not configured.
    let open = Auth::new(
        &AuthConfig::Jwt(Box::new(JwtConfig {
            keys: vec![hs_key()],
            remote: None,
            issuer: None,
            audience: None,
            leeway: std::time::Duration::from_secs(5),
            resource: None,
            rules: vec![],
        })),
        AuthMetrics::detached().unwrap(),
    );
    let bare = json!({"sub": "a", "exp": now() + 600});
    assert_eq!(&*check(&open, &hs(&bare, Algorithm::HS256, SECRET)).await.unwrap(), "|a");
}

#[tokio::test]
async fn the_subject_is_a_non_empty_string() {
    let a = auth(vec![hs_key()]);
    let with_sub = |v: serde_json::Value| {
        let mut c = claims("a");
        c["sub"] = v;
        hs(&c, Algorithm::HS256, SECRET)
    };
    let empty = check(&a, &with_sub(json!(""))).await;
    assert!(matches!(empty, Err(AuthError::NoSubject)), "{empty:?}");
    for v in [json!(42), json!(null)] {
        assert_eq!(missing_claim(check(&a, &with_sub(v.clone())).await), "sub", "{v}");
    }
    // The library fails to read a list there at all: refused all the same.
    assert!(matches!(check(&a, &with_sub(json!(["a"]))).await, Err(AuthError::Invalid(_))));
}

/// `iss=a, sub=b|c` and `iss=a|b, sub=c` joined plainly are both `a|b|c`: one client.
#[test]
fn the_principal_tells_apart_claims_that_join_to_the_same_text() {
    let principal = |iss: &str, sub: &str| {
        let claims = json!({"iss": iss, "sub": sub});
        token::principal(claims.as_object().unwrap()).unwrap()
    };
    assert_ne!(principal("a", "b|c"), principal("a|b", "c"));
    assert_eq!(&*principal("a", "b|c"), "a|b|c");
    assert_eq!(&*principal("a|b", "c"), "a%7Cb|c");
    // The escape itself is escaped, so an issuer spelling it is another issuer.
    assert_ne!(principal("a%7Cb", "c"), principal("a|b", "c"));
    assert_eq!(&*principal("a%7Cb", "c"), "a%257Cb|c");
    // Plain issuers keep their form, and no principal is the anonymous one.
    assert_eq!(&*principal("https://issuer.test", "alice"), "https://issuer.test|alice");
    assert_ne!(&*principal("", "anonymous"), ANONYMOUS);
}

/// `auth_rejections_total` counts each refusal under its own fixed label.
#[tokio::test]
async fn every_refusal_is_counted_under_its_own_label() {
    use jsonwebtoken::errors::{Error, ErrorKind};
    let invalid = |kind: ErrorKind| AuthError::Invalid(Error::from(kind)).label();
    let labels = [
        (AuthError::Missing.label(), "missing"),
        (AuthError::NotBearer.label(), "not_bearer"),
        (AuthError::NoSubject.label(), "no_subject"),
        (AuthError::IssuerNotString.label(), "issuer"),
        (AuthError::UnknownKey.label(), "unknown_key"),
        (AuthError::KeysUnavailable.label(), "keys_unavailable"),
        (invalid(ErrorKind::ExpiredSignature), "expired"),
        (invalid(ErrorKind::ImmatureSignature), "not_yet_valid"),
        (invalid(ErrorKind::InvalidIssuer), "issuer"),
        (invalid(ErrorKind::InvalidAudience), "audience"),
        (invalid(ErrorKind::InvalidSignature), "signature"),
        (invalid(ErrorKind::InvalidAlgorithm), "algorithm"),
        (invalid(ErrorKind::InvalidAlgorithmName), "algorithm"),
        (invalid(ErrorKind::MissingRequiredClaim("aud".into())), "missing_claim"),
        (invalid(ErrorKind::InvalidToken), "malformed"),
    ];
    for (got, want) in labels {
        assert_eq!(got, want);
    }
    let a = auth(vec![hs_key()]);
    let expired = with_exp(claims("a"), now() - 600);
    assert!(check(&a, &hs(&expired, Algorithm::HS256, SECRET)).await.is_err());
    assert!(check(&a, &hs(&claims("a"), Algorithm::HS256, SECRET)).await.is_ok());
    let rejections = |label: &str| a.metrics.rejections.with_label_values(&[label]).get();
    assert_eq!((rejections("expired"), rejections("malformed")), (1, 0));
}

fn with_resource(resource: &str) -> AuthConfig {
    let mut cfg = config(vec![hs_key()], vec![]);
    if let AuthConfig::Jwt(jwt) = &mut cfg {
        jwt.resource = Some(crate::config::ResourceConfig {
            resource: resource.into(),
            authorization_servers: vec!["https://as.test".into()],
            scopes_supported: vec![],
            bearer_methods_supported: vec!["header".into()],
        });
    }
    cfg
}

/// A 401 points to the metadata document only when the gateway serves one, and an error code
/// is given only when credentials were sent (RFC 6750 §3.1).
#[test]
fn metadata_and_challenges_follow_the_configuration() {
    let open = Auth::new(&AuthConfig::OPEN, AuthMetrics::detached().unwrap());
    assert!(!open.is_enabled());
    assert_eq!(format!("{open:?}"), "Auth { enabled: false, .. }");
    assert!(open.metadata_at(WELL_KNOWN).is_none());
    assert!(open.readiness_check().is_none());
    assert_eq!(open.challenge(&AuthError::Missing), r#"Bearer realm="mrtr-gateway""#);

    let a = Auth::new(&with_resource("https://gw.test/mcp"), AuthMetrics::detached().unwrap());
    assert!(a.is_enabled());
    assert_eq!(format!("{a:?}"), "Auth { enabled: true, .. }");
    assert!(a.readiness_check().is_none(), "static keys are always ready");
    let doc: serde_json::Value = serde_json::from_slice(&a.metadata_at(WELL_KNOWN).unwrap()).unwrap();
    assert_eq!(doc["resource"], "https://gw.test/mcp");
    assert!(a.metadata_at("/.well-known/other").is_none());
    let url = r#"resource_metadata="https://gw.test/.well-known/oauth-protected-resource/mcp""#;
    assert_eq!(a.challenge(&AuthError::Missing), format!(r#"Bearer realm="mrtr-gateway", {url}"#).as_str());
    assert_eq!(
        a.challenge(&AuthError::UnknownKey),
        format!(r#"Bearer realm="mrtr-gateway", error="invalid_token", {url}"#).as_str()
    );
}

#[test]
fn denials_are_counted_by_method() {
    let a = auth(vec![hs_key()]);
    let denied = Denied { message: "forbidden".into(), challenge: None, method: "tools/call" };
    a.count_denial(&denied);
    a.count_denial(&denied);
    assert_eq!(a.metrics.denials.with_label_values(&["tools/call"]).get(), 2);
}

// === remote keys ===

const JWKS: &str = "/jwks";

/// A JWKS holding the shared secret under `kid`.
fn jwks(kid: &str) -> String {
    json!({"keys": [{"kty": "oct", "kid": kid, "k": URL_SAFE_NO_PAD.encode(SECRET)}]}).to_string()
}

fn remote_config(server: &test_support::KeyServer, min_refresh: std::time::Duration) -> AuthConfig {
    let mut cfg = config(vec![], vec![]);
    if let AuthConfig::Jwt(jwt) = &mut cfg {
        jwt.remote = Some(crate::config::RemoteKeys {
            source: crate::config::KeySource::Jwks(server.url(JWKS).parse().unwrap()),
            refresh: std::time::Duration::from_secs(3600),
            min_refresh,
            max_stale: std::time::Duration::from_secs(3600),
            timeout: std::time::Duration::from_secs(10),
            wait: std::time::Duration::from_secs(10),
            ca_file: None,
        });
    }
    cfg
}

/// An authenticator of `server`'s keys; with `eager`, a token's unknown `kid` may fetch at once.
async fn start(server: &test_support::KeyServer, eager: bool, logs: &test_support::LogSink) -> Auth {
    use tracing::instrument::WithSubscriber as _;
    let outbound = crate::outbound::OutboundMetrics::detached().unwrap();
    let min_refresh = std::time::Duration::from_secs(if eager { 0 } else { 3600 });
    let cfg = remote_config(server, min_refresh);
    let started = Auth::start(&cfg, "/mcp", AuthMetrics::detached().unwrap(), &outbound);
    started.with_subscriber(logs.subscriber()).await.unwrap()
}

fn kid_token(kid: &str, sub: &str) -> String {
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some(kid.into());
    encode(&header, &claims(sub), &EncodingKey::from_secret(SECRET)).unwrap()
}

/// The first fetch at start loads the keys (and says nothing), or fails loudly and leaves
/// `/readyz` failing and tokens refused as unverifiable for now (503), not as bad (401).
#[tokio::test]
async fn the_first_fetch_decides_readiness_and_is_logged_only_when_it_fails() {
    let server = test_support::KeyServer::start().await;
    let logs = test_support::LogSink::default();
    let down = start(&server, false, &logs).await;
    assert!(!down.readiness_check().expect("a remote check")());
    assert!(logs.text().contains("no token keys could be fetched at start"), "{}", logs.text());
    let refused = check(&down, &kid_token("k1", "alice")).await;
    assert!(matches!(refused, Err(AuthError::KeysUnavailable)), "{refused:?}");

    server.answer(JWKS, 200, jwks("k1"));
    let logs = test_support::LogSink::default();
    let up = start(&server, false, &logs).await;
    assert!(up.readiness_check().expect("a remote check")());
    assert!(!logs.text().contains("no token keys"), "{}", logs.text());
    assert_eq!(&*check(&up, &kid_token("k1", "alice")).await.unwrap(), "https://issuer.test|alice");
}

/// A token naming a `kid` the cache does not hold fetches the keys again before it is
/// judged; a known `kid` does not.
#[tokio::test]
async fn an_unknown_kid_fetches_the_keys_again_and_a_known_one_does_not() {
    let server = test_support::KeyServer::start().await;
    server.answer(JWKS, 200, jwks("k1"));
    let a = start(&server, true, &test_support::LogSink::default()).await;
    assert_eq!(server.hits(JWKS), 1);
    assert!(check(&a, &kid_token("k1", "alice")).await.is_ok());
    assert_eq!(server.hits(JWKS), 1, "a known kid is served from the cache");

    server.answer(JWKS, 200, jwks("k2"));
    assert_eq!(&*check(&a, &kid_token("k2", "bob")).await.unwrap(), "https://issuer.test|bob");
    assert_eq!(server.hits(JWKS), 2);
}
