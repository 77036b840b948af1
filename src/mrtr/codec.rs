//! The `requestState` codec: seals claims into a token and opens tokens back into claims.
//!
//! Threat model: the token is attacker-controlled input (SEP-2322). It must not be readable
//! (it holds the client's earlier answers), forgeable, or usable by another principal, for
//! another call, or after its expiry. Layout:
//!
//! ```text
//! "v1." base64url-nopad( key id (4) ‖ nonce (24, random) ‖ XChaCha20-Poly1305(claims JSON) ‖ tag (16) )
//! associated data = "mrtr-gateway/requestState/v1" ‖ 0x00 ‖ key id
//! ```
//!
//! The key id is authenticated through the associated data, so it cannot be swapped. Size is
//! checked before any decoding, base64 is strict (no padding, no stray bits) and the claims
//! JSON must fill the plaintext exactly. Every failure has its own [`StateError`] variant with a
//! fixed [`StateError::reason`] label for metrics and logs; the client is told only that the
//! state is invalid or expired.

use std::sync::Arc;
use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;

use crate::defaults;
use crate::mrtr::claims::{Binding, ClaimsRef, StateClaims, FORMAT_VERSION};
use crate::mrtr::envelope::{self, EnvelopeError};
#[cfg(test)]
use crate::mrtr::envelope::{HEADER_LEN, NONCE_LEN, TAG_LEN};
use crate::mrtr::journal::Journal;
use crate::mrtr::keyring::{KeyId, KeyRing, KEY_ID_LEN};
use crate::mrtr::park::ParkHandle;

/// Token prefix: format version 1.
pub const TOKEN_PREFIX: &str = "v1.";

const AAD_DOMAIN: &[u8] = b"mrtr-gateway/requestState/v1\0";
/// First guess of a claims size, so that small states seal with one allocation.
const TYPICAL_CLAIMS_LEN: usize = 512;

/// Why a state was refused. The client sees one generic error; metrics see [`Self::reason`].
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("state token is {size} bytes; at most {limit} are accepted")]
    TooLarge { size: usize, limit: usize },
    #[error("state token is malformed: {0}")]
    Malformed(&'static str),
    #[error("state token was sealed by unknown key {0}")]
    UnknownKey(KeyId),
    #[error("state token failed authentication")]
    Integrity,
    #[error("state claims have format version {0}, expected {FORMAT_VERSION}")]
    Version(u8),
    #[error("state expired at {expires_at} (now {now})")]
    Expired { expires_at: u64, now: u64 },
    #[error("state was issued at {issued_at}, in the future (now {now})")]
    NotYetValid { issued_at: u64, now: u64 },
    #[error("state belongs to another principal")]
    Principal,
    #[error("state belongs to another method")]
    Method,
    #[error("state belongs to another target")]
    Target,
    #[error("state belongs to other arguments")]
    Arguments,
    #[error("state claims could not be encoded: {0}")]
    Encode(#[source] serde_json::Error),
    #[error("state encryption failed")]
    Seal,
    /// The state this round would seal is over the bound: the conversation grew too large (its
    /// answers), not a token the client sent.
    #[error("the state to seal would be {size} bytes; at most {limit} are allowed")]
    SealTooLarge { size: usize, limit: usize },
}

/// Codec bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodecSettings {
    /// How long a sealed state stays valid.
    pub ttl: Duration,
    /// Clock difference tolerated on expiry and issue time.
    pub skew: Duration,
    /// Longest token sealed or opened.
    pub max_token_bytes: usize,
}

/// Seals and opens state tokens with a [`KeyRing`]. Cheap to build over a shared ring, so a
/// request builds one over the ring current when it starts.
#[derive(Debug)]
pub struct StateCodec {
    ring: Arc<KeyRing>,
    settings: CodecSettings,
}

// === impl StateError ===

impl StateError {
    /// A fixed metric label for this failure.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::TooLarge { .. } => "too_large",
            Self::Malformed(_) => "malformed",
            Self::UnknownKey(_) => "unknown_key",
            Self::Integrity => "integrity",
            Self::Version(_) => "version",
            Self::Expired { .. } => "expired",
            Self::NotYetValid { .. } => "not_yet_valid",
            Self::Principal => "principal",
            Self::Method => "method",
            Self::Target => "target",
            Self::Arguments => "arguments",
            Self::Encode(_) => "encode",
            Self::Seal => "seal",
            Self::SealTooLarge { .. } => "seal_too_large",
        }
    }
}

impl Default for CodecSettings {
    fn default() -> Self {
        Self {
            ttl: defaults::STATE_TTL,
            skew: defaults::CLOCK_SKEW,
            max_token_bytes: defaults::MAX_TOKEN_BYTES,
        }
    }
}

// === impl StateCodec ===

impl StateCodec {
    pub fn new(ring: KeyRing, settings: CodecSettings) -> Self {
        Self::shared(Arc::new(ring), settings)
    }

    /// A codec over a ring other codecs share (see [`crate::mrtr::LiveRing`]).
    pub fn shared(ring: Arc<KeyRing>, settings: CodecSettings) -> Self {
        Self { ring, settings }
    }

    /// The id of the key this codec seals with, for per-key counts.
    pub fn sealing_key(&self) -> KeyId {
        self.ring.sealing_id()
    }

