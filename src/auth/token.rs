//! Checking one bearer token: the `Authorization` header, the key that may verify it (by `kid`
//! and by algorithm family, so an HS token is never checked against a public key's bytes and
//! `alg: none` never parses), the signature, then `exp`, `nbf`, `iss` and `aud` with the
//! configured leeway. The principal is `iss|sub`.

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

/// `iss|sub` of verified claims.
pub(crate) fn principal(claims: &Map<String, Value>) -> Result<Arc<str>, AuthError> {
    let sub = claims.get("sub").and_then(Value::as_str).ok_or(AuthError::NoSubject)?;
    let iss = claims.get("iss").and_then(Value::as_str).unwrap_or_default();
    Ok(Arc::from(format!("{iss}|{sub}")))
}

// === impl Verifier ===

impl Verifier {
    pub(crate) fn new(cfg: &JwtConfig) -> Self {
        // The algorithm is set per key and token in `verify`; this one is a placeholder.
        let mut v = Validation::new(jsonwebtoken::Algorithm::HS256);
        v.set_required_spec_claims(&["exp", "sub"]);
        v.validate_nbf = true;
        v.leeway = cfg.leeway.as_secs();
        if let Some(iss) = &cfg.issuer {
            v.set_issuer(&[iss]);
        }
        match &cfg.audience {
            Some(aud) => v.set_audience(&[aud]),
            None => v.validate_aud = false,
        }
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
