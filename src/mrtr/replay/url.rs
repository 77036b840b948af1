//! The replay's view of a legacy `-32042` (URL elicitation required) error.
//!
//! A 2025-11-25 server may end a call with `-32042`, listing URL elicitations the user must
//! complete out of band before the call can succeed (the 2025-11-25 elicitation page). The
//! 2026-07-28 client learns of them as URL-mode `inputRequests`; its `accept` means only that
//! the user consented and opened the URL, not that the interaction is over. So the listed
//! elicitations are questions like any other, matched by digest and occurrence, and the verdict
//! for one run of the call is:
//! - some listed elicitation has no answer yet: ask it (the round ends);
//! - the client declined or cancelled one: the call cannot go on;
//! - the client accepted every one, and nothing else is pending: re-issue the call once in this
//!   run, the same as the legacy client's retry after the interaction;
//! - the re-issued call still requires an accepted one: the interaction has not completed, so
//!   it is asked again (and its stale answer dropped), as the 2026-07-28 spec lets a server
//!   answer a retry with another `InputRequiredResult`. The round limit bounds the loop.

use serde_json::Value;

use super::Replay;
use crate::mrtr::canonical::question_digest;
use crate::mrtr::ReplayError;
use crate::protocol::methods::ELICITATION_CREATE;

/// What a `-32042` error means for the current run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UrlVerdict {
    /// End the round: the questions are in this round's `inputRequests`.
    Ask,
    /// The client accepted every listed elicitation: re-issue the call now (then
    /// [`Replay::restart`] the cursor).
    Reissue,
    /// The client declined or cancelled a listed elicitation.
    Refused,
}

// === impl Replay ===

impl Replay {
    /// Decides on the URL elicitations a `-32042` error listed (each the params of the
    /// `elicitation/create` it stands for). `reissued`: the call was already re-issued in this
    /// run because the client had accepted every listed elicitation.
    pub fn url_required(
        &mut self,
        elicitations: &[Value],
        reissued: bool,
    ) -> Result<UrlVerdict, ReplayError> {
        let seen: Vec<_> = elicitations
            .iter()
            .map(|params| {
                let digest = question_digest(ELICITATION_CREATE, Some(params));
                let occurrence = self.next_occurrence(digest);
                (params, digest, occurrence, self.recorded_index(digest, occurrence))
            })
            .collect();
        if seen.iter().filter_map(|s| s.3).any(|index| !self.accepted(index)) {
            return Ok(UrlVerdict::Refused);
        }
        let all_answered = seen.iter().all(|s| s.3.is_some());
        if all_answered && !reissued && self.asked.is_empty() {
            seen.iter().filter_map(|s| s.3).for_each(|index| self.mark_used(index));
            return Ok(UrlVerdict::Reissue);
        }
        for (params, digest, occurrence, index) in seen {
            if let Some(index) = index {
                self.mark_used(index);
                if !reissued {
                    // Accepted; the call is re-issued once the others are answered too.
                    continue;
                }
                self.stale.push(index);
            }
            self.ask(ELICITATION_CREATE, Some(params), digest, occurrence)?;
        }
        Ok(UrlVerdict::Ask)
    }

    /// Starts the cursor over for a re-issued call: occurrences count from zero again, answers
    /// already used stay used.
    pub fn restart(&mut self) {
        self.occurrences.clear();
    }

