//! Checking one bearer token: the `Authorization` header, the key that may verify it (by `kid`
//! and by algorithm family, so an HS token is never checked against a public key's bytes and
//! `alg: none` never parses), the signature, then `exp`, `nbf`, `iss` and `aud` with the
//! configured leeway. A configured issuer or audience makes its claim required: a token that
//! leaves `iss` or `aud` out (or sets it to `null`) is refused, not let through unchecked
//! (RFC 8707: a token must name the resource it is for).
//!
//! The principal is `iss|sub`, with `%` and `|` of the issuer percent-escaped (`%25`, `%7C`):
//! the first `|` always ends the issuer, so two tokens share a principal only when both
//! claims are equal (unescaped, `iss=a, sub=b|c` and `iss=a|b, sub=c` would be one client).
//! Issuers are URLs in practice and stay as they are. `sub` must be a non-empty string.

use std::borrow::Cow;
use std::sync::Arc;

use http::header::AUTHORIZATION;
use http::HeaderMap;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{decode, Header, Validation};
use serde_json::{Map, Value};

use super::keys::Key;
use super::AuthError;
use crate::config::JwtConfig;

/// The claim checks every token gets, built once.
pub(crate) struct Verifier {
    base: Validation,
}

/// The token of a bearer `Authorization` header.
pub(crate) fn bearer(headers: &HeaderMap) -> Result<&str, AuthError> {
    let value = headers.get(AUTHORIZATION).ok_or(AuthError::Missing)?;
    let text = value.to_str().map_err(|_| AuthError::NotBearer)?;
    let (scheme, token) = text.split_once(' ').ok_or(AuthError::NotBearer)?;
    if !scheme.eq_ignore_ascii_case("bearer") || token.trim().is_empty() {
        return Err(AuthError::NotBearer);
    }
    Ok(token.trim())
}

/// `iss|sub` of verified claims, the issuer escaped (see the module doc). A token without
/// `iss` (no issuer configured) has an empty one.
pub(crate) fn principal(claims: &Map<String, Value>) -> Result<Arc<str>, AuthError> {
    let sub = match claims.get("sub") {
        Some(Value::String(sub)) if !sub.is_empty() => sub,
        _ => return Err(AuthError::NoSubject),
    };
    let iss = match claims.get("iss") {
        None | Some(Value::Null) => "",
        Some(Value::String(iss)) => iss,
        // A list passes the library's issuer check when it holds the configured one.
        Some(_) => return Err(AuthError::IssuerNotString),
    };
    Ok(Arc::from(format!("{}|{sub}", escape_issuer(iss))))
}

/// The issuer with `%` and `|` percent-escaped, so it never holds the separator.
fn escape_issuer(iss: &str) -> Cow<'_, str> {
    if !iss.contains(['%', '|']) {
        return Cow::Borrowed(iss);
    }
    Cow::Owned(iss.replace('%', "%25").replace('|', "%7C"))
}

// === impl Verifier ===

impl Verifier {
    pub(crate) fn new(cfg: &JwtConfig) -> Self {
        // The algorithm is set per key and token in `verify`; this one is a placeholder.
        let mut v = Validation::new(jsonwebtoken::Algorithm::HS256);
        v.validate_nbf = true;
        v.leeway = cfg.leeway.as_secs();
        // The library checks `iss` and `aud` only when present: a configured one is required.
        let mut required = vec!["exp", "sub"];
        if let Some(iss) = &cfg.issuer {
            v.set_issuer(&[iss]);
            required.push("iss");
        }
        match &cfg.audience {
            Some(aud) => {
                v.set_audience(&[aud]);
                required.push("aud");
            }
            None => v.validate_aud = false,
        }
        v.set_required_spec_claims(&required);
        Self { base: v }
    }

    /// Verifies `token` against the first of `keys` that may verify its `kid` and `alg` and
    /// whose signature holds; its claims are then checked.
    pub(crate) fn verify<'a>(
        &self,
        token: &str,
        header: &Header,
        keys: impl Iterator<Item = &'a Key>,
    ) -> Result<Map<String, Value>, AuthError> {
        let mut validation = self.base.clone();
        validation.algorithms = vec![header.alg];
        let mut last = None;
        for key in keys.filter(|k| k.accepts(header.alg) && k.matches_kid(header.kid.as_deref())) {
            match decode::<Map<String, Value>>(token, &key.key, &validation) {
                Ok(data) => return Ok(data.claims),
                // Another key (an older one with the same kid, a static one) may still verify it.
                Err(e) if key_failure(e.kind()) => last = Some(e),
                Err(e) => return Err(AuthError::Invalid(e)),
            }
        }
        Err(last.map_or(AuthError::UnknownKey, AuthError::Invalid))
    }
}

/// A failure of this key with this token, not of the token's claims: another key may do.
fn key_failure(kind: &ErrorKind) -> bool {
    matches!(
        kind,
        ErrorKind::InvalidSignature
            | ErrorKind::InvalidEcdsaKey
            | ErrorKind::InvalidEddsaKey
            | ErrorKind::InvalidRsaKey(_)
            | ErrorKind::InvalidKeyFormat
            | ErrorKind::InvalidAlgorithm
            | ErrorKind::Provider(_)
    )
}
