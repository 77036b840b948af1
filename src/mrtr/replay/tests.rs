use serde_json::json;

use super::*;
use crate::defaults;
use crate::mrtr::journal::AnswerLimits;
use crate::mrtr::translate::LegacyVersion;

const ELICIT: &str = "elicitation/create";

fn question(text: &str) -> Value {
    json!({"message": text, "requestedSchema": {"type": "object", "properties": {}}})
}

fn hinted(text: &str, key: &str) -> Value {
    let mut params = question(text);
    params["_meta"] = json!({ INPUT_KEY_HINT: key });
    params
}

fn accept(name: &str) -> Value {
    json!({"action": "accept", "content": {"name": name}})
}

fn ask(replay: &mut Replay, params: &Value) -> String {
    match replay.decide(ELICIT, Some(params)).unwrap() {
        Decision::Ask { key } => key,
        Decision::Answer(raw) => panic!("expected a question, got answer {}", raw.get()),
    }
}

fn answer(replay: &mut Replay, params: &Value) -> Value {
    match replay.decide(ELICIT, Some(params)).unwrap() {
        Decision::Answer(raw) => serde_json::from_str(raw.get()).unwrap(),
        Decision::Ask { key } => panic!("expected an answer, got question {key}"),
    }
}

/// Accepts `answers` (key → answer) into the journal of a finished round.
fn next_round(outcome: RoundOutcome, answers: Value) -> Replay {
    let mut journal = outcome.journal;
    let map = answers.as_object().cloned().unwrap_or_default();
    journal.accept_responses(Some(&map), LegacyVersion::V2025_11_25, &AnswerLimits::default()).unwrap();
    Replay::new(journal, defaults::MAX_QUESTIONS_PER_ROUND)
}

#[test]
fn first_round_mints_keys_and_translates_requests() {
    let mut replay = Replay::new(Journal::new(), defaults::MAX_QUESTIONS_PER_ROUND);
    let mut params = question("Name?");
    params["elicitationId"] = json!("e-1");
    assert_eq!(ask(&mut replay, &params), "elicitation-1");
    let sampling = json!({"messages": [], "maxTokens": 5});
    let decision = replay.decide("sampling/createMessage", Some(&sampling)).unwrap();
    assert!(matches!(decision, Decision::Ask { ref key } if key == "sampling-2"));
    assert!(
        matches!(replay.decide("roots/list", None).unwrap(), Decision::Ask { ref key } if key == "roots-3")
    );
    let outcome = replay.finish();
    assert_eq!(
        Value::Object(outcome.input_requests),
        json!({
            "elicitation-1": {"method": ELICIT, "params": question("Name?")},
            "sampling-2": {"method": "sampling/createMessage", "params": sampling},
            "roots-3": {"method": "roots/list"}
        })
    );
    assert_eq!(outcome.journal.pending.len(), 3);
    assert!(!outcome.diverged);
}

#[test]
fn a_chain_answers_from_the_journal_and_never_repeats_keys() {
    let mut replay = Replay::new(Journal::new(), defaults::MAX_QUESTIONS_PER_ROUND);
    let key = ask(&mut replay, &question("Name?"));
    let mut replay = next_round(replay.finish(), json!({ key: accept("Alice") }));
    assert_eq!(answer(&mut replay, &question("Name?")), accept("Alice"));
    assert_eq!(ask(&mut replay, &question("Age?")), "elicitation-2");
    let outcome = replay.finish();
    assert!(!outcome.diverged);
    assert_eq!(outcome.journal.answered.len(), 1);
    assert_eq!(outcome.journal.pending.len(), 1);
}

#[test]
fn identical_questions_get_their_answers_in_order() {
    let mut replay = Replay::new(Journal::new(), defaults::MAX_QUESTIONS_PER_ROUND);
    let first = ask(&mut replay, &question("Pick one"));
    let second = ask(&mut replay, &question("Pick one"));
    assert_ne!(first, second);
    let answers = json!({ first: accept("one"), second: accept("two") });
    let mut replay = next_round(replay.finish(), answers);
    assert_eq!(answer(&mut replay, &question("Pick one")), accept("one"));
    assert_eq!(answer(&mut replay, &question("Pick one")), accept("two"));
    // A third asking is a new question, not a reuse of an earlier answer.
    assert_eq!(ask(&mut replay, &question("Pick one")), "elicitation-3");
}