    /// True when the recorded answer at `index` is an `accept`.
    fn accepted(&self, index: usize) -> bool {
        let action = serde_json::from_str::<Value>(self.journal.answered[index].result.get())
            .ok()
            .and_then(|answer| answer.get("action").and_then(Value::as_str).map(str::to_owned));
        action.as_deref() == Some("accept")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::defaults;
    use crate::mrtr::journal::AnswerLimits;
    use crate::mrtr::replay::RoundOutcome;
    use crate::mrtr::translate::LegacyVersion;
    use crate::mrtr::{Decision, Journal};

    fn login(id: &str) -> Value {
        json!({"mode": "url", "message": "Sign in", "url": "https://login.example.com/x", "elicitationId": id})
    }

    fn fresh() -> Replay {
        Replay::new(Journal::new(), defaults::MAX_QUESTIONS_PER_ROUND)
    }

    /// The next run, after the client answered every key of `outcome` with `action`.
    fn answered(outcome: RoundOutcome, action: &str) -> Replay {
        let mut journal = outcome.journal;
        let answers = outcome.input_requests.keys().map(|k| (k.clone(), json!({"action": action}))).collect();
        journal
            .accept_responses(Some(&answers), LegacyVersion::V2025_11_25, &AnswerLimits::default())
            .unwrap();
        Replay::new(journal, defaults::MAX_QUESTIONS_PER_ROUND)
    }

    #[test]
    fn a_new_url_elicitation_is_asked_in_url_mode() {
        let mut replay = fresh();
        assert_eq!(replay.url_required(&[login("e-1")], false).unwrap(), UrlVerdict::Ask);
        let outcome = replay.finish();
        assert_eq!(
            Value::Object(outcome.input_requests),
            json!({"elicitation-1": {"method": "elicitation/create", "params":
                {"mode": "url", "message": "Sign in", "url": "https://login.example.com/x"}}})
        );
        assert_eq!(outcome.journal.pending.len(), 1);
    }

    #[test]
    fn accepted_elicitations_reissue_the_call_once_then_are_asked_again() {
        let mut replay = fresh();
        replay.url_required(&[login("e-1")], false).unwrap();
        // The server mints a new elicitationId on every call: it is not part of the question.
        let mut replay = answered(replay.finish(), "accept");
        assert_eq!(replay.url_required(&[login("e-2")], false).unwrap(), UrlVerdict::Reissue);
        replay.restart();
        assert_eq!(replay.url_required(&[login("e-3")], true).unwrap(), UrlVerdict::Ask);
        let outcome = replay.finish();
        assert!(!outcome.diverged);
        assert_eq!(outcome.input_requests.len(), 1);
        // The stale accept is dropped: only the new question is pending, nothing is answered.
        assert!(outcome.journal.answered.is_empty());
        assert_eq!(outcome.journal.pending.len(), 1);
    }

    #[test]
    fn a_declined_or_cancelled_elicitation_refuses_the_call() {
        for action in ["decline", "cancel"] {
            let mut replay = fresh();
            replay.url_required(&[login("e-1")], false).unwrap();
            let mut replay = answered(replay.finish(), action);
            assert_eq!(replay.url_required(&[login("e-1")], false).unwrap(), UrlVerdict::Refused, "{action}");
        }
    }

    #[test]
    fn a_reissued_call_answers_its_pushed_url_question_from_the_journal() {
        let mut replay = fresh();
        replay.url_required(&[login("e-1")], false).unwrap();
        let mut replay = answered(replay.finish(), "accept");
        assert_eq!(replay.url_required(&[login("e-2")], false).unwrap(), UrlVerdict::Reissue);
        replay.restart();
        // The re-issued call pushes the same elicitation as a request: the accept answers it.
        let decision = replay.decide(ELICITATION_CREATE, Some(&login("e-4"))).unwrap();
        assert!(matches!(decision, Decision::Answer(raw) if raw.get().contains("accept")));
    }

    #[test]
    fn only_the_unanswered_of_several_are_asked_and_nothing_is_reissued_before_all_are() {
        let other = json!({"mode": "url", "message": "Pay", "url": "https://pay.example.com/y", "elicitationId": "p"});
        let mut replay = fresh();
        replay.url_required(&[login("e-1")], false).unwrap();
        let mut replay = answered(replay.finish(), "accept");
        assert_eq!(replay.url_required(&[login("e-1"), other.clone()], false).unwrap(), UrlVerdict::Ask);
        let outcome = replay.finish();
        assert_eq!(outcome.input_requests.len(), 1);
        assert_eq!(
            outcome.input_requests.values().next().unwrap()["params"]["url"],
            "https://pay.example.com/y"
        );
        let mut replay = answered(outcome, "accept");
        assert_eq!(replay.url_required(&[login("e-1"), other], false).unwrap(), UrlVerdict::Reissue);
    }

    #[test]
    fn a_pending_pushed_question_defers_the_reissue() {
        let mut replay = fresh();
        replay.url_required(&[login("e-1")], false).unwrap();
        let mut replay = answered(replay.finish(), "accept");
        let form = json!({"message": "Name?", "requestedSchema": {"type": "object", "properties": {}}});
        assert!(matches!(replay.decide(ELICITATION_CREATE, Some(&form)).unwrap(), Decision::Ask { .. }));
        assert_eq!(replay.url_required(&[login("e-2")], false).unwrap(), UrlVerdict::Ask);
        // Only the form question is asked; the accepted URL one waits in the journal.
        let outcome = replay.finish();
        assert_eq!(outcome.input_requests.len(), 1);
        assert_eq!(outcome.journal.answered.len(), 1);
    }
}
