//! What a sealed id the gateway hands a client shares, whatever it names (a legacy session, a
//! task): claims JSON sealed in an [`envelope`] under the ring's session key, base64url without
//! padding behind a prefix naming the format, bounded in size both ways. Each kind of id
//! ([`super::session_id`], [`super::task_id`]) brings its prefix, its associated-data domain
//! (so one kind never opens as another, or as a `requestState`), its bound and its claims, and
//! checks what its claims mean (version, principal, expiry) itself.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use rand::RngCore;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::mrtr::envelope::{self, EnvelopeError};
use crate::mrtr::keyring::{KeyId, KeyRing};

/// Random bytes of an id's handle (printed as hex).
pub(crate) const HANDLE_LEN: usize = 16;

/// How one kind of id is written.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IdFormat {
    /// Names the format, e.g. `"s1."`.
    pub prefix: &'static str,
    /// The associated data's domain: this kind's purpose and version.
    pub aad: &'static [u8],
    /// Room for the claims JSON of a typical id, so most seal with one allocation.
    pub typical_len: usize,
    /// The largest id sealed or accepted.
    pub max_bytes: usize,
}

/// Why an id could not be sealed or opened, before its claims are looked at.
#[derive(Debug, thiserror::Error)]
pub enum IdError {
    #[error("it is {size} bytes; at most {limit} are accepted")]
    TooLarge { size: usize, limit: usize },
    #[error("it is malformed: {0}")]
    Malformed(&'static str),
    #[error("it was sealed by unknown key {0}")]
    UnknownKey(KeyId),
    #[error("it failed authentication")]
    Integrity,
    #[error("its claims could not be encoded: {0}")]
    Encode(#[source] serde_json::Error),
    #[error("its encryption failed")]
    Seal,
}

// === impl IdError ===

impl IdError {
    /// A fixed metric label for this failure.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::TooLarge { .. } => "too_large",
            Self::Malformed(_) => "malformed",
            Self::UnknownKey(_) => "unknown_key",
            Self::Integrity => "integrity",
            Self::Encode(_) => "encode",
            Self::Seal => "seal",
        }
    }
}

// === impl IdFormat ===

impl IdFormat {
    /// Seals `claims` with the ring's first session key.
    pub(crate) fn seal(&self, ring: &KeyRing, claims: &impl Serialize) -> Result<String, IdError> {
        let (id, cipher) = ring.session_sealing();
        let mut buf = envelope::start(id, self.typical_len);
        serde_json::to_writer(&mut buf, claims).map_err(IdError::Encode)?;
        self.check_size(self.prefix.len() + envelope::sealed_len(&buf).div_ceil(3) * 4)?;
        envelope::seal(&mut buf, cipher, self.aad).map_err(|_| IdError::Seal)?;
        Ok(format!("{}{}", self.prefix, URL_SAFE_NO_PAD.encode(&buf)))
    }

    /// Opens `token` and decodes its claims; what they mean is the caller's to check.
    pub(crate) fn open<C: DeserializeOwned>(&self, ring: &KeyRing, token: &str) -> Result<C, IdError> {
        self.check_size(token.len())?;
        let body = token.strip_prefix(self.prefix).ok_or(IdError::Malformed("unknown prefix"))?;
        let mut buf =
            URL_SAFE_NO_PAD.decode(body).map_err(|_| IdError::Malformed("not unpadded base64url"))?;
        let sealed =
            envelope::open(&mut buf, self.aad, |id| ring.session_opening(id)).map_err(|e| match e {
                EnvelopeError::TooShort => IdError::Malformed("too short"),
                EnvelopeError::UnknownKey(id) => IdError::UnknownKey(id),
                EnvelopeError::Integrity | EnvelopeError::Seal => IdError::Integrity,
            })?;
        serde_json::from_slice(sealed).map_err(|_| IdError::Malformed("claims do not decode"))
    }

    fn check_size(&self, size: usize) -> Result<(), IdError> {
        let limit = self.max_bytes;
        if size > limit {
            return Err(IdError::TooLarge { size, limit });
        }
        Ok(())
    }
}

/// A fresh random handle naming what an id refers to in a replica's table.
pub(crate) fn random_handle() -> String {
    let mut bytes = [0u8; HANDLE_LEN];
    rand::thread_rng().fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
