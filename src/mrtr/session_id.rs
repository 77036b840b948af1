//! The sealed `Mcp-Session-Id` the gateway gives a legacy client (2025-era Streamable HTTP).
//!
//! Threat model: a legacy client echoes this value on every request of its session; it is
//! attacker-controlled input, like `requestState`. It must not show the upstream session id
//! (which would let a client address the upstream's sessions directly, around the gateway),
//! must not be forgeable, and must not be usable by another principal. Any replica holding the
//! key ring can open it, so a session whose upstream is shared can be relayed by any replica.
//!
//! ```text
//! "s1." base64url-nopad( key id (4) ‖ nonce (24, random) ‖ XChaCha20-Poly1305(claims JSON) ‖ tag (16) )
//! associated data = "mrtr-gateway/sessionId/v1" ‖ 0x00 ‖ key id
//! ```
//!
//! The cipher is derived from each ring secret under its own HKDF label and the associated
//! data names this purpose, so a session id never opens as a `requestState` and a
//! `requestState` never opens as a session id. A session id carries no expiry: a session ends
//! when the client deletes it, when it idles out, or when the upstream forgets it (the client is
//! then told 404 and starts a new one, as the legacy protocol says).

use std::sync::Arc;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use rand::RngCore;
use serde::{Deserialize, Serialize};

use crate::defaults;
use crate::mrtr::envelope::{self, EnvelopeError};
use crate::mrtr::keyring::{KeyId, KeyRing};

/// Token prefix: session id format 1.
pub const SESSION_ID_PREFIX: &str = "s1.";

const FORMAT_VERSION: u8 = 1;
const HANDLE_LEN: usize = 16;
const AAD_DOMAIN: &[u8] = b"mrtr-gateway/sessionId/v1\0";
/// Room for the claims JSON of a typical session id.
const TYPICAL_CLAIMS_LEN: usize = 160;

/// Why a session id was refused. The client is told only that the session is unknown.
#[derive(Debug, thiserror::Error)]
pub enum SessionIdError {
    #[error("session id is {size} bytes; at most {limit} are accepted")]
    TooLarge { size: usize, limit: usize },
    #[error("session id is malformed: {0}")]
    Malformed(&'static str),
    #[error("session id was sealed by unknown key {0}")]
    UnknownKey(KeyId),
    #[error("session id failed authentication")]
    Integrity,
    #[error("session id has format version {0}, expected {FORMAT_VERSION}")]
    Version(u8),
    #[error("session id belongs to another principal")]
    Principal,
    #[error("session claims could not be encoded: {0}")]
    Encode(#[source] serde_json::Error),
    #[error("session id encryption failed")]
    Seal,
}

/// Where the session's upstream lives, so a replica knows whether it may relay it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reach {
    /// The upstream is shared (a Streamable HTTP server every replica reaches): any replica
    /// relays the session.
    #[serde(rename = "s")]
    Shared,
    /// The upstream belongs to the replica that opened the session (a child process, an
    /// HTTP+SSE stream): only that replica can relay it.
    #[serde(rename = "l")]
    Local,
}

/// What a session id carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionClaims {
    #[serde(rename = "v")]
    version: u8,
    /// The upstream's own `Mcp-Session-Id`; `None` when the upstream gave none.
    #[serde(rename = "u", default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<String>,
    /// Random, names the session in a replica's table.
    #[serde(rename = "h")]
    pub handle: String,
    #[serde(rename = "r")]
    pub reach: Reach,
    #[serde(rename = "p")]
    pub principal: String,
    /// Unix seconds, for the logs.
    #[serde(rename = "i")]
    pub issued_at: u64,
}

/// Seals and opens session ids with a [`KeyRing`].
#[derive(Debug)]
pub struct SessionSealer {
    ring: Arc<KeyRing>,
}

// === impl SessionIdError ===

