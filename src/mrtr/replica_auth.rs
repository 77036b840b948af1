//! The MAC on a retry one replica forwards to another (the owner of its parked call).
//!
//! Threat model: the internal listener may be reachable by anything on the cluster network,
//! and a forwarded retry asserts a principal, so it must come from a replica holding the key
//! ring. The MAC key is derived from each ring key under its own HKDF label (see
//! [`KeyRing`]), so it is never the key that seals states or session ids. Layout of the header:
//!
//! ```text
//! v1.<key id hex>.<unix seconds>.<base64url-nopad HMAC-SHA256(key, DOMAIN ‖ seconds ‖ 0x00 ‖ SHA-256(body))>
//! ```
//!
//! The timestamp bounds a replay of a captured request to the skew window; the body digest
//! binds the MAC to the exact request. Verification is constant-time (the `hmac` crate's).
//! Time is passed in; nothing here reads a clock.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::{Digest as _, Sha256};

use crate::mrtr::keyring::{KeyId, KeyRing, KEY_ID_LEN};

/// The header carrying the MAC.
pub const HEADER: &str = "mrtr-replica-auth";

const VERSION: &str = "v1";
const DOMAIN: &[u8] = b"mrtr-gateway/forward/v1\0";

type HmacSha256 = Hmac<Sha256>;

/// Why a forwarded request was refused. The peer learns only that it was.
#[derive(Debug, thiserror::Error)]
pub enum ReplicaAuthError {
    #[error("the replica MAC header is missing")]
    Missing,
    #[error("the replica MAC header is malformed")]
    Malformed,
    #[error("the replica MAC names a key this replica does not hold")]
    UnknownKey,
    #[error("the replica MAC is {age} s from this replica's clock; at most {skew} s are accepted")]
    Stale { age: u64, skew: u64 },
    #[error("the replica MAC does not match")]
    Mismatch,
}

// === impl ReplicaAuthError ===

impl ReplicaAuthError {
    /// A fixed label for logs and metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Missing => "missing",
            Self::Malformed => "malformed",
            Self::UnknownKey => "unknown_key",
            Self::Stale { .. } => "stale",
            Self::Mismatch => "mismatch",
        }
    }
}

/// The header value authenticating `body`, sent at `now` (unix seconds).
pub fn sign(ring: &KeyRing, now: u64, body: &[u8]) -> String {
    let (id, key) = ring.forward_sealing();
    let tag = mac(key, now, body).finalize().into_bytes();
    format!("{VERSION}.{id}.{now}.{}", URL_SAFE_NO_PAD.encode(tag))
}

/// Checks the header value `header` on `body` at `now`, allowing `skew` seconds either way.
pub fn verify(
    ring: &KeyRing,
    header: Option<&str>,
    body: &[u8],
    now: u64,
    skew: u64,
) -> Result<(), ReplicaAuthError> {
    let header = header.ok_or(ReplicaAuthError::Missing)?;
    let mut parts = header.split('.');
    let (Some(VERSION), Some(id), Some(at), Some(tag), None) =
        (parts.next(), parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(ReplicaAuthError::Malformed);
    };
    let id = key_id(id).ok_or(ReplicaAuthError::Malformed)?;
    let at: u64 = at.parse().map_err(|_| ReplicaAuthError::Malformed)?;
    let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| ReplicaAuthError::Malformed)?;
    let key = ring.forward_opening(id).ok_or(ReplicaAuthError::UnknownKey)?;
    let age = now.abs_diff(at);
    if age > skew {
        return Err(ReplicaAuthError::Stale { age, skew });
    }
    mac(key, at, body).verify_slice(&tag).map_err(|_| ReplicaAuthError::Mismatch)
}

fn mac(key: &[u8], at: u64, body: &[u8]) -> HmacSha256 {
    // HMAC takes a key of any length; 32 bytes never fail.
    let mut mac = <HmacSha256 as Mac>::new_from_slice(key)
        .unwrap_or_else(|_| unreachable!("HMAC accepts any key length"));
    mac.update(DOMAIN);
    mac.update(at.to_string().as_bytes());
    mac.update(&[0]);
    mac.update(&Sha256::digest(body));
    mac
}

fn key_id(hex: &str) -> Option<KeyId> {
    if hex.len() != 2 * KEY_ID_LEN || !hex.is_ascii() {
        return None;
    }
    let mut id = [0u8; KEY_ID_LEN];
    for (i, byte) in id.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(KeyId(id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mrtr::keyring::KeySecret;

    fn ring(byte: u8) -> KeyRing {
        KeyRing::new(vec![KeySecret::new([byte; 32], None).unwrap()]).unwrap()
    }

    #[test]
    fn a_signed_body_verifies_on_a_replica_with_the_same_ring() {
        let header = sign(&ring(1), 1000, b"{}");
        assert!(verify(&ring(1), Some(&header), b"{}", 1010, 30).is_ok());
        // The skew is allowed exactly, either way.
        assert!(verify(&ring(1), Some(&header), b"{}", 1030, 30).is_ok());
        assert!(verify(&ring(1), Some(&header), b"{}", 970, 30).is_ok());
    }

    #[test]
    fn anything_else_is_refused_with_its_reason() {
        let (a, header) = (ring(1), sign(&ring(1), 1000, b"{}"));
        let reason = |h: Option<&str>, body: &[u8], now| verify(&a, h, body, now, 30).unwrap_err().reason();
        assert_eq!(reason(None, b"{}", 1000), "missing");
        assert_eq!(reason(Some("v1.zz"), b"{}", 1000), "malformed");
        assert_eq!(reason(Some(&header.replacen("v1", "v2", 1)), b"{}", 1000), "malformed");
        assert_eq!(reason(Some(&header), b"{ }", 1000), "mismatch", "another body");
        assert_eq!(reason(Some(&header), b"{}", 1031), "stale");
        assert_eq!(reason(Some(&header), b"{}", 969), "stale", "from the future");
        let other = sign(&ring(2), 1000, b"{}");
        assert_eq!(reason(Some(&other), b"{}", 1000), "unknown_key");
        let retimed = header.replacen(".1000.", ".1001.", 1);
        assert_eq!(reason(Some(&retimed), b"{}", 1000), "mismatch", "the time is authenticated");
        // A key id is exactly its hex digits: one with more after them is not that key's.
        let id = header.split('.').nth(1).unwrap_or_default();
        let longer = header.replacen(&format!(".{id}."), &format!(".{id}00."), 1);
        assert_eq!(reason(Some(&longer), b"{}", 1000), "malformed", "a key id with trailing digits");
        let shorter = header.replacen(&format!(".{id}."), &format!(".{}.", &id[..id.len() - 2]), 1);
        assert_eq!(reason(Some(&shorter), b"{}", 1000), "malformed", "a truncated key id");
    }

    #[test]
    fn the_mac_key_is_derived_not_the_secret() {
        let (one, two) = (ring(1), ring(2));
        assert_ne!(one.forward_sealing().1, &[1u8; 32]);
        assert_ne!(one.forward_sealing().1, two.forward_sealing().1);
    }
}
