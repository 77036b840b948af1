use chacha20poly1305::aead::AeadInPlace;
use chacha20poly1305::{Tag, XNonce};
use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::mrtr::canonical::{arguments_digest, question_digest};
use crate::mrtr::journal::{Answered, Pending};
use crate::mrtr::keyring::KeySecret;
use crate::mrtr::translate::InputKind;
use crate::protocol::methods::MrtrMethod;

const NOW: u64 = 1_800_000_000;

fn ring(keys: &[(u8, Option<&str>)]) -> KeyRing {
    let secrets = keys
        .iter()
        .map(|(byte, label)| KeySecret::new([*byte; 32], label.map(str::to_owned)).unwrap())
        .collect();
    KeyRing::new(secrets).unwrap()
}

fn codec(keys: &[(u8, Option<&str>)]) -> StateCodec {
    StateCodec::new(ring(keys), CodecSettings::default())
}

fn binding() -> Binding {
    Binding {
        principal: "alice".to_owned(),
        method: MrtrMethod::ToolsCall,
        target: "get_weather".to_owned(),
        arguments: arguments_digest(Some(&json!({"location": "New York"}))),
    }
}

fn journal(answers: &[&str]) -> Journal {
    let answered = answers
        .iter()
        .enumerate()
        .map(|(i, text)| Answered {
            digest: question_digest("elicitation/create", Some(&json!({ "n": i }))),
            occurrence: 0,
            kind: InputKind::Elicitation,
            result: serde_json::value::to_raw_value(&json!({"action": "accept", "content": {"text": text}}))
                .unwrap(),
        })
        .collect();
    let pending = vec![Pending {
        key: "user_name".to_owned(),
        digest: question_digest("roots/list", None),
        occurrence: 0,
        kind: InputKind::Roots,
    }];
    Journal { answered, pending, next_key: answers.len() as u32 }
}

fn raw(token: &str) -> Vec<u8> {
    URL_SAFE_NO_PAD.decode(token.strip_prefix(TOKEN_PREFIX).unwrap()).unwrap()
}

fn token_of(bytes: &[u8]) -> String {
    format!("{TOKEN_PREFIX}{}", URL_SAFE_NO_PAD.encode(bytes))
}

fn same_journal(a: &Journal, b: &Journal) -> bool {
    serde_json::to_string(a).unwrap() == serde_json::to_string(b).unwrap()
}

#[test]
fn seal_open_round_trip() {
    let codec = codec(&[(1, None)]);
    let journal = journal(&["Alice", "Bob"]);
    let token = codec.seal_at(&binding(), 2, &journal, NOW).unwrap();
    assert!(token.starts_with("v1."));
    let claims = codec.open_at(&token, &binding(), NOW + 10).unwrap();
    assert_eq!(claims.binding(), binding());
    assert_eq!((claims.round, claims.issued_at, claims.expires_at), (2, NOW, NOW + 600));
    assert!(same_journal(&claims.journal, &journal));
    // Random nonces: the same claims never give the same token.
    assert_ne!(token, codec.seal_at(&binding(), 2, &journal, NOW).unwrap());
}

#[test]
fn tampering_with_any_region_is_rejected() {
    let codec = codec(&[(1, None)]);
    let token = codec.seal_at(&binding(), 1, &journal(&["x"]), NOW).unwrap();
    let bytes = raw(&token);
    let regions = [
        ("key id", 0, "unknown_key"),
        ("nonce", KEY_ID_LEN + 3, "integrity"),
        ("ciphertext", HEADER_LEN + 5, "integrity"),
        ("tag", bytes.len() - 1, "integrity"),
    ];
    for (region, offset, reason) in regions {
        let mut tampered = bytes.clone();
        tampered[offset] ^= 0x01;
        let err = codec.open_at(&token_of(&tampered), &binding(), NOW).unwrap_err();
        assert_eq!(err.reason(), reason, "{region}: {err}");
    }
    for prefix in ["v2.", "V1.", "", "v1"] {
        let body = token.strip_prefix(TOKEN_PREFIX).unwrap();
        let err = codec.open_at(&format!("{prefix}{body}"), &binding(), NOW).unwrap_err();
        assert_eq!(err.reason(), "malformed", "prefix {prefix:?}");
    }
}