#[test]
fn the_roots_answer_every_listing_of_them_in_a_run() {
    let roots = |replay: &mut Replay| replay.decide("roots/list", None).unwrap();
    let mut replay = Replay::new(Journal::new(), defaults::MAX_QUESTIONS_PER_ROUND);
    let Decision::Ask { key } = roots(&mut replay) else { panic!("the roots were answered unasked") };
    let name = ask(&mut replay, &question("Name?"));
    let listed = json!({"roots": [{"uri": "file:///work"}]});
    let mut replay = next_round(replay.finish(), json!({ key: listed, name: accept("Alice") }));
    for listing in 0..3 {
        let Decision::Answer(raw) = roots(&mut replay) else { panic!("listing {listing} was asked") };
        assert_eq!(serde_json::from_str::<Value>(raw.get()).unwrap(), listed);
    }
    // An elicitation stays one answer per asking, with the roots answered beside it.
    assert_eq!(answer(&mut replay, &question("Name?")), accept("Alice"));
    assert_eq!(ask(&mut replay, &question("Name?")), "elicitation-3");
    assert!(!replay.finish().diverged);
}

#[test]
fn the_roots_listed_twice_in_a_round_are_asked_once() {
    let mut replay = Replay::new(Journal::new(), 3);
    let roots = |replay: &mut Replay| match replay.decide("roots/list", None).unwrap() {
        Decision::Ask { key } => key,
        Decision::Answer(raw) => panic!("the roots were answered unasked: {}", raw.get()),
    };
    let key = roots(&mut replay);
    let name = ask(&mut replay, &question("Name?"));
    // Joins the first listing: no new key, no new request, and not counted against the cap.
    assert_eq!(roots(&mut replay), key);
    assert_eq!(replay.asked(), 2);
    assert_eq!(replay.asked_under(&key).unwrap().occurrence, 0);
    // A listing with other params is another question, as any changed question is.
    let other = json!({"scope": "other"});
    let Decision::Ask { key: third } = replay.decide("roots/list", Some(&other)).unwrap() else {
        panic!("other roots were answered unasked")
    };
    assert_ne!(third, key);
    let outcome = replay.finish();
    assert_eq!(outcome.input_requests.len(), 3);
    assert!(outcome.input_requests.contains_key(&key) && outcome.input_requests.contains_key(&name));
    // Two elicitations alike stay two questions.
    let mut replay = Replay::new(Journal::new(), defaults::MAX_QUESTIONS_PER_ROUND);
    assert_ne!(ask(&mut replay, &question("Name?")), ask(&mut replay, &question("Name?")));
}

#[test]
fn a_changed_question_is_asked_again_never_answered() {
    let mut replay = Replay::new(Journal::new(), defaults::MAX_QUESTIONS_PER_ROUND);
    let key = ask(&mut replay, &question("Name?"));
    let mut replay = next_round(replay.finish(), json!({ key: accept("Alice") }));
    let key = ask(&mut replay, &question("Full name?"));
    assert_eq!(key, "elicitation-2");
    let outcome = replay.finish();
    assert!(outcome.diverged, "an unused answer beside a new question is divergence");
    assert_eq!(outcome.journal.answered.len(), 1, "answers are kept");
}

#[test]
fn another_question_never_takes_an_unanswered_questions_key() {
    let mut replay = Replay::new(Journal::new(), defaults::MAX_QUESTIONS_PER_ROUND);
    let first = ask(&mut replay, &question("A?"));
    // The client answers nothing; the next run asks something else first.
    let mut replay = next_round(replay.finish(), json!({}));
    let other = ask(&mut replay, &question("C?"));
    assert_ne!(other, first, "a key names one question: the client's answer to A must not answer C");
    assert_eq!(ask(&mut replay, &question("A?")), first, "A re-asked keeps its key");
}

#[test]
fn re_asked_pending_questions_keep_their_keys() {
    let mut replay = Replay::new(Journal::new(), defaults::MAX_QUESTIONS_PER_ROUND);
    let first = ask(&mut replay, &question("A?"));
    let second = ask(&mut replay, &question("B?"));
    // The client answers only the second question.
    let mut replay = next_round(replay.finish(), json!({ second: accept("b") }));
    assert_eq!(ask(&mut replay, &question("A?")), first);
    assert_eq!(answer(&mut replay, &question("B?")), accept("b"));
    let outcome = replay.finish();
    assert!(!outcome.diverged);
    assert_eq!(outcome.input_requests.len(), 1);
    assert!(outcome.input_requests.contains_key(&first));
}

