//! Who the client is. The principal is bound into every sealed `requestState`, so a state minted
//! for one client cannot be replayed by another, and it keys the upstream session pool, so an
//! upstream session is never shared across principals. The client's own token is never passed
//! upstream (authorization: "MUST NOT pass through the token it received").

use std::sync::Arc;

use http::header::AUTHORIZATION;
use http::HeaderMap;
use jsonwebtoken::{decode, Validation};
use serde::Deserialize;

use crate::config::{AuthConfig, JwtConfig};

/// The principal of unauthenticated deployments.
pub const ANONYMOUS: &str = "anonymous";

/// Why a client could not be authenticated (logged; the client gets a 401).
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("missing bearer token")]
    Missing,
    #[error("Authorization is not a bearer token")]
    NotBearer,
    #[error("invalid token: {0}")]
    Invalid(#[from] jsonwebtoken::errors::Error),
    #[error("token has no `sub` claim")]
    NoSubject,
}

/// Authenticates front requests.
#[derive(Debug)]
pub struct Auth {
    mode: Mode,
    anonymous: Arc<str>,
}

#[derive(Debug)]
enum Mode {
    None,
    Jwt(Box<(JwtConfig, Validation)>),
}

#[derive(Deserialize)]
struct Claims {
    sub: Option<String>,
    iss: Option<String>,
}

// === impl Auth ===

impl Auth {
    /// Builds the validator once; a request only decodes.
    pub fn new(cfg: &AuthConfig) -> Self {
        let mode = match cfg {
            AuthConfig::None => Mode::None,
            AuthConfig::Jwt(jwt) => Mode::Jwt(Box::new((jwt.clone(), validation(jwt)))),
        };
        Self { mode, anonymous: Arc::from(ANONYMOUS) }
    }

    /// Whether a 401 should advertise bearer authentication.
    pub fn is_enabled(&self) -> bool {
        matches!(self.mode, Mode::Jwt(..))
    }

    /// The principal of a request: `anonymous`, or `iss|sub` of a valid JWT.
    pub fn principal(&self, headers: &HeaderMap) -> Result<Arc<str>, AuthError> {
        let Mode::Jwt(jwt) = &self.mode else { return Ok(self.anonymous.clone()) };
        let (cfg, validation) = &**jwt;
        let value = headers.get(AUTHORIZATION).ok_or(AuthError::Missing)?;
        let token = value
            .to_str()
            .ok()
            .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
            .ok_or(AuthError::NotBearer)?;
        let claims = decode::<Claims>(token.trim(), &cfg.key, validation)?.claims;
        let sub = claims.sub.ok_or(AuthError::NoSubject)?;
        Ok(Arc::from(format!("{}|{sub}", claims.iss.unwrap_or_default())))
    }
}

fn validation(cfg: &JwtConfig) -> Validation {
    let mut v = Validation::new(cfg.algorithms[0]);
    v.algorithms = cfg.algorithms.clone();
    v.set_required_spec_claims(&["exp", "sub"]);
    if let Some(iss) = &cfg.issuer {
        v.set_issuer(&[iss]);
    }
    match &cfg.audience {
        Some(aud) => v.set_audience(&[aud]),
        None => v.validate_aud = false,
    }
    v
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;
    use jsonwebtoken::{encode, Algorithm, DecodingKey, EncodingKey, Header};
    use serde_json::json;

    use super::*;

    fn jwt_auth() -> Auth {
        Auth::new(&AuthConfig::Jwt(JwtConfig {
            key: DecodingKey::from_secret(b"test-secret"),
            algorithms: vec![Algorithm::HS256],
            issuer: Some("https://issuer.test".into()),
            audience: Some("mrtr".into()),
        }))
    }

    fn bearer(claims: serde_json::Value, secret: &[u8]) -> HeaderMap {
        let token =
            encode(&Header::new(Algorithm::HS256), &claims, &EncodingKey::from_secret(secret)).unwrap();
        let mut h = HeaderMap::new();
        h.insert(AUTHORIZATION, HeaderValue::from_str(&format!("Bearer {token}")).unwrap());
        h
    }

    fn claims(sub: &str) -> serde_json::Value {
        json!({"sub": sub, "iss": "https://issuer.test", "aud": "mrtr", "exp": 4_000_000_000u64})
    }

    #[test]
    fn anonymous_without_auth() {
        assert_eq!(&*Auth::new(&AuthConfig::None).principal(&HeaderMap::new()).unwrap(), ANONYMOUS);
    }

    #[test]
    fn valid_jwt_gives_issuer_and_subject() {
        let p = jwt_auth().principal(&bearer(claims("alice"), b"test-secret")).unwrap();
        assert_eq!(&*p, "https://issuer.test|alice");
    }

    #[test]
    fn bad_tokens_are_refused() {
        let auth = jwt_auth();
        assert!(matches!(auth.principal(&HeaderMap::new()), Err(AuthError::Missing)));
        assert!(matches!(auth.principal(&bearer(claims("a"), b"other")), Err(AuthError::Invalid(_))));
        let mut wrong_aud = claims("a");
        wrong_aud["aud"] = json!("other");
        assert!(matches!(auth.principal(&bearer(wrong_aud, b"test-secret")), Err(AuthError::Invalid(_))));
        let mut expired = claims("a");
        expired["exp"] = json!(1);
        assert!(matches!(auth.principal(&bearer(expired, b"test-secret")), Err(AuthError::Invalid(_))));
    }
}
