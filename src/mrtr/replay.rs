//! Replay decisions: which upstream questions the journal answers and which go to the client.
//!
//! On each round the gateway runs the legacy call again from the start. A [`Replay`] cursor
//! sees every question the server pushes, in order. The k-th occurrence of a question digest
//! gets the answer recorded for that same occurrence (a roots question takes the client's
//! latest roots, however often it is asked: they are the client's state); anything else is
//! asked: under the key it had last round if it was already pending there (clients answer by
//! key), else under the server's key hint, else under a freshly minted key. When answers go
//! unused while a question never seen before is asked, the legacy tool is not deterministic;
//! the outcome says so, for the logs and metrics.
//!
//! Answers sent without a `requestState` ([`Offered`]) answer no question of the gateway's:
//! with no state there is no chain, so a minted key means nothing. But a question the server
//! names itself (its key hint) is the server's own slot, as a 2026-07-28 server reads
//! `inputResponses` by its own keys with or without a state: the offered answer under that key
//! answers it, validated as any answer, once.

use std::collections::HashMap;

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::mrtr::canonical::{question_digest, Digest};
use crate::mrtr::journal::{answered, AnswerLimits, InputError, Journal, Pending};
use crate::mrtr::keyring::valid_label;
use crate::mrtr::translate::{input_request, InputKind, LegacyVersion, TranslateError};
use crate::protocol::meta::INPUT_KEY_HINT;

