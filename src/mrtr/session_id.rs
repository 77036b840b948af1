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

use serde::{Deserialize, Serialize};

use crate::defaults;
use crate::mrtr::keyring::KeyRing;
pub use crate::mrtr::sealed_id::IdError;
use crate::mrtr::sealed_id::{random_handle, IdFormat};

/// Token prefix: session id format 1.
pub const SESSION_ID_PREFIX: &str = "s1.";

const FORMAT_VERSION: u8 = 1;
/// How a session id is written: room for the claims JSON of a typical one, and its bound.
const FORMAT: IdFormat = IdFormat {
    prefix: SESSION_ID_PREFIX,
    aad: b"mrtr-gateway/sessionId/v1\0",
    typical_len: 160,
    max_bytes: defaults::LEGACY_MAX_SESSION_ID_BYTES,
};

/// Why a session id was refused. The client is told only that the session is unknown.
#[derive(Debug, thiserror::Error)]
pub enum SessionIdError {
    #[error("session id: {0}")]
    Id(#[from] IdError),
    #[error("session id has format version {0}, expected {FORMAT_VERSION}")]
    Version(u8),
    #[error("session id belongs to another principal")]
    Principal,
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
            Self::Id(e) => e.reason(),
            Self::Version(_) => "version",
            Self::Principal => "principal",
        }
    }
}

// === impl SessionClaims ===

impl SessionClaims {
    /// Claims of a new session with a fresh random handle; `now` is unix seconds.
    pub fn new(upstream: Option<String>, reach: Reach, principal: &str, now: u64) -> Self {
        let handle = random_handle();
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
        Ok(FORMAT.seal(&self.ring, claims)?)
    }

    /// Opens a session id and checks that it belongs to `principal`.
    pub fn open(&self, token: &str, principal: &str) -> Result<SessionClaims, SessionIdError> {
        let claims: SessionClaims = FORMAT.open(&self.ring, token)?;
        if claims.version != FORMAT_VERSION {
            return Err(SessionIdError::Version(claims.version));
        }
        if claims.principal != principal {
            return Err(SessionIdError::Principal);
        }
        Ok(claims)
    }
}

#[cfg(test)]
mod tests;