/// A genuine token whose raw length is `rest` modulo 3, so that its base64 ends on a full
/// group (0), or on a partial one with stray low bits in its last character (1, 2).
fn token_with_raw_len_mod3(codec: &StateCodec, rest: usize) -> String {
    (0..3)
        .map(|n| codec.seal_at(&binding(), 1, &journal(&["x".repeat(n).as_str()]), NOW).unwrap())
        .find(|token| raw(token).len() % 3 == rest)
        .unwrap()
}

/// `token` with the lowest bit of its last base64url character flipped.
fn flip_last_char_low_bit(token: &str) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let (head, last) = token.split_at(token.len() - 1);
    let index = ALPHABET.iter().position(|&c| c == last.as_bytes()[0]).unwrap();
    format!("{head}{}", ALPHABET[index ^ 1] as char)
}

#[test]
fn appended_or_padded_text_is_rejected() {
    let codec = codec(&[(1, None)]);
    // A body of whole base64 groups: what a suffix does to it is known exactly.
    let token = token_with_raw_len_mod3(&codec, 0);
    let cases = [
        ("A", "malformed"),         // a lone sixth of a byte is not base64
        ("AA", "integrity"),        // one more byte: decodes, then fails the tag
        ("AAAA", "integrity"),      // three more bytes: likewise
        ("=", "malformed"),         // padding is refused
        ("-TAMPERED", "malformed"), // nine characters leave a lone sixth
        (" ", "malformed"),         // not in the alphabet
        ("-A", "integrity"),        // `-` is in the base64url alphabet
        ("+A", "malformed"),        // `+` is standard base64, not base64url
    ];
    for (suffix, reason) in cases {
        let err = codec.open_at(&format!("{token}{suffix}"), &binding(), NOW).unwrap_err();
        assert_eq!(err.reason(), reason, "{suffix:?}: {err}");
    }
    let mut truncated = raw(&token);
    truncated.truncate(HEADER_LEN + TAG_LEN - 1);
    let err = codec.open_at(&token_of(&truncated), &binding(), NOW).unwrap_err();
    assert_eq!(err.reason(), "malformed");
}

#[test]
fn base64_is_strict_about_padding_and_stray_bits() {
    let codec = codec(&[(1, None)]);
    for (rest, padding) in [(1, "=="), (2, "=")] {
        let token = token_with_raw_len_mod3(&codec, rest);
        assert!(codec.open_at(&token, &binding(), NOW).is_ok());
        // Both decode to the very same bytes under a lenient decoder, and would then open.
        let padded = format!("{token}{padding}");
        let stray = flip_last_char_low_bit(&token);
        for (what, variant) in [("padded", padded), ("stray bits", stray)] {
            let err = codec.open_at(&variant, &binding(), NOW).unwrap_err();
            assert!(matches!(err, StateError::Malformed("not unpadded base64url")), "{what} {rest}: {err}");
        }
    }
}

#[test]
fn trailing_plaintext_after_the_claims_is_rejected() {
    let codec = codec(&[(1, None)]);
    let token = codec.seal_at(&binding(), 1, &journal(&[]), NOW).unwrap();
    let mut bytes = raw(&token);
    let (id, cipher) = codec.ring.sealing();
    let nonce = XNonce::clone_from_slice(&bytes[KEY_ID_LEN..HEADER_LEN]);
    let end = bytes.len() - TAG_LEN;
    cipher
        .decrypt_in_place_detached(
            &nonce,
            &aad(id),
            &mut bytes[HEADER_LEN..end],
            Tag::from_slice(&raw(&token)[end..]),
        )
        .unwrap();
    // Re-seal the same plaintext with one byte after the JSON object.
    let mut plain = bytes[HEADER_LEN..end].to_vec();
    plain.push(b'x');
    let tag = cipher.encrypt_in_place_detached(&nonce, &aad(id), &mut plain).unwrap();
    let mut forged = bytes[..HEADER_LEN].to_vec();
    forged.extend_from_slice(&plain);
    forged.extend_from_slice(&tag);
    let err = codec.open_at(&token_of(&forged), &binding(), NOW).unwrap_err();
    assert_eq!(err.reason(), "malformed", "{err}");
}