impl SessionIdError {
    /// A fixed metric label for this failure.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::TooLarge { .. } => "too_large",
            Self::Malformed(_) => "malformed",
            Self::UnknownKey(_) => "unknown_key",
            Self::Integrity => "integrity",
            Self::Version(_) => "version",
            Self::Principal => "principal",
            Self::Encode(_) => "encode",
            Self::Seal => "seal",
        }
    }
}

// === impl SessionClaims ===

impl SessionClaims {
    /// Claims of a new session with a fresh random handle; `now` is unix seconds.
    pub fn new(upstream: Option<String>, reach: Reach, principal: &str, now: u64) -> Self {
        let mut bytes = [0u8; HANDLE_LEN];
        rand::thread_rng().fill_bytes(&mut bytes);
        let handle = bytes.iter().map(|b| format!("{b:02x}")).collect();
        Self {
            version: FORMAT_VERSION,
            upstream,
            handle,
            reach,
            principal: principal.to_owned(),
            issued_at: now,
        }
    }
}

// === impl SessionSealer ===

impl SessionSealer {
    pub fn new(ring: KeyRing) -> Self {
        Self::shared(Arc::new(ring))
    }

    /// A sealer over a ring other sealers share (see [`crate::mrtr::LiveRing`]).
    pub fn shared(ring: Arc<KeyRing>) -> Self {
        Self { ring }
    }

    /// Seals `claims` with the ring's first key.
    pub fn seal(&self, claims: &SessionClaims) -> Result<String, SessionIdError> {
        let (id, cipher) = self.ring.session_sealing();
        let mut buf = envelope::start(id, TYPICAL_CLAIMS_LEN);
        serde_json::to_writer(&mut buf, claims).map_err(SessionIdError::Encode)?;
        check_size(SESSION_ID_PREFIX.len() + envelope::sealed_len(&buf).div_ceil(3) * 4)?;
        envelope::seal(&mut buf, cipher, AAD_DOMAIN).map_err(|_| SessionIdError::Seal)?;
        Ok(format!("{SESSION_ID_PREFIX}{}", URL_SAFE_NO_PAD.encode(&buf)))
    }

    /// Opens a session id and checks that it belongs to `principal`.
    pub fn open(&self, token: &str, principal: &str) -> Result<SessionClaims, SessionIdError> {
        check_size(token.len())?;
        let body =
            token.strip_prefix(SESSION_ID_PREFIX).ok_or(SessionIdError::Malformed("unknown prefix"))?;
        let mut buf =
            URL_SAFE_NO_PAD.decode(body).map_err(|_| SessionIdError::Malformed("not unpadded base64url"))?;
        let claims = self.decrypt(&mut buf)?;
        if claims.principal != principal {
            return Err(SessionIdError::Principal);
        }
        Ok(claims)
    }

    fn decrypt(&self, buf: &mut [u8]) -> Result<SessionClaims, SessionIdError> {
        let sealed =
            envelope::open(buf, AAD_DOMAIN, |id| self.ring.session_opening(id)).map_err(|e| match e {
                EnvelopeError::TooShort => SessionIdError::Malformed("too short"),
                EnvelopeError::UnknownKey(id) => SessionIdError::UnknownKey(id),
                EnvelopeError::Integrity | EnvelopeError::Seal => SessionIdError::Integrity,
            })?;
        let claims: SessionClaims =
            serde_json::from_slice(sealed).map_err(|_| SessionIdError::Malformed("claims do not decode"))?;
        if claims.version != FORMAT_VERSION {
            return Err(SessionIdError::Version(claims.version));
        }
        Ok(claims)
    }
}

fn check_size(size: usize) -> Result<(), SessionIdError> {
    let limit = defaults::LEGACY_MAX_SESSION_ID_BYTES;
    if size > limit {
        return Err(SessionIdError::TooLarge { size, limit });
    }
    Ok(())
}

#[cfg(test)]
mod tests;
