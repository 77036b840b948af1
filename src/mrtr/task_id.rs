//! The sealed `taskId` the gateway hands a 2026-07-28 client for a legacy task it bridges.
//!
//! Threat model: the client echoes the id on `tasks/get`, `tasks/update` and `tasks/cancel`;
//! it is attacker-controlled input, like `requestState`. It must not show the upstream's own
//! task id or session (a client could otherwise address the upstream's tasks around the
//! gateway), must not be forgeable, must not be usable by another principal, and must stop
//! opening once the task has expired. Any replica holding the key ring can open it and learn
//! the owner, the replica that holds the task's live state.
//!
//! ```text
//! "t1." base64url-nopad( key id (4) ‖ nonce (24, random) ‖ XChaCha20-Poly1305(claims JSON) ‖ tag (16) )
//! associated data = "mrtr-gateway/taskId/v1" ‖ 0x00 ‖ key id
//! ```
//!
//! The associated data names this purpose, so a task id never opens as a session id or a
//! `requestState`, nor they as a task id. Time is passed in as unix seconds.

use std::sync::Arc;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use rand::RngCore;
use serde::{Deserialize, Serialize};

use crate::defaults;
use crate::mrtr::envelope::{self, EnvelopeError};
use crate::mrtr::keyring::{KeyId, KeyRing};

/// Token prefix: task id format 1.
pub const TASK_ID_PREFIX: &str = "t1.";

const FORMAT_VERSION: u8 = 1;
const HANDLE_LEN: usize = 16;
const AAD_DOMAIN: &[u8] = b"mrtr-gateway/taskId/v1\0";
/// Room for the claims JSON of a typical task id.
const TYPICAL_CLAIMS_LEN: usize = 200;

/// Why a task id was refused. The client is told only that the task is unknown.
#[derive(Debug, thiserror::Error)]
pub enum TaskIdError {
    #[error("task id is {size} bytes; at most {limit} are accepted")]
    TooLarge { size: usize, limit: usize },
    #[error("task id is malformed: {0}")]
    Malformed(&'static str),
    #[error("task id was sealed by unknown key {0}")]
    UnknownKey(KeyId),
    #[error("task id failed authentication")]
    Integrity,
    #[error("task id has format version {0}, expected {FORMAT_VERSION}")]
    Version(u8),
    #[error("task id belongs to another principal")]
    Principal,
    #[error("task id expired at {expires_at} (now {now})")]
    Expired { expires_at: u64, now: u64 },
    #[error("task claims could not be encoded: {0}")]
    Encode(#[source] serde_json::Error),
    #[error("task id encryption failed")]
    Seal,
}

/// What a task id carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskClaims {
    #[serde(rename = "v")]
    version: u8,
    /// The replica holding the task's live state (its advertised URL; empty without one).
    #[serde(rename = "o")]
    pub owner: String,
    /// Random, names the task in the owner's table (and so its pinned upstream session).
    #[serde(rename = "h")]
    pub handle: String,
    /// The upstream's own task id.
    #[serde(rename = "t")]
    pub upstream_task: String,
    #[serde(rename = "p")]
    pub principal: String,
    /// Unix seconds after which the id no longer opens.
    #[serde(rename = "e")]
    pub expires_at: u64,
}

/// Seals and opens task ids with a [`KeyRing`].
#[derive(Debug)]
pub struct TaskSealer {
    ring: Arc<KeyRing>,
}

// === impl TaskIdError ===

impl TaskIdError {
    /// A fixed metric label for this failure.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::TooLarge { .. } => "too_large",
            Self::Malformed(_) => "malformed",
            Self::UnknownKey(_) => "unknown_key",
            Self::Integrity => "integrity",
            Self::Version(_) => "version",
            Self::Principal => "principal",
            Self::Expired { .. } => "expired",
            Self::Encode(_) => "encode",
            Self::Seal => "seal",
        }
    }
}

// === impl TaskClaims ===

impl TaskClaims {
    /// Claims of a new task with a fresh random handle.
    pub fn new(owner: &str, upstream_task: &str, principal: &str, expires_at: u64) -> Self {
        let mut bytes = [0u8; HANDLE_LEN];
        rand::thread_rng().fill_bytes(&mut bytes);
        Self {
            version: FORMAT_VERSION,
            owner: owner.to_owned(),
            handle: bytes.iter().map(|b| format!("{b:02x}")).collect(),
            upstream_task: upstream_task.to_owned(),
            principal: principal.to_owned(),
            expires_at,
        }
    }
}

// === impl TaskSealer ===

impl TaskSealer {
    /// A sealer over a ring other sealers share (see [`crate::mrtr::LiveRing`]).
    pub fn shared(ring: Arc<KeyRing>) -> Self {
        Self { ring }
    }