#[test]
fn volatile_fields_do_not_break_matching() {
    let mut replay = Replay::new(Journal::new(), defaults::MAX_QUESTIONS_PER_ROUND);
    let mut params = json!({"mode": "url", "message": "Open", "url": "https://e.com", "elicitationId": "r1"});
    let key = ask(&mut replay, &params);
    let mut replay = next_round(replay.finish(), json!({ key: {"action": "accept"} }));
    params["elicitationId"] = json!("r2");
    params["_meta"] = json!({"progressToken": 9});
    assert_eq!(answer(&mut replay, &params), json!({"action": "accept"}));
}

#[test]
fn key_hints_are_honoured_when_valid_and_free() {
    let mut replay = Replay::new(Journal::new(), defaults::MAX_QUESTIONS_PER_ROUND);
    assert_eq!(ask(&mut replay, &hinted("Name?", "user_name")), "user_name");
    assert_eq!(ask(&mut replay, &hinted("Other?", "user_name")), "elicitation-1");
    assert_eq!(ask(&mut replay, &hinted("Bad?", "has space")), "elicitation-2");
    assert_eq!(ask(&mut replay, &hinted("Long?", &"k".repeat(65))), "elicitation-3");
    assert_eq!(ask(&mut replay, &hinted("Taken?", "elicitation-4")), "elicitation-4");
    // A minted key skips one a hint already took.
    assert_eq!(ask(&mut replay, &question("Plain?")), "elicitation-5");
    let outcome = replay.finish();
    assert_eq!(outcome.input_requests["user_name"]["params"], question("Name?"));
}

#[test]
fn a_re_asked_key_taken_by_a_hint_is_replaced() {
    let mut replay = Replay::new(Journal::new(), defaults::MAX_QUESTIONS_PER_ROUND);
    assert_eq!(ask(&mut replay, &hinted("A?", "user_name")), "user_name");
    let mut replay = next_round(replay.finish(), json!({}));
    // A different question grabs the hint first this round.
    assert_eq!(ask(&mut replay, &hinted("B?", "user_name")), "user_name");
    let key = ask(&mut replay, &hinted("A?", "user_name"));
    assert_ne!(key, "user_name");
    assert_eq!(replay.finish().input_requests.len(), 2);
}

/// A first run offered `answers` (key → answer), as a request without a state carries them.
fn offered(answers: Value) -> Replay {
    let map = answers.as_object().cloned().unwrap_or_default();
    let offer = Offered::new(map, LegacyVersion::V2025_11_25, AnswerLimits::default());
    Replay::new(Journal::new(), defaults::MAX_QUESTIONS_PER_ROUND).with_offered(offer)
}

#[test]
fn an_answer_without_a_state_fills_only_the_slot_the_server_named() {
    let mut replay = offered(json!({
        "user_name": accept("Alice"), "elicitation-1": accept("Mallory"), "unknown_extra_key": accept("x"),
    }));
    assert_eq!(answer(&mut replay, &hinted("Name?", "user_name")), accept("Alice"));
    // A key the gateway mints means nothing without a state: that question is asked.
    assert_eq!(ask(&mut replay, &question("Colour?")), "elicitation-1");
    // Each offered answer fills one question: the same slot asked again is asked.
    assert_eq!(ask(&mut replay, &hinted("Name again?", "user_name")), "user_name");
    let outcome = replay.finish();
    assert!(!outcome.diverged, "an offered answer is no replayed one");
    // The answer taken is in the journal, so the next round replays it without the client.
    let mut next = next_round(outcome, json!({"elicitation-1": accept("blue"), "user_name": accept("Ada")}));
    assert_eq!(answer(&mut next, &hinted("Name?", "user_name")), accept("Alice"));
}

#[test]
fn an_invalid_answer_without_a_state_is_an_error_naming_its_key() {
    let mut replay = offered(json!({"user_name": 12345}));
    let err = replay.decide(ELICIT, Some(&hinted("Name?", "user_name"))).unwrap_err();
    assert!(
        matches!(err, ReplayError::Answer(InputError::Invalid { ref key, .. }) if key == "user_name"),
        "{err}"
    );
    // Under a key the server did not name, the same answer is never looked at.
    let mut replay = offered(json!({"user_name": 12345}));
    assert_eq!(ask(&mut replay, &hinted("Name?", "name")), "name");
}

