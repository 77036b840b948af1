//! Arbitrary bytes as a client's `Authorization` header, through the gateway's own
//! authentication entry ([`Auth::authenticate`], an HMAC secret, built from config text
//! as an operator writes it) and through `jsonwebtoken::decode_header`, which it relies on.
//!
//! Checks: no panic in either; a token is accepted only when its header parses and names the
//! algorithm family of the configured key (HS256/384/512 for a shared secret: `alg: none` or any
//! asymmetric algorithm never passes), its scheme is `Bearer` in any case (RFC 7235), and the
//! principal is `iss|sub` of the token's claims, the issuer's `%` and `|` escaped.

#![no_main]

use std::future::Future;
use std::sync::OnceLock;
use std::task::{Context, Poll, Waker};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use http::header::AUTHORIZATION;
use http::{HeaderMap, HeaderValue};
use jsonwebtoken::Algorithm;
use libfuzzer_sys::fuzz_target;
use mrtr_gateway::auth::{Auth, AuthMetrics};
use mrtr_gateway::config::Config;

/// The HMAC secret of the fuzz gateway (and of the seed tokens, so mutations of valid tokens
/// reach the claim checks).
pub const SECRET: &str = "mrtr-gateway-fuzz-hs256-secret";

fn auth() -> Option<&'static Auth> {
    static AUTH: OnceLock<Option<Auth>> = OnceLock::new();
    AUTH.get_or_init(|| {
        let toml = format!("[auth]\nmode = \"jwt\"\njwt_hs256_secret = {SECRET:?}\n");
        let metrics = AuthMetrics::detached().expect("auth metrics");
        Config::from_toml(&toml).ok().map(|cfg| Auth::new(&cfg.auth, metrics))
    })
    .as_ref()
}

/// The output of a future that must not wait: authentication with static keys never does.
fn at_once<F: Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("authentication with a static key waited"),
    }
}

/// `iss|sub` read straight from the token's payload, the issuer's `%` and `|` written `%25`
/// and `%7C` (so the first `|` ends it); `None` unless `sub` is a non-empty string.
fn expected_principal(token: &str) -> Option<String> {
    let payload = token.split('.').nth(1)?;
    let claims: serde_json::Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).ok()?).ok()?;
    let iss = claims.get("iss").and_then(|v| v.as_str()).unwrap_or_default();
    let sub = claims.get("sub")?.as_str().filter(|s| !s.is_empty())?;
    Some(format!("{}|{sub}", iss.replace('%', "%25").replace('|', "%7C")))
}

fuzz_target!(|data: &[u8]| {
    let Some(auth) = auth() else { return };
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = jsonwebtoken::decode_header(text);
    }
    let Ok(value) = HeaderValue::from_bytes(data) else { return };
    let mut headers = HeaderMap::new();
    headers.insert(AUTHORIZATION, value);
    let Ok(identity) = at_once(auth.authenticate(&headers)) else { return };
    let principal = identity.principal;
    let text = std::str::from_utf8(data).expect("an accepted header is text");
    let (scheme, token) = text.split_once(' ').expect("a scheme and a token");
    assert!(scheme.eq_ignore_ascii_case("bearer"), "accepted under the scheme {scheme:?}");
    let token = token.trim();
    let header = jsonwebtoken::decode_header(token).expect("an accepted token's header parses");
    let hmac = matches!(header.alg, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512);
    assert!(hmac, "accepted under an algorithm the shared secret cannot verify: {:?}", header.alg);
    assert_eq!(Some(&*principal), expected_principal(token).as_deref(), "principal is not iss|sub");
});