#[test]
fn wrong_key_and_unknown_key_id() {
    let sealer = codec(&[(1, Some("k"))]);
    let token = sealer.seal_at(&binding(), 1, &journal(&[]), NOW).unwrap();
    // Same id, other secret: the tag fails.
    let err = codec(&[(2, Some("k"))]).open_at(&token, &binding(), NOW).unwrap_err();
    assert_eq!(err.reason(), "integrity");
    let err = codec(&[(1, None)]).open_at(&token, &binding(), NOW).unwrap_err();
    assert!(matches!(err, StateError::UnknownKey(_)), "{err}");
}

#[test]
fn key_rotation_keeps_old_tokens_open() {
    let old = codec(&[(1, Some("2026-10"))]);
    let token = old.seal_at(&binding(), 1, &journal(&["a"]), NOW).unwrap();
    let rotated = codec(&[(2, Some("2026-11")), (1, Some("2026-10"))]);
    assert!(rotated.open_at(&token, &binding(), NOW).is_ok());
    let fresh = rotated.seal_at(&binding(), 2, &journal(&["a"]), NOW).unwrap();
    assert_eq!(raw(&fresh)[..KEY_ID_LEN], rotated.ring.sealing().0 .0);
    assert_eq!(old.open_at(&fresh, &binding(), NOW).unwrap_err().reason(), "unknown_key");
    let retired = codec(&[(2, Some("2026-11"))]);
    assert_eq!(retired.open_at(&token, &binding(), NOW).unwrap_err().reason(), "unknown_key");
}

#[test]
fn expiry_and_issue_time_honour_the_skew() {
    let codec = codec(&[(1, None)]);
    let token = codec.seal_at(&binding(), 1, &journal(&[]), NOW).unwrap();
    let last_valid = NOW + 600 + 30;
    assert!(codec.open_at(&token, &binding(), last_valid).is_ok());
    let err = codec.open_at(&token, &binding(), last_valid + 1).unwrap_err();
    assert!(matches!(err, StateError::Expired { .. }), "{err}");
    assert!(codec.open_at(&token, &binding(), NOW - 30).is_ok());
    let err = codec.open_at(&token, &binding(), NOW - 31).unwrap_err();
    assert_eq!(err.reason(), "not_yet_valid");
}

#[test]
fn each_binding_mismatch_has_its_own_reason() {
    let codec = codec(&[(1, None)]);
    let token = codec.seal_at(&binding(), 1, &journal(&[]), NOW).unwrap();
    let mut other = binding();
    other.principal = "mallory".to_owned();
    assert_eq!(codec.open_at(&token, &other, NOW).unwrap_err().reason(), "principal");
    let mut other = binding();
    other.method = MrtrMethod::PromptsGet;
    assert_eq!(codec.open_at(&token, &other, NOW).unwrap_err().reason(), "method");
    let mut other = binding();
    other.target = "delete_everything".to_owned();
    assert_eq!(codec.open_at(&token, &other, NOW).unwrap_err().reason(), "target");
    let mut other = binding();
    other.arguments = arguments_digest(Some(&json!({"location": "Paris"})));
    assert_eq!(codec.open_at(&token, &other, NOW).unwrap_err().reason(), "arguments");
}

#[test]
fn oversize_tokens_are_refused_before_decoding() {
    let settings = CodecSettings { max_token_bytes: 256, ..CodecSettings::default() };
    let codec = StateCodec::new(ring(&[(1, None)]), settings);
    // Not even valid base64: the size check must come first.
    let err = codec.open_at(&"*".repeat(257), &binding(), NOW).unwrap_err();
    assert!(matches!(err, StateError::TooLarge { size: 257, limit: 256 }), "{err}");
    // Sealing over the bound is the conversation's size, not a client's token: its own reason.
    let err = codec.seal_at(&binding(), 1, &journal(&["x".repeat(300).as_str()]), NOW).unwrap_err();
    assert_eq!(err.reason(), "seal_too_large");
}

