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

use serde::{Deserialize, Serialize};

use crate::defaults;
use crate::mrtr::keyring::KeyRing;
pub use crate::mrtr::sealed_id::IdError;
use crate::mrtr::sealed_id::{random_handle, IdFormat};

/// Token prefix: task id format 1.
pub const TASK_ID_PREFIX: &str = "t1.";

const FORMAT_VERSION: u8 = 1;
/// How a task id is written: room for the claims JSON of a typical one, and its bound.
const FORMAT: IdFormat = IdFormat {
    prefix: TASK_ID_PREFIX,
    aad: b"mrtr-gateway/taskId/v1\0",
    typical_len: 200,
    max_bytes: defaults::TASK_ID_MAX_BYTES,
};

/// Why a task id was refused. The client is told only that the task is unknown.
#[derive(Debug, thiserror::Error)]
pub enum TaskIdError {
    #[error("task id: {0}")]
    Id(#[from] IdError),
    #[error("task id has format version {0}, expected {FORMAT_VERSION}")]
    Version(u8),
    #[error("task id belongs to another principal")]
    Principal,
    /// A task record (`super::task_record`) sealed for another task.
    #[error("task record belongs to another task")]
    Handle,
    #[error("task id expired at {expires_at} (now {now})")]
    Expired { expires_at: u64, now: u64 },
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
            Self::Id(e) => e.reason(),
            Self::Version(_) => "version",
            Self::Principal => "principal",
            Self::Handle => "handle",
            Self::Expired { .. } => "expired",
        }
    }
}

// === impl TaskClaims ===

impl TaskClaims {
    /// Claims of a new task with a fresh random handle.
    pub fn new(owner: &str, upstream_task: &str, principal: &str, expires_at: u64) -> Self {
        Self {
            version: FORMAT_VERSION,
            owner: owner.to_owned(),
            handle: random_handle(),
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
        Ok(FORMAT.seal(&self.ring, claims)?)
    }

    /// Opens a task id and checks that it belongs to `principal` and has not expired at `now`.
    pub fn open(&self, token: &str, principal: &str, now: u64) -> Result<TaskClaims, TaskIdError> {
        let claims: TaskClaims = FORMAT.open(&self.ring, token)?;
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
        assert!(matches!(other.open(&token, "alice", 1_000), Err(TaskIdError::Id(IdError::UnknownKey(_)))));
        let mut bytes = token.into_bytes();
        let last = bytes.len() - 2;
        bytes[last] = if bytes[last] == b'A' { b'B' } else { b'A' };
        let flipped = String::from_utf8(bytes).unwrap();
        assert!(matches!(s.open(&flipped, "alice", 1_000), Err(TaskIdError::Id(IdError::Integrity))));
        assert!(matches!(
            s.open("tasks-nonexistent-1", "alice", 0),
            Err(TaskIdError::Id(IdError::Malformed(_)))
        ));
    }

    #[test]
    fn a_session_id_never_opens_as_a_task_id() {
        let r = ring(1);
        let session = SessionSealer::shared(r.clone())
            .seal(&SessionClaims::new(None, Reach::Shared, "alice", 1))
            .unwrap();
        let as_task = format!("{TASK_ID_PREFIX}{}", session.strip_prefix("s1.").unwrap());
        assert!(matches!(
            TaskSealer::shared(r).open(&as_task, "alice", 0),
            Err(TaskIdError::Id(IdError::Integrity))
        ));
    }
}
