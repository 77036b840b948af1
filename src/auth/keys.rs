//! Token-verifying keys and which algorithms each may verify. A key is only ever tried for an
//! algorithm of its own family (an HS token is never checked against an RSA key's bytes), and a
//! JWKS key that names its `alg` is only tried for that one. Keys come from the configuration
//! (no `kid`) or from a JWKS document, parsed key by key so one key of an unknown type does not
//! hide the others.

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde::Deserialize;

use crate::config::StaticKey;

/// One usable key.
#[derive(Clone)]
pub(crate) struct Key {
    pub(crate) kid: Option<String>,
    pub(crate) key: DecodingKey,
    /// The algorithms this key may verify (already narrowed to its own `alg`, if it had one).
    pub(crate) algorithms: Vec<Algorithm>,
}

/// Why a JWKS document gave no keys.
#[derive(Debug, thiserror::Error)]
pub enum JwksError {
    #[error("not a JWKS document: {0}")]
    Json(#[from] serde_json::Error),
    #[error("the document holds no usable signing key ({skipped} skipped)")]
    Empty { skipped: usize },
}

#[derive(Deserialize)]
struct RawSet {
    keys: Vec<serde_json::Value>,
}

// === impl Key ===

impl Key {
    pub(crate) fn from_static(k: &StaticKey) -> Self {
        Self { kid: None, key: k.key.clone(), algorithms: k.algorithms.clone() }
    }

    /// Whether a token signed with `alg` may be checked against this key.
    pub(crate) fn accepts(&self, alg: Algorithm) -> bool {
        self.algorithms.contains(&alg) && alg.family() == self.key.family()
    }

    /// Whether a token naming `kid` (or none) may be checked against this key: a key without a
    /// `kid` is tried for any token, a key with one only for tokens naming it.
    pub(crate) fn matches_kid(&self, kid: Option<&str>) -> bool {
        match (kid, &self.kid) {
            (Some(want), Some(have)) => want == have,
            (None, Some(_)) | (_, None) => true,
        }
    }

    /// A JWKS entry as a key, or `None` when it is not a signing key the gateway can use.
    fn from_jwk(jwk: &Jwk) -> Option<Self> {
        if matches!(&jwk.common.public_key_use, Some(u) if *u != PublicKeyUse::Signature) {
            return None;
        }
        let family = family_algorithms(&jwk.algorithm)?;
        let algorithms = match jwk.common.key_algorithm {
            None => family,
            Some(ka) => vec![algorithm(ka).filter(|a| family.contains(a))?],
        };
        let key = DecodingKey::from_jwk(jwk).ok()?;
        Some(Self { kid: jwk.common.key_id.clone(), key, algorithms })
    }
}

/// Parses a JWKS document into its usable signing keys.
pub(crate) fn parse_jwks(bytes: &[u8]) -> Result<Vec<Key>, JwksError> {
    let set: RawSet = serde_json::from_slice(bytes)?;
    let total = set.keys.len();
    let keys: Vec<Key> = set
        .keys
        .into_iter()
        .filter_map(|v| serde_json::from_value::<Jwk>(v).ok())
        .filter_map(|jwk| Key::from_jwk(&jwk))
        .collect();
    if keys.is_empty() {
        return Err(JwksError::Empty { skipped: total });
    }
    Ok(keys)
}

/// The algorithms a key of this type and curve can verify.
fn family_algorithms(params: &AlgorithmParameters) -> Option<Vec<Algorithm>> {
    use Algorithm::*;
    Some(match params {
        AlgorithmParameters::RSA(_) => vec![RS256, RS384, RS512, PS256, PS384, PS512],
        AlgorithmParameters::EllipticCurve(p) => match p.curve {
            EllipticCurve::P256 => vec![ES256],
            EllipticCurve::P384 => vec![ES384],
            _ => return None,
        },
        AlgorithmParameters::OctetKeyPair(p) if p.curve == EllipticCurve::Ed25519 => vec![EdDSA],
        AlgorithmParameters::OctetKeyPair(_) => return None,
        AlgorithmParameters::OctetKey(_) => vec![HS256, HS384, HS512],
    })
}

fn algorithm(ka: KeyAlgorithm) -> Option<Algorithm> {
    ka.to_string().parse().ok()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn keys(doc: serde_json::Value) -> Result<Vec<Key>, JwksError> {
        parse_jwks(doc.to_string().as_bytes())
    }

    #[test]
    fn a_key_is_tried_only_for_its_family_and_its_own_alg() {
        let set = keys(json!({"keys": [
            {"kty": "oct", "kid": "h", "k": "c2VjcmV0"},
            {"kty": "oct", "kid": "h2", "alg": "HS384", "k": "c2VjcmV0"},
        ]}))
        .unwrap();
        assert!(set[0].accepts(Algorithm::HS256) && set[0].accepts(Algorithm::HS512));
        assert!(!set[0].accepts(Algorithm::RS256));
        assert!(set[1].accepts(Algorithm::HS384) && !set[1].accepts(Algorithm::HS256));
    }

    #[test]
    fn unusable_entries_are_skipped_and_an_empty_set_is_an_error() {
        let set = keys(json!({"keys": [
            {"kty": "oct", "kid": "enc", "use": "enc", "k": "c2VjcmV0"},
            {"kty": "oct", "kid": "rsa-alg", "alg": "RS256", "k": "c2VjcmV0"},
            {"kty": "weird"},
            {"kty": "oct", "kid": "ok", "k": "c2VjcmV0"},
        ]}))
        .unwrap();
        assert_eq!(set.iter().map(|k| k.kid.as_deref()).collect::<Vec<_>>(), vec![Some("ok")]);
        assert!(matches!(keys(json!({"keys": [{"kty": "weird"}]})), Err(JwksError::Empty { skipped: 1 })));
        assert!(matches!(keys(json!({"nokeys": []})), Err(JwksError::Json(_))));
    }

    #[test]
    fn kid_matching() {
        let k = keys(json!({"keys": [{"kty": "oct", "kid": "a", "k": "c2VjcmV0"}]})).unwrap().remove(0);
        assert!(k.matches_kid(Some("a")) && k.matches_kid(None) && !k.matches_kid(Some("b")));
        let unnamed = Key { kid: None, ..k };
        assert!(unnamed.matches_kid(Some("b")));
    }

    /// Each curve verifies its own algorithm only; curves the gateway cannot use are skipped.
    #[test]
    fn elliptic_keys_by_curve() {
        let coordinate = |n: usize| "AQ".repeat(n / 3 * 2);
        let set = keys(json!({"keys": [
            {"kty": "EC", "kid": "p256", "crv": "P-256", "x": coordinate(33), "y": coordinate(33)},
            {"kty": "EC", "kid": "p384", "crv": "P-384", "x": coordinate(48), "y": coordinate(48)},
            {"kty": "EC", "kid": "p521", "crv": "P-521", "x": coordinate(66), "y": coordinate(66)},
            {"kty": "OKP", "kid": "ed", "crv": "Ed25519", "x": coordinate(33)},
            {"kty": "OKP", "kid": "x", "crv": "X25519", "x": coordinate(33)},
            {"kty": "OKP", "kid": "okp-p256", "crv": "P-256", "x": coordinate(33)},
        ]}))
        .unwrap();
        let by_kid: Vec<_> = set.iter().map(|k| (k.kid.as_deref().unwrap(), k.algorithms.clone())).collect();
        assert_eq!(
            by_kid,
            vec![
                ("p256", vec![Algorithm::ES256]),
                ("p384", vec![Algorithm::ES384]),
                ("ed", vec![Algorithm::EdDSA])
            ]
        );
    }
}