#[test]
fn the_size_bound_is_exact_for_sealing_and_opening() {
    let token = codec(&[(1, None)]).seal_at(&binding(), 1, &journal(&["a"]), NOW).unwrap();
    let bounded = |max_token_bytes| {
        let settings = CodecSettings { max_token_bytes, ..CodecSettings::default() };
        StateCodec::new(ring(&[(1, None)]), settings)
    };
    let exact = bounded(token.len());
    assert_eq!(exact.settings().max_token_bytes, token.len());
    assert!(exact.open_at(&token, &binding(), NOW).is_ok());
    assert_eq!(exact.seal_at(&binding(), 1, &journal(&["a"]), NOW).unwrap().len(), token.len());
    // One byte less: sealing refuses with the token's exact length, computed before encrypting.
    let under = bounded(token.len() - 1);
    let err = under.seal_at(&binding(), 1, &journal(&["a"]), NOW).unwrap_err();
    assert!(
        matches!(err, StateError::SealTooLarge { size, limit } if size == token.len() && limit == size - 1)
    );
    let err = under.open_at(&token, &binding(), NOW).unwrap_err();
    assert!(matches!(err, StateError::TooLarge { size, .. } if size == token.len()), "{err}");
}

#[test]
fn the_shortest_sealed_body_reaches_the_tag_check() {
    let codec = codec(&[(1, None)]);
    let token = codec.seal_at(&binding(), 1, &journal(&[]), NOW).unwrap();
    let mut bytes = raw(&token);
    bytes.truncate(HEADER_LEN + TAG_LEN);
    // Key id and nonce intact, no ciphertext: long enough to try, and the tag fails.
    assert_eq!(codec.open_at(&token_of(&bytes), &binding(), NOW).unwrap_err().reason(), "integrity");
}

/// Seals `plain` as the token body, with `domain` ‖ key id as the associated data.
fn seal_with_domain(codec: &StateCodec, plain: &[u8], domain: &[u8]) -> String {
    let (id, cipher) = codec.ring.sealing();
    let nonce = [3u8; NONCE_LEN];
    let associated = [domain, &id.0[..]].concat();
    let mut sealed = plain.to_vec();
    let tag = cipher.encrypt_in_place_detached(XNonce::from_slice(&nonce), &associated, &mut sealed).unwrap();
    token_of(&[&id.0[..], &nonce, &sealed, &tag].concat())
}

#[test]
fn associated_data_is_the_domain_then_the_key_id() {
    let codec = codec(&[(1, None)]);
    let genuine = codec.seal_at(&binding(), 1, &journal(&["a"]), NOW).unwrap();
    let plain = codec.open_at(&genuine, &binding(), NOW).unwrap();
    let plain = serde_json::to_vec(&plain).unwrap();
    // Written out here, independently of the codec's own constant.
    let opened = seal_with_domain(&codec, &plain, b"mrtr-gateway/requestState/v1\0");
    assert!(codec.open_at(&opened, &binding(), NOW).is_ok());
    for other in
        [&b"mrtr-gateway/requestState/v2\0"[..], b"", &[0u8; AAD_DOMAIN.len()], &[1u8; AAD_DOMAIN.len()]]
    {
        let err = codec.open_at(&seal_with_domain(&codec, &plain, other), &binding(), NOW).unwrap_err();
        assert_eq!(err.reason(), "integrity", "domain {other:?}");
    }
}

#[test]
fn other_format_versions_are_refused() {
    let codec = codec(&[(1, None)]);
    let claims = ClaimsRef {
        version: FORMAT_VERSION + 1,
        issued_at: NOW,
        expires_at: NOW + 600,
        principal: "alice",
        method: MrtrMethod::ToolsCall,
        target: "get_weather",
        arguments: binding().arguments,
        round: 1,
        journal: &Journal::new(),
        park: None,
    };
    let (id, cipher) = codec.ring.sealing();
    let nonce = [7u8; NONCE_LEN];
    let mut plain = serde_json::to_vec(&claims).unwrap();
    let tag = cipher.encrypt_in_place_detached(XNonce::from_slice(&nonce), &aad(id), &mut plain).unwrap();
    let bytes = [&id.0[..], &nonce, &plain, &tag].concat();
    let err = codec.open_at(&token_of(&bytes), &binding(), NOW).unwrap_err();
    assert_eq!(err.reason(), "version");
}