#[test]
fn answers_without_a_state_are_bounded_like_any_answers() {
    let map = json!({"a": accept("A"), "b": accept("B")}).as_object().cloned().unwrap_or_default();
    let limits = AnswerLimits { max_answers: 1, ..AnswerLimits::default() };
    let offer = Offered::new(map, LegacyVersion::V2025_11_25, limits);
    let mut replay = Replay::new(Journal::new(), defaults::MAX_QUESTIONS_PER_ROUND).with_offered(offer);
    assert_eq!(answer(&mut replay, &hinted("A?", "a")), accept("A"));
    let err = replay.decide(ELICIT, Some(&hinted("B?", "b"))).unwrap_err();
    assert!(matches!(err, ReplayError::Answer(InputError::TooManyAnswers { limit: 1 })), "{err}");
}

#[test]
fn questions_per_round_are_capped() {
    let mut replay = Replay::new(Journal::new(), 2);
    ask(&mut replay, &question("1"));
    ask(&mut replay, &question("2"));
    let err = replay.decide(ELICIT, Some(&question("3"))).unwrap_err();
    assert!(matches!(err, ReplayError::TooManyQuestions { limit: 2 }));
    assert_eq!(replay.asked(), 2);
}

#[test]
fn answered_questions_do_not_count_against_the_cap() {
    let mut replay = Replay::new(Journal::new(), 1);
    let key = ask(&mut replay, &question("1"));
    let mut journal = replay.finish().journal;
    let map = json!({ key: accept("x") }).as_object().cloned().unwrap();
    journal.accept_responses(Some(&map), LegacyVersion::V2025_11_25, &AnswerLimits::default()).unwrap();
    let mut replay = Replay::new(journal, 1);
    answer(&mut replay, &question("1"));
    ask(&mut replay, &question("2"));
}

#[test]
fn unknown_methods_are_errors() {
    let mut replay = Replay::new(Journal::new(), defaults::MAX_QUESTIONS_PER_ROUND);
    let err = replay.decide("tools/call", None).unwrap_err();
    assert!(matches!(err, ReplayError::Translate(TranslateError::UnknownMethod(_))));
    assert_eq!(replay.asked(), 0);
}

#[test]
fn an_unused_answer_without_a_new_question_is_not_divergence() {
    let mut replay = Replay::new(Journal::new(), defaults::MAX_QUESTIONS_PER_ROUND);
    let key = ask(&mut replay, &question("Name?"));
    // The upstream finishes this time without asking again: nothing new was asked.
    let outcome = next_round(replay.finish(), json!({ key: accept("Alice") })).finish();
    assert!(!outcome.diverged);
    assert!(outcome.input_requests.is_empty());
}

#[test]
fn a_parked_run_resumes_where_it_stood() {
    let mut replay = Replay::new(Journal::new(), defaults::MAX_QUESTIONS_PER_ROUND);
    let (first, second) = (question("Name?"), question("Again?"));
    let k1 = ask(&mut replay, &first);
    let k2 = ask(&mut replay, &second);
    let pending = replay.asked_under(&k2).cloned().unwrap();
    assert_eq!((pending.key.as_str(), pending.occurrence), (k2.as_str(), 0));
    assert_eq!(replay.asked_under(&k1).unwrap().key, k1);
    let outcome = replay.end_round();
    assert_eq!(outcome.input_requests.len(), 2);
    assert_eq!(outcome.journal.pending.len(), 2, "the sealed journal still allows a replay");
    let mut journal = outcome.journal;
    let answers = json!({ k1.clone(): accept("Ada") });
    let map = answers.as_object().cloned().unwrap_or_default();
    journal.accept_responses(Some(&map), LegacyVersion::V2025_11_25, &AnswerLimits::default()).unwrap();
    let first_pending = journal.answered[0].clone();
    replay.resume(journal);
    let answered = Pending { key: k1, digest: first_pending.digest, occurrence: 0, kind: first_pending.kind };
    match replay.redecide(&answered, ELICIT, Some(&first)).unwrap() {
        Decision::Answer(raw) => {
            assert_eq!(serde_json::from_str::<Value>(raw.get()).unwrap()["content"]["name"], "Ada")
        }
        Decision::Ask { key } => panic!("answered question asked again as {key}"),
    }
    match replay.redecide(&pending, ELICIT, Some(&second)).unwrap() {
        Decision::Ask { key } => assert_eq!(key, k2, "an unanswered question keeps its key"),
        Decision::Answer(_) => panic!("an unanswered question got an answer"),
    }
    // The run never restarted: a new occurrence of the first question is a new question.
    assert_eq!(ask(&mut replay, &first), "elicitation-3");
    let outcome = replay.end_round();
    assert!(!outcome.diverged, "a resumed run uses every earlier answer");
    assert_eq!(outcome.journal.answered.len(), 1);
}