    /// The key id a token names, when the ring holds that key; `None` for a token too short or
    /// malformed to name one, or naming a key this ring does not know. It reads only the first
    /// eight base64 characters, so counting opens per key costs no second decode, and an
    /// attacker's made-up ids never become metric labels.
    pub fn key_id_of(&self, token: &str) -> Option<KeyId> {
        let head = token.strip_prefix(TOKEN_PREFIX)?.get(..base64_len(KEY_ID_LEN + 2))?;
        let bytes = URL_SAFE_NO_PAD.decode(head).ok()?;
        let id = KeyId(bytes.get(..KEY_ID_LEN)?.try_into().ok()?);
        self.ring.contains(id).then_some(id)
    }

    pub fn settings(&self) -> &CodecSettings {
        &self.settings
    }

    /// Seals the claims of `round` with the ring's first key; `now` is unix seconds.
    pub fn seal_at(
        &self,
        binding: &Binding,
        round: u32,
        journal: &Journal,
        now: u64,
    ) -> Result<String, StateError> {
        self.seal_parked_at(binding, round, journal, None, now)
    }

    /// [`Self::seal_at`] with the handle of the parked upstream call, when there is one.
    pub fn seal_parked_at(
        &self,
        binding: &Binding,
        round: u32,
        journal: &Journal,
        park: Option<&ParkHandle>,
        now: u64,
    ) -> Result<String, StateError> {
        let claims = ClaimsRef {
            version: FORMAT_VERSION,
            issued_at: now,
            expires_at: now.saturating_add(self.settings.ttl.as_secs()),
            principal: &binding.principal,
            method: binding.method,
            target: &binding.target,
            arguments: binding.arguments,
            round,
            journal,
            park,
        };
        self.seal_claims(&claims)
    }

    fn seal_claims(&self, claims: &ClaimsRef<'_>) -> Result<String, StateError> {
        self.seal_with(|buf| serde_json::to_writer(buf, claims).map_err(StateError::Encode))
    }

    /// Seals whatever `write_claims` appends to the buffer as the token's plaintext.
    fn seal_with(
        &self,
        write_claims: impl FnOnce(&mut Vec<u8>) -> Result<(), StateError>,
    ) -> Result<String, StateError> {
        let (id, cipher) = self.ring.sealing();
        let mut buf = envelope::start(id, TYPICAL_CLAIMS_LEN);
        write_claims(&mut buf)?;
        // Refuse before encrypting: a token we could not open again is useless.
        let size = TOKEN_PREFIX.len() + base64_len(envelope::sealed_len(&buf));
        if size > self.settings.max_token_bytes {
            return Err(StateError::SealTooLarge { size, limit: self.settings.max_token_bytes });
        }
        envelope::seal(&mut buf, cipher, AAD_DOMAIN).map_err(|_| StateError::Seal)?;
        let mut token = String::with_capacity(TOKEN_PREFIX.len() + base64_len(buf.len()));
        token.push_str(TOKEN_PREFIX);
        URL_SAFE_NO_PAD.encode_string(&buf, &mut token);
        Ok(token)
    }

    /// Opens a token and checks it against the incoming request's binding at `now`.
    pub fn open_at(&self, token: &str, binding: &Binding, now: u64) -> Result<StateClaims, StateError> {
        self.check_size(token.len())?;
        let body = token.strip_prefix(TOKEN_PREFIX).ok_or(StateError::Malformed("unknown prefix"))?;
        let mut buf =
            URL_SAFE_NO_PAD.decode(body).map_err(|_| StateError::Malformed("not unpadded base64url"))?;
        let claims = self.decrypt(&mut buf)?;
        self.check_time(&claims, now)?;
        check_binding(&claims, binding)?;
        Ok(claims)
    }

    fn check_size(&self, size: usize) -> Result<(), StateError> {
        if size > self.settings.max_token_bytes {
            return Err(StateError::TooLarge { size, limit: self.settings.max_token_bytes });
        }
        Ok(())
    }

    fn decrypt(&self, buf: &mut [u8]) -> Result<StateClaims, StateError> {
        let plain = envelope::open(buf, AAD_DOMAIN, |id| self.ring.opening(id)).map_err(|e| match e {
            EnvelopeError::TooShort => StateError::Malformed("too short"),
            EnvelopeError::UnknownKey(id) => StateError::UnknownKey(id),
            EnvelopeError::Integrity | EnvelopeError::Seal => StateError::Integrity,
        })?;
        // `from_slice` refuses anything after the claims object.
        let claims: StateClaims =
            serde_json::from_slice(plain).map_err(|_| StateError::Malformed("claims do not decode"))?;
        if claims.version != FORMAT_VERSION {
            return Err(StateError::Version(claims.version));
        }
        Ok(claims)
    }

    fn check_time(&self, claims: &StateClaims, now: u64) -> Result<(), StateError> {
        let skew = self.settings.skew.as_secs();
        if claims.issued_at > now.saturating_add(skew) {
            return Err(StateError::NotYetValid { issued_at: claims.issued_at, now });
        }
        if now > claims.expires_at.saturating_add(skew) {
            return Err(StateError::Expired { expires_at: claims.expires_at, now });
        }
        Ok(())
    }
}

fn check_binding(claims: &StateClaims, binding: &Binding) -> Result<(), StateError> {
    if claims.principal != binding.principal {
        return Err(StateError::Principal);
    }
    if claims.method != binding.method {
        return Err(StateError::Method);
    }
    if claims.target != binding.target {
        return Err(StateError::Target);
    }
    if claims.arguments != binding.arguments {
        return Err(StateError::Arguments);
    }
    Ok(())
}

#[cfg(test)]
fn aad(id: KeyId) -> envelope::Aad {
    envelope::aad(AAD_DOMAIN, id)
}

/// Length of unpadded base64 for `n` bytes.
fn base64_len(n: usize) -> usize {
    (n * 4).div_ceil(3)
}

#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
#[cfg(test)]
mod tests;