/// The variant after `error` in declaration order, `None` after the last. The match has no
/// wildcard: a new variant does not compile until it is given its place in this chain.
fn next_variant(error: &StateError) -> Option<StateError> {
    Some(match error {
        StateError::TooLarge { .. } => StateError::Malformed(""),
        StateError::Malformed(_) => StateError::UnknownKey(KeyId([0; 4])),
        StateError::UnknownKey(_) => StateError::Integrity,
        StateError::Integrity => StateError::Version(0),
        StateError::Version(_) => StateError::Expired { expires_at: 0, now: 0 },
        StateError::Expired { .. } => StateError::NotYetValid { issued_at: 0, now: 0 },
        StateError::NotYetValid { .. } => StateError::Principal,
        StateError::Principal => StateError::Method,
        StateError::Method => StateError::Target,
        StateError::Target => StateError::Arguments,
        StateError::Arguments => StateError::Encode(serde_json::from_str::<u8>("x").unwrap_err()),
        StateError::Encode(_) => StateError::Seal,
        StateError::Seal => StateError::SealTooLarge { size: 0, limit: 0 },
        StateError::SealTooLarge { .. } => return None,
    })
}

#[test]
fn reasons_are_distinct_labels() {
    let first = StateError::TooLarge { size: 0, limit: 0 };
    let errors: Vec<StateError> = std::iter::successors(Some(first), next_variant).take(64).collect();
    let kinds: std::collections::HashSet<_> = errors.iter().map(std::mem::discriminant).collect();
    assert_eq!(kinds.len(), errors.len(), "the chain visits each variant once, then ends");
    let mut labels: Vec<&str> = errors.iter().map(StateError::reason).collect();
    assert!(labels.iter().all(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')));
    labels.sort_unstable();
    labels.dedup();
    assert_eq!(labels.len(), errors.len(), "{labels:?}");
}

#[test]
fn key_id_of_names_only_keys_the_ring_holds() {
    let old = codec(&[(1, Some("2026-10"))]);
    let token = old.seal_at(&binding(), 1, &journal(&["a"]), NOW).unwrap();
    let rotated = codec(&[(2, Some("2026-11")), (1, Some("2026-10"))]);
    assert_eq!(rotated.key_id_of(&token), Some(old.sealing_key()));
    assert_ne!(rotated.sealing_key(), old.sealing_key());
    let fresh = rotated.seal_at(&binding(), 2, &journal(&["a"]), NOW).unwrap();
    assert_eq!(rotated.key_id_of(&fresh), Some(rotated.sealing_key()));
    // A retired key, a made-up id, and text too short or not base64 name no key.
    assert_eq!(codec(&[(2, Some("2026-11"))]).key_id_of(&token), None);
    assert_eq!(rotated.key_id_of(&token_of(&[0xee; 64])), None);
    for bad in ["", "v1.", "v1.AAAA", "v2.AAAAAAAAAAAA", "v1.!!!!!!!!!!!!"] {
        assert_eq!(rotated.key_id_of(bad), None, "{bad}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn arbitrary_text_never_opens(token in "(v1\\.)?[A-Za-z0-9_=+/-]{0,200}|\\PC{0,64}") {
        let codec = codec(&[(9, None)]);
        prop_assert!(codec.open_at(&token, &binding(), NOW).is_err());
    }

    #[test]
    fn random_journals_round_trip_and_every_bit_flip_fails(
        answers in proptest::collection::vec("\\PC{0,40}", 0..6),
        round in 1u32..8,
        flip in any::<proptest::sample::Index>(),
        bit in 0u8..8,
    ) {
        let codec = codec(&[(9, None)]);
        let texts: Vec<&str> = answers.iter().map(String::as_str).collect();
        let journal = journal(&texts);
        let token = codec.seal_at(&binding(), round, &journal, NOW).unwrap();
        let claims = codec.open_at(&token, &binding(), NOW).unwrap();
        prop_assert!(same_journal(&claims.journal, &journal));
        prop_assert_eq!(claims.round, round);

        let mut bytes = raw(&token);
        let at = flip.index(bytes.len());
        bytes[at] ^= 1 << bit;
        prop_assert!(codec.open_at(&token_of(&bytes), &binding(), NOW).is_err());
    }
}