    /// Seals `claims` with the ring's first key.
    pub fn seal(&self, claims: &TaskClaims) -> Result<String, TaskIdError> {
        let (id, cipher) = self.ring.session_sealing();
        let mut buf = envelope::start(id, TYPICAL_CLAIMS_LEN);
        serde_json::to_writer(&mut buf, claims).map_err(TaskIdError::Encode)?;
        check_size(TASK_ID_PREFIX.len() + envelope::sealed_len(&buf).div_ceil(3) * 4)?;
        envelope::seal(&mut buf, cipher, AAD_DOMAIN).map_err(|_| TaskIdError::Seal)?;
        Ok(format!("{TASK_ID_PREFIX}{}", URL_SAFE_NO_PAD.encode(&buf)))
    }

    /// Opens a task id and checks that it belongs to `principal` and has not expired at `now`.
    pub fn open(&self, token: &str, principal: &str, now: u64) -> Result<TaskClaims, TaskIdError> {
        check_size(token.len())?;
        let body = token.strip_prefix(TASK_ID_PREFIX).ok_or(TaskIdError::Malformed("unknown prefix"))?;
        let mut buf =
            URL_SAFE_NO_PAD.decode(body).map_err(|_| TaskIdError::Malformed("not unpadded base64url"))?;
        let sealed = envelope::open(&mut buf, AAD_DOMAIN, |id| self.ring.session_opening(id)).map_err(
            |e| match e {
                EnvelopeError::TooShort => TaskIdError::Malformed("too short"),
                EnvelopeError::UnknownKey(id) => TaskIdError::UnknownKey(id),
                EnvelopeError::Integrity | EnvelopeError::Seal => TaskIdError::Integrity,
            },
        )?;
        let claims: TaskClaims =
            serde_json::from_slice(sealed).map_err(|_| TaskIdError::Malformed("claims do not decode"))?;
        if claims.version != FORMAT_VERSION {
            return Err(TaskIdError::Version(claims.version));
        }
        if claims.principal != principal {
            return Err(TaskIdError::Principal);
        }
        if now > claims.expires_at {
            return Err(TaskIdError::Expired { expires_at: claims.expires_at, now });
        }
        Ok(claims)
    }
}

fn check_size(size: usize) -> Result<(), TaskIdError> {
    let limit = defaults::TASK_ID_MAX_BYTES;
    if size > limit {
        return Err(TaskIdError::TooLarge { size, limit });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mrtr::keyring::KeySecret;
    use crate::mrtr::session_id::{Reach, SessionClaims, SessionSealer};

    fn ring(byte: u8) -> Arc<KeyRing> {
        Arc::new(KeyRing::new(vec![KeySecret::new([byte; 32], None).unwrap()]).unwrap())
    }

    fn claims() -> TaskClaims {
        TaskClaims::new("http://10.0.0.7:9443", "upstream-task-42", "alice", 2_000)
    }

    #[test]
    fn round_trip_hides_the_upstream_task() {
        let s = TaskSealer::shared(ring(1));
        let c = claims();
        let token = s.seal(&c).unwrap();
        assert!(token.starts_with(TASK_ID_PREFIX));
        assert!(!token.contains("upstream-task-42"));
        assert!(token.bytes().all(|b| b.is_ascii_graphic()), "a header value: {token}");
        assert_eq!(s.open(&token, "alice", 1_000).unwrap(), c);
    }

    #[test]
    fn other_principals_forgeries_and_expired_ids_are_refused() {
        let s = TaskSealer::shared(ring(1));
        let token = s.seal(&claims()).unwrap();
        assert!(matches!(s.open(&token, "bob", 1_000), Err(TaskIdError::Principal)));
        assert!(matches!(s.open(&token, "alice", 2_001), Err(TaskIdError::Expired { .. })));
        let other = TaskSealer::shared(ring(2));
        assert!(matches!(other.open(&token, "alice", 1_000), Err(TaskIdError::UnknownKey(_))));
        let mut bytes = token.into_bytes();
        let last = bytes.len() - 2;
        bytes[last] = if bytes[last] == b'A' { b'B' } else { b'A' };
        let flipped = String::from_utf8(bytes).unwrap();
        assert!(matches!(s.open(&flipped, "alice", 1_000), Err(TaskIdError::Integrity)));
        assert!(matches!(s.open("tasks-nonexistent-1", "alice", 0), Err(TaskIdError::Malformed(_))));
    }

    #[test]
    fn a_session_id_never_opens_as_a_task_id() {
        let r = ring(1);
        let session = SessionSealer::shared(r.clone())
            .seal(&SessionClaims::new(None, Reach::Shared, "alice", 1))
            .unwrap();
        let as_task = format!("{TASK_ID_PREFIX}{}", session.strip_prefix("s1.").unwrap());
        assert!(matches!(TaskSealer::shared(r).open(&as_task, "alice", 0), Err(TaskIdError::Integrity)));
    }
}