/// Errors from deciding on a pushed request.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("upstream request cannot be embedded: {0}")]
    Translate(#[from] TranslateError),
    #[error("upstream asked more than {limit} questions in one round")]
    TooManyQuestions { limit: usize },
    #[error("no free input key is left in this request chain")]
    KeysExhausted,
    /// An offered answer ([`Offered`]) to a question the server named is not a valid answer.
    #[error(transparent)]
    Answer(#[from] InputError),
}

/// What to do with one pushed upstream request.
#[derive(Debug)]
pub enum Decision {
    /// Answer upstream with this legacy result, taken from the journal.
    Answer(Box<RawValue>),
    /// Ask the client under this `inputRequests` key.
    Ask { key: String },
}

/// The result of one replay round.
#[derive(Debug)]
pub struct RoundOutcome {
    /// `inputRequests`: key → `{method, params}`. Empty when nothing was asked.
    pub input_requests: Map<String, Value>,
    /// Answers kept; `pending` = the questions of this round.
    pub journal: Journal,
    /// Recorded answers went unused while a new question was asked.
    pub diverged: bool,
}

/// The `inputResponses` of a request without a `requestState`, offered to the run: each
/// answers, once, the question the server names with the same key (see the module doc).
#[derive(Debug)]
pub struct Offered {
    responses: Map<String, Value>,
    version: LegacyVersion,
    limits: AnswerLimits,
}

/// A cursor over one run of the legacy call.
#[derive(Debug)]
pub struct Replay {
    journal: Journal,
    max_questions: usize,
    occurrences: HashMap<Digest, u32>,
    used: Vec<bool>,
    asked: Vec<Pending>,
    requests: Map<String, Value>,
    new_question: bool,
    /// Answers to drop when the run ends: accepted URL elicitations the server still requires,
    /// asked again this round (see [`Replay::url_required`]).
    stale: Vec<usize>,
    /// Answers a request without a state carried, for the questions the server names.
    offered: Option<Offered>,
}

// === impl Offered ===

impl Offered {
    /// The answers of a request without a state; each is validated and translated for
    /// `version` within `limits` when a question takes it.
    pub fn new(responses: Map<String, Value>, version: LegacyVersion, limits: AnswerLimits) -> Self {
        Self { responses, version, limits }
    }
}

// === impl Replay ===

impl Replay {
    /// Starts a run over a journal whose responses have been accepted.
    pub fn new(journal: Journal, max_questions: usize) -> Self {
        Self {
            used: vec![false; journal.answered.len()],
            journal,
            max_questions,
            occurrences: HashMap::new(),
            asked: Vec::new(),
            requests: Map::new(),
            new_question: false,
            stale: Vec::new(),
            offered: None,
        }
    }

    /// Offers the run the answers of a request without a state (see [`Offered`]).
    pub fn with_offered(mut self, offered: Offered) -> Self {
        self.offered = Some(offered);
        self
    }

    /// Decides on one pushed request, in the order the upstream sent them.
    pub fn decide(&mut self, method: &str, params: Option<&Value>) -> Result<Decision, ReplayError> {
        let digest = question_digest(method, params);
        let occurrence = self.next_occurrence(digest);
        if let Some(result) = self.recorded(digest, occurrence) {
            return Ok(Decision::Answer(result));
        }
        if let Some(result) = self.take_offered(method, params, digest, occurrence)? {
            return Ok(Decision::Answer(result));
        }
        let key = self.ask(method, params, digest, occurrence)?;
        Ok(Decision::Ask { key })
    }

    /// The offered answer under the key this question's server named, validated and recorded
    /// in the journal (so a later round replays it like any answer); `None` when there is none.
    fn take_offered(
        &mut self,
        method: &str,
        params: Option<&Value>,
        digest: Digest,
        occurrence: u32,
    ) -> Result<Option<Box<RawValue>>, ReplayError> {
        let Some(offered) = self.offered.as_mut() else { return Ok(None) };
        let Some(key) = key_hint(params) else { return Ok(None) };
        let Some(answer) = offered.responses.remove(&key) else { return Ok(None) };
        let Some(kind) = InputKind::from_method(method) else { return Ok(None) };
        if self.journal.answered.len() >= offered.limits.max_answers {
            return Err(InputError::TooManyAnswers { limit: offered.limits.max_answers }.into());
        }
        let pending = Pending { key, digest, occurrence, kind };
        let recorded = answered(&pending, &answer, offered.version, &offered.limits)?;
        let result = recorded.result.clone();
        self.journal.answered.push(recorded);
        self.used.push(true);
        Ok(Some(result))
    }

    /// Counts one more sighting of `digest` in this run; returns its occurrence number.
    fn next_occurrence(&mut self, digest: Digest) -> u32 {
        let counter = self.occurrences.entry(digest).or_insert(0);
        let occurrence = *counter;
        *counter = counter.saturating_add(1);
        occurrence
    }

    /// Puts a question to the client in this round; returns its key.
    fn ask(
        &mut self,
        method: &str,
        params: Option<&Value>,
        digest: Digest,
        occurrence: u32,
    ) -> Result<String, ReplayError> {
        if let Some(listed) = self.roots_asked(method, digest) {
            return Ok(listed.key.clone());
        }
        if self.asked.len() >= self.max_questions {
            return Err(ReplayError::TooManyQuestions { limit: self.max_questions });
        }
        let (kind, request) = input_request(method, params)?;
        let key = self.key_for(kind, digest, occurrence, params)?;
        self.requests.insert(key.clone(), request);
        self.asked.push(Pending { key: key.clone(), digest, occurrence, kind });
        Ok(key)
    }

    /// The roots question of this round that a new listing of the roots joins: one answer
    /// serves both (see [`Self::recorded_index`]), so the client is asked once.
    fn roots_asked(&self, method: &str, digest: Digest) -> Option<&Pending> {
        if InputKind::from_method(method) != Some(InputKind::Roots) {
            return None;
        }
        self.asked.iter().find(|p| p.digest == digest && p.kind == InputKind::Roots)
    }

    /// Number of questions asked so far in this round.
    pub fn asked(&self) -> usize {
        self.asked.len()
    }

    /// Ends the run.
    pub fn finish(mut self) -> RoundOutcome {
        self.drop_stale();
        let diverged = self.diverged();
        self.journal.pending = self.asked;
        RoundOutcome { input_requests: self.requests, journal: self.journal, diverged }
    }

    /// Ends the round of a call that goes on running (park mode): the outcome is what
    /// [`Self::finish`] would return, and the cursor stays, for [`Self::resume`].
    pub fn end_round(&mut self) -> RoundOutcome {
        self.drop_stale();
        let diverged = self.diverged();
        let mut journal = self.journal.clone();
        journal.pending = std::mem::take(&mut self.asked);
        RoundOutcome { input_requests: std::mem::take(&mut self.requests), journal, diverged }
    }

    /// Continues a parked run with the journal of the retry, whose responses have been
    /// accepted: it holds every earlier answer and the new ones. The call never restarted, so
    /// the occurrence counts go on and every earlier answer counts as used.
    pub fn resume(&mut self, journal: Journal) {
        self.used = vec![true; journal.answered.len()];
        self.journal = journal;
        self.new_question = false;
    }

    /// The question of this round asked under `key` (what a [`Decision::Ask`] named).
    pub fn asked_under(&self, key: &str) -> Option<&Pending> {
        self.asked.iter().find(|p| p.key == key)
    }

    /// Decides again on a question a parked call is still waiting on: answered from the
    /// journal when the retry answered it, else asked again (under its earlier key).
    pub fn redecide(
        &mut self,
        pending: &Pending,
        method: &str,
        params: Option<&Value>,
    ) -> Result<Decision, ReplayError> {
        if let Some(result) = self.recorded(pending.digest, pending.occurrence) {
            return Ok(Decision::Answer(result));
        }
        let key = self.ask(method, params, pending.digest, pending.occurrence)?;
        Ok(Decision::Ask { key })
    }

    fn diverged(&self) -> bool {
        self.new_question && self.used.iter().any(|used| !used)
    }

    fn drop_stale(&mut self) {
        if !self.stale.is_empty() {
            let answered = std::mem::take(&mut self.journal.answered);
            let kept = answered.into_iter().enumerate().filter(|(i, _)| !self.stale.contains(i));
            self.journal.answered = kept.map(|(_, a)| a).collect();
            self.stale.clear();
        }
    }

    fn recorded(&mut self, digest: Digest, occurrence: u32) -> Option<Box<RawValue>> {
        let index = self.recorded_index(digest, occurrence)?;
        self.mark_used(index);
        Some(self.journal.answered[index].result.clone())
    }

    /// Where the answer to this occurrence of `digest` sits in the journal, if it has one.
    ///
    /// The client's roots are its state, not an answer to one asking: an occurrence of a roots
    /// question the journal has no answer for takes the latest roots answer to the same
    /// question, as the client would have given the same list again. A legacy server may list
    /// the roots twice in one run (a timer after `initialize` racing the tool that needs them);
    /// without this, the second listing would cost the client another round.
    fn recorded_index(&self, digest: Digest, occurrence: u32) -> Option<usize> {
        let answered = &self.journal.answered;
        answered
            .iter()
            .position(|a| a.digest == digest && a.occurrence == occurrence)
            .or_else(|| answered.iter().rposition(|a| a.digest == digest && a.kind == InputKind::Roots))
    }

    fn mark_used(&mut self, index: usize) {
        if let Some(used) = self.used.get_mut(index) {
            *used = true;
        }
    }

    fn key_for(
        &mut self,
        kind: InputKind,
        digest: Digest,
        occurrence: u32,
        params: Option<&Value>,
    ) -> Result<String, ReplayError> {
        let previous = self
            .journal
            .pending
            .iter()
            .find(|p| p.digest == digest && p.occurrence == occurrence)
            .map(|p| p.key.clone());
        if previous.is_none() {
            self.new_question = true;
        }
        match previous.or_else(|| key_hint(params)).filter(|key| !self.requests.contains_key(key)) {
            Some(key) => Ok(key),
            None => self.mint(kind),
        }
    }

    /// Mints `prefix-N`, skipping keys a server hint already took this round. Each of this
    /// round's keys can block at most one candidate, so the loop ends within that many tries.
    fn mint(&mut self, kind: InputKind) -> Result<String, ReplayError> {
        for _ in 0..=self.requests.len() {
            let number = self.journal.mint().ok_or(ReplayError::KeysExhausted)?;
            let key = format!("{}-{number}", kind.key_prefix());
            if !self.requests.contains_key(&key) {
                return Ok(key);
            }
        }
        Err(ReplayError::KeysExhausted)
    }
}

/// The opt-in `params._meta["dev.mrtr-gateway/inputKey"]`, if it is a usable key.
fn key_hint(params: Option<&Value>) -> Option<String> {
    let hint = params?.get("_meta")?.get(INPUT_KEY_HINT)?.as_str()?;
    valid_label(hint).then(|| hint.to_owned())
}

mod url;

pub use url::UrlVerdict;

#[cfg(test)]
mod tests;
