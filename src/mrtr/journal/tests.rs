use serde_json::json;

use super::*;
use crate::mrtr::canonical::question_digest;

fn pending(key: &str, kind: InputKind, question: &str) -> Pending {
    Pending {
        key: key.to_owned(),
        digest: question_digest(kind.method(), Some(&json!({ "q": question }))),
        occurrence: 0,
        kind,
    }
}

fn journal_asking(entries: &[Pending]) -> Journal {
    Journal { pending: entries.to_vec(), ..Journal::new() }
}

fn responses(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

#[test]
fn answers_move_to_answered_in_legacy_shape() {
    let mut journal = journal_asking(&[
        pending("user_name", InputKind::Elicitation, "name"),
        pending("sampling-1", InputKind::Sampling, "capital"),
    ]);
    let map = responses(json!({
        "user_name": {"action": "accept", "content": {"name": "Alice"}},
        "sampling-1": {"role": "assistant", "model": "m",
                       "content": [{"type": "text", "text": "Paris"}]}
    }));
    let accepted =
        journal.accept_responses(Some(&map), LegacyVersion::V2025_06_18, &AnswerLimits::default()).unwrap();
    assert_eq!(accepted, Accepted { answered: 2, missing: 0 });
    assert!(journal.pending.is_empty());
    let results: Vec<Value> =
        journal.answered.iter().map(|a| serde_json::from_str(a.result.get()).unwrap()).collect();
    assert_eq!(results[0], json!({"action": "accept", "content": {"name": "Alice"}}));
    assert_eq!(results[1]["content"], json!({"type": "text", "text": "Paris"}));
    assert_eq!(journal.answered[1].kind, InputKind::Sampling);
}

#[test]
fn missing_answers_stay_pending_and_unknown_keys_are_ignored() {
    let mut journal =
        journal_asking(&[pending("a", InputKind::Roots, "1"), pending("b", InputKind::Roots, "2")]);
    let map = responses(json!({
        "b": {"roots": [{"uri": "file:///r"}]},
        "unknown_extra_key": {"anything": true},
        "another_unexpected": 12345
    }));
    let accepted =
        journal.accept_responses(Some(&map), LegacyVersion::V2025_11_25, &AnswerLimits::default()).unwrap();
    assert_eq!(accepted, Accepted { answered: 1, missing: 1 });
    assert_eq!(journal.pending.len(), 1);
    assert_eq!(journal.pending[0].key, "a");
    assert_eq!(journal.answered.len(), 1);
}

#[test]
fn no_responses_change_nothing() {
    let mut journal = journal_asking(&[pending("a", InputKind::Roots, "1")]);
    let accepted =
        journal.accept_responses(None, LegacyVersion::V2025_11_25, &AnswerLimits::default()).unwrap();
    assert_eq!(accepted, Accepted { answered: 0, missing: 1 });
    assert!(journal.answered.is_empty());
}

#[test]
fn invalid_answers_name_the_key_and_change_nothing() {
    let cases = [
        (InputKind::Elicitation, json!(12345), "ElicitResult"),
        (InputKind::Elicitation, json!({"action": "ok"}), "action"),
        (InputKind::Sampling, json!({"role": "assistant", "content": {"type": "text"}}), "model"),
        (InputKind::Roots, json!({"roots": [{"uri": "http://x"}]}), "file://"),
    ];
    for (kind, answer, cause) in cases {
        let mut journal =
            journal_asking(&[pending("good", InputKind::Roots, "g"), pending("bad", kind, "b")]);
        let map = responses(json!({"good": {"roots": []}, "bad": answer}));
        let err = journal
            .accept_responses(Some(&map), LegacyVersion::V2025_11_25, &AnswerLimits::default())
            .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("\"bad\"") && text.contains(cause), "{text}");
        assert!(journal.answered.is_empty(), "a failed batch must not be half applied");
        assert_eq!(journal.pending.len(), 2);
    }
}

