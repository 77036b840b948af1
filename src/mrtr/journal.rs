//! The journal of one request chain: what the client has answered and what is still asked.
//!
//! It travels sealed inside `requestState`, so nothing survives in the gateway between rounds.
//! Answers are keyed by question digest and occurrence (the k-th time the same question comes
//! up in one run of the call), never by position, so a replayed call that asks something
//! different is asked again instead of being fed another question's answer. Answers are stored
//! already in the upstream's result shape: replay hands them to the legacy server verbatim.
//!
//! Only answers to questions this chain actually asked are accepted, so answers sent without a
//! verified `requestState` (a fresh journal asks nothing) never answer a question the gateway
//! asked; only a question the server names itself may take one (`replay.rs`, `Offered`).

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::defaults;
use crate::mrtr::answers::validate_answer;
use crate::mrtr::canonical::Digest;
use crate::mrtr::translate::{to_legacy_result, InputKind, LegacyVersion};
use crate::protocol::params::Params;

/// Errors in a client's `inputResponses`; each names the key and the cause.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("`inputResponses` must be an object")]
    NotAnObject,
    #[error("inputResponses[{key:?}]: {reason}")]
    Invalid { key: String, reason: String },
    #[error("inputResponses[{key:?}] is {size} bytes; at most {limit} are accepted")]
    TooLarge { key: String, size: usize, limit: usize },
    #[error("this request chain already holds {limit} answers")]
    TooManyAnswers { limit: usize },
}

/// Bounds on accepted answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnswerLimits {
    /// Largest serialised answer.
    pub max_answer_bytes: usize,
    /// Most answers one chain may hold.
    pub max_answers: usize,
}

/// An answered question.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Answered {
    #[serde(rename = "d")]
    pub digest: Digest,
    #[serde(rename = "o", default)]
    pub occurrence: u32,
    #[serde(rename = "k")]
    pub kind: InputKind,
    /// The answer in the upstream's legacy result shape.
    #[serde(rename = "r")]
    pub result: Box<RawValue>,
}

/// A question asked in the last round and not yet answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pending {
    #[serde(rename = "k")]
    pub key: String,
    #[serde(rename = "d")]
    pub digest: Digest,
    #[serde(rename = "o", default)]
    pub occurrence: u32,
    #[serde(rename = "t")]
    pub kind: InputKind,
}

/// The journal carried from round to round.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Journal {
    #[serde(rename = "a", default, skip_serializing_if = "Vec::is_empty")]
    pub answered: Vec<Answered>,
    #[serde(rename = "p", default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<Pending>,
    /// Number of the next minted key, so keys never repeat within a chain.
    #[serde(rename = "n", default)]
    pub next_key: u32,
}

/// What [`Journal::accept_responses`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Accepted {
    /// Answers moved into the journal.
    pub answered: usize,
    /// Asked questions that got no answer and will be asked again.
    pub missing: usize,
}

/// Reads `params.inputResponses`: absent or `null` is no answers; anything but an object is an
/// error. Parsed only here, on a retry: the first call of a chain has none.
pub fn input_responses(params: &Params) -> Result<Option<Map<String, Value>>, InputError> {
    match params.parse::<Option<Value>>("inputResponses") {
        None | Some(Ok(None)) => Ok(None),
        Some(Ok(Some(Value::Object(answers)))) => Ok(Some(answers)),
        Some(_) => Err(InputError::NotAnObject),
    }
}

// === impl AnswerLimits ===

impl Default for AnswerLimits {
    fn default() -> Self {
        Self { max_answer_bytes: defaults::MAX_ANSWER_BYTES, max_answers: defaults::MAX_ANSWERS }
    }
}

// === impl Journal ===

impl Journal {
    /// An empty journal for a new chain.
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves the answers to pending questions into `answered`, validated and translated for
    /// `version`. Unanswered questions stay pending (they are asked again); keys that were never
    /// asked are ignored. Nothing changes unless every answer is valid.
    pub fn accept_responses(
        &mut self,
        responses: Option<&Map<String, Value>>,
        version: LegacyVersion,
        limits: &AnswerLimits,
    ) -> Result<Accepted, InputError> {
        let Some(responses) = responses else {
            return Ok(self.accepted(0));
        };
        let mut fresh = Vec::new();
        for pending in &self.pending {
            if let Some(answer) = responses.get(&pending.key) {
                fresh.push(answered(pending, answer, version, limits)?);
            }
        }
        if self.answered.len() + fresh.len() > limits.max_answers {
            return Err(InputError::TooManyAnswers { limit: limits.max_answers });
        }
        let count = fresh.len();
        self.pending.retain(|p| !responses.contains_key(&p.key));
        self.answered.extend(fresh);
        Ok(self.accepted(count))
    }

    fn accepted(&self, answered: usize) -> Accepted {
        Accepted { answered, missing: self.pending.len() }
    }

    /// Takes the next minted key number; `None` once the counter is spent.
    pub(crate) fn mint(&mut self) -> Option<u32> {
        self.next_key = self.next_key.checked_add(1)?;
        Some(self.next_key)
    }
}

/// `answer` to `pending`, validated, size-checked and translated for `version`.
pub(crate) fn answered(
    pending: &Pending,
    answer: &Value,
    version: LegacyVersion,
    limits: &AnswerLimits,
) -> Result<Answered, InputError> {
    let invalid = |reason: String| InputError::Invalid { key: pending.key.clone(), reason };
    let size = serialized_len(answer);
    if size > limits.max_answer_bytes {
        return Err(InputError::TooLarge { key: pending.key.clone(), size, limit: limits.max_answer_bytes });
    }
    validate_answer(pending.kind, answer).map_err(invalid)?;
    let legacy =
        to_legacy_result(pending.kind, answer.clone(), version).map_err(|e| invalid(e.to_string()))?;
    let result = serde_json::value::to_raw_value(&legacy).map_err(|e| invalid(e.to_string()))?;
    Ok(Answered { digest: pending.digest, occurrence: pending.occurrence, kind: pending.kind, result })
}

/// Serialised length of a value, counted without building the text.
fn serialized_len(value: &Value) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    match serde_json::to_writer(&mut counter, value) {
        Ok(()) => counter.0,
        // A `Value` always serialises; an impossible failure must not pass the size check.
        Err(_) => usize::MAX,
    }
}

#[cfg(test)]
mod tests;
