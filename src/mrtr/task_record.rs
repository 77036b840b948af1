//! The sealed record of a finished task, which the replica that ran it writes where every
//! replica can read it (the task bridge's result store, `src/tasks/store.rs`).
//!
//! Threat model: the store (Redis) is shared infrastructure, readable and writable by whatever
//! else can reach it. A record holds a tool's result or error, which may be the client's data,
//! so it is sealed, never stored in the clear; and a record written under one task's key must
//! not be served for another, so the handle of the task it belongs to is sealed inside it and
//! checked on opening. Whoever can write the store can still delete a record (the task is then
//! asked of its owner, or reported failed), never forge or move one.
//!
//! ```text
//! "r1." base64url-nopad( key id (4) ‖ nonce (24, random) ‖ XChaCha20-Poly1305({v, h, r}) ‖ tag (16) )
//! associated data = "mrtr-gateway/taskRecord/v1" ‖ 0x00 ‖ key id
//! ```

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::mrtr::keyring::KeyRing;
use crate::mrtr::sealed_id::IdFormat;
use crate::mrtr::task_id::TaskIdError;

/// Token prefix: task record format 1.
pub const TASK_RECORD_PREFIX: &str = "r1.";

const FORMAT_VERSION: u8 = 1;

/// What a record carries.
#[derive(Serialize, Deserialize)]
struct Record {
    #[serde(rename = "v")]
    version: u8,
    /// The handle of the task it belongs to (sealed in its task id too).
    #[serde(rename = "h")]
    handle: String,
    /// The detailed task as `tasks/get` answers it.
    #[serde(rename = "r")]
    task: Value,
}

/// Seals and opens task records with a [`KeyRing`]; `max_bytes` bounds a record both ways.
#[derive(Debug)]
pub struct TaskRecordSealer {
    ring: Arc<KeyRing>,
    max_bytes: usize,
}

// === impl TaskRecordSealer ===

impl TaskRecordSealer {
    /// A sealer over a ring other sealers share, for records of at most `max_bytes`.
    pub fn shared(ring: Arc<KeyRing>, max_bytes: usize) -> Self {
        Self { ring, max_bytes }
    }

    /// The largest record sealed or opened.
    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// Seals `task`, the detailed task of the task named `handle`.
    pub fn seal(&self, handle: &str, task: &Value) -> Result<String, TaskIdError> {
        let record = Record { version: FORMAT_VERSION, handle: handle.to_owned(), task: task.clone() };
        Ok(self.format().seal(&self.ring, &record)?)
    }

    /// Opens `token` and checks that it is the record of the task named `handle`.
    pub fn open(&self, handle: &str, token: &str) -> Result<Value, TaskIdError> {
        let record: Record = self.format().open(&self.ring, token)?;
        if record.version != FORMAT_VERSION {
            return Err(TaskIdError::Version(record.version));
        }
        if record.handle != handle {
            return Err(TaskIdError::Handle);
        }
        Ok(record.task)
    }

    fn format(&self) -> IdFormat {
        IdFormat {
            prefix: TASK_RECORD_PREFIX,
            aad: b"mrtr-gateway/taskRecord/v1\0",
            typical_len: 512,
            max_bytes: self.max_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::mrtr::keyring::KeySecret;
    use crate::mrtr::sealed_id::IdError;
    use crate::mrtr::task_id::{TaskClaims, TaskSealer};

    fn ring(byte: u8) -> Arc<KeyRing> {
        Arc::new(KeyRing::new(vec![KeySecret::new([byte; 32], None).unwrap()]).unwrap())
    }

    fn task() -> Value {
        json!({"status": "completed", "result": {"content": [{"type": "text", "text": "secret answer"}]}})
    }

    #[test]
    fn a_record_opens_only_for_its_own_task_and_hides_its_content() {
        let s = TaskRecordSealer::shared(ring(1), 4096);
        let token = s.seal("h-1", &task()).unwrap();
        assert!(token.starts_with(TASK_RECORD_PREFIX));
        assert!(!token.contains("secret") && !token.contains("h-1"), "{token}");
        assert_eq!(s.open("h-1", &token).unwrap(), task());
        assert!(matches!(s.open("h-2", &token), Err(TaskIdError::Handle)));
        let stranger = TaskRecordSealer::shared(ring(2), 4096);
        assert!(matches!(stranger.open("h-1", &token), Err(TaskIdError::Id(IdError::UnknownKey(_)))));
    }

    #[test]
    fn records_are_bounded_both_ways() {
        let small = TaskRecordSealer::shared(ring(1), 64);
        assert!(matches!(small.seal("h-1", &task()), Err(TaskIdError::Id(IdError::TooLarge { .. }))));
        let token = TaskRecordSealer::shared(ring(1), 4096).seal("h-1", &task()).unwrap();
        assert!(matches!(small.open("h-1", &token), Err(TaskIdError::Id(IdError::TooLarge { .. }))));
    }

    #[test]
    fn a_task_id_never_opens_as_a_record() {
        let r = ring(1);
        let id = TaskSealer::shared(r.clone()).seal(&TaskClaims::new("", "u", "alice", 9)).unwrap();
        let as_record = format!("{TASK_RECORD_PREFIX}{}", id.strip_prefix("t1.").unwrap());
        let s = TaskRecordSealer::shared(r, 4096);
        assert!(matches!(s.open("h-1", &as_record), Err(TaskIdError::Id(IdError::Integrity))));
    }
}