#[test]
fn answers_the_upstream_version_cannot_take_are_invalid() {
    let mut journal = journal_asking(&[pending("s", InputKind::Sampling, "x")]);
    let map = responses(json!({"s": {"role": "assistant", "model": "m",
        "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}}));
    let err = journal
        .accept_responses(Some(&map), LegacyVersion::V2025_06_18, &AnswerLimits::default())
        .unwrap_err();
    assert!(matches!(err, InputError::Invalid { ref key, .. } if key == "s"), "{err}");
}

#[test]
fn answer_size_and_count_are_bounded() {
    let limits = AnswerLimits { max_answer_bytes: 64, max_answers: 1 };
    let mut journal = journal_asking(&[pending("e", InputKind::Elicitation, "x")]);
    let big = responses(json!({"e": {"action": "accept", "content": {"t": "x".repeat(100)}}}));
    let err = journal.accept_responses(Some(&big), LegacyVersion::V2025_11_25, &limits).unwrap_err();
    assert!(matches!(err, InputError::TooLarge { ref key, limit: 64, .. } if key == "e"));

    let mut journal =
        journal_asking(&[pending("a", InputKind::Roots, "1"), pending("b", InputKind::Roots, "2")]);
    let two = responses(json!({"a": {"roots": []}, "b": {"roots": []}}));
    let err = journal.accept_responses(Some(&two), LegacyVersion::V2025_11_25, &limits).unwrap_err();
    assert!(matches!(err, InputError::TooManyAnswers { limit: 1 }));
}

#[test]
fn the_default_answer_bound_is_the_production_one() {
    let limits = AnswerLimits::default();
    assert_eq!(limits.max_answer_bytes, crate::defaults::MAX_ANSWER_BYTES);
    let text = |n: usize| json!({"e": {"action": "accept", "content": {"t": "x".repeat(n)}}});
    // Well above the old core-only 16 KiB, well below the documented 64 KiB.
    let mut journal = journal_asking(&[pending("e", InputKind::Elicitation, "x")]);
    let fits = responses(text(32 * 1024));
    assert!(journal.accept_responses(Some(&fits), LegacyVersion::V2025_11_25, &limits).is_ok());
    let mut journal = journal_asking(&[pending("e", InputKind::Elicitation, "x")]);
    let over = responses(text(limits.max_answer_bytes));
    let err = journal.accept_responses(Some(&over), LegacyVersion::V2025_11_25, &limits).unwrap_err();
    assert!(matches!(err, InputError::TooLarge { limit, .. } if limit == limits.max_answer_bytes));
}

#[test]
fn input_responses_field() {
    let of = |v: Value| Params::of_value(&v).unwrap();
    let answers = input_responses(&of(json!({"inputResponses": {"k": {}}}))).unwrap();
    assert_eq!(answers, json!({"k": {}}).as_object().cloned());
    assert!(input_responses(&of(json!({"inputResponses": null}))).unwrap().is_none());
    assert!(input_responses(&of(json!({}))).unwrap().is_none());
    assert!(matches!(input_responses(&of(json!({"inputResponses": [1]}))), Err(InputError::NotAnObject)));
}

#[test]
fn journal_serde_is_compact_and_round_trips() {
    let mut journal = journal_asking(&[pending("a", InputKind::Roots, "1")]);
    assert_eq!(journal.mint(), Some(1));
    let text = serde_json::to_string(&journal).unwrap();
    assert!(text.starts_with(r#"{"p":[{"k":"a","d":""#), "{text}");
    let back: Journal = serde_json::from_str(&text).unwrap();
    assert_eq!(back.pending, journal.pending);
    assert_eq!(back.next_key, 1);
    assert_eq!(serde_json::to_string(&Journal::new()).unwrap(), r#"{"n":0}"#);
    journal.next_key = u32::MAX;
    assert_eq!(journal.mint(), None);
}

#[test]
fn an_answer_of_exactly_the_bounds_is_accepted() {
    let answer = json!({"action": "accept", "content": {"t": "x".repeat(40)}});
    let size = serde_json::to_string(&answer).unwrap().len();
    let fits = |max_answer_bytes, max_answers| {
        let limits = AnswerLimits { max_answer_bytes, max_answers };
        let mut journal = journal_asking(&[
            pending("a", InputKind::Elicitation, "1"),
            pending("b", InputKind::Elicitation, "2"),
        ]);
        let both = responses(json!({"a": answer, "b": answer}));
        journal.accept_responses(Some(&both), LegacyVersion::V2025_11_25, &limits)
    };
    assert_eq!(fits(size, 2).unwrap().answered, 2);
    let err = fits(size - 1, 2).unwrap_err();
    assert!(matches!(err, InputError::TooLarge { size: s, .. } if s == size), "{err}");
    assert!(matches!(fits(size, 1).unwrap_err(), InputError::TooManyAnswers { limit: 1 }));
}

#[test]
fn answers_already_in_the_journal_count_against_the_bound() {
    let limits = AnswerLimits { max_answer_bytes: 1024, max_answers: 2 };
    let mut journal = journal_asking(&[pending("a", InputKind::Roots, "1")]);
    journal
        .accept_responses(Some(&responses(json!({"a": {"roots": []}}))), LegacyVersion::V2025_11_25, &limits)
        .unwrap();
    journal.pending = vec![pending("b", InputKind::Roots, "2"), pending("c", InputKind::Roots, "3")];
    let two = responses(json!({"b": {"roots": []}, "c": {"roots": []}}));
    let err = journal.accept_responses(Some(&two), LegacyVersion::V2025_11_25, &limits).unwrap_err();
    assert!(matches!(err, InputError::TooManyAnswers { limit: 2 }), "{err}");
    assert_eq!(journal.answered.len(), 1, "nothing changes on a refusal");
}
