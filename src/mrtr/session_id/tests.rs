use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;

use super::*;
use crate::mrtr::canonical::arguments_digest;
use crate::mrtr::claims::Binding;
use crate::mrtr::codec::{CodecSettings, StateCodec, StateError, TOKEN_PREFIX};
use crate::mrtr::journal::Journal;
use crate::mrtr::keyring::KeySecret;
use crate::mrtr::sealed_id::HANDLE_LEN;
use crate::protocol::methods::MrtrMethod;

const UPSTREAM: &str = "upstream-session-7f3a";

fn ring(keys: &[(u8, &str)]) -> KeyRing {
    let secrets =
        keys.iter().map(|(b, l)| KeySecret::new([*b; 32], Some((*l).to_owned())).unwrap()).collect();
    KeyRing::new(secrets).unwrap()
}

fn sealer(keys: &[(u8, &str)]) -> SessionSealer {
    SessionSealer::new(ring(keys))
}

fn claims() -> SessionClaims {
    SessionClaims::new(Some(UPSTREAM.to_owned()), Reach::Shared, "alice", 1_800_000_000)
}

fn swap_prefix(token: &str, from: &str, to: &str) -> String {
    format!("{to}{}", token.strip_prefix(from).unwrap())
}

#[test]
fn round_trip_hides_the_upstream_id() {
    let s = sealer(&[(1, "a")]);
    let c = claims();
    let token = s.seal(&c).unwrap();
    assert!(token.starts_with(SESSION_ID_PREFIX));
    assert!(!token.contains(UPSTREAM));
    assert!(token.bytes().all(|b| b.is_ascii_graphic()), "a header value: {token}");
    assert_eq!(s.open(&token, "alice").unwrap(), c);
    assert_ne!(s.seal(&c).unwrap(), token, "a fresh nonce per seal");
}

#[test]
fn handles_are_random() {
    assert_ne!(claims().handle, claims().handle);
    assert_eq!(claims().handle.len(), 2 * HANDLE_LEN);
}

#[test]
fn another_principal_is_refused() {
    let s = sealer(&[(1, "a")]);
    let token = s.seal(&claims()).unwrap();
    assert!(matches!(s.open(&token, "mallory"), Err(SessionIdError::Principal)));
}

#[test]
fn tampering_and_unknown_keys_are_refused() {
    let s = sealer(&[(1, "a")]);
    let token = s.seal(&claims()).unwrap();
    let mut bytes = URL_SAFE_NO_PAD.decode(&token[SESSION_ID_PREFIX.len()..]).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    let tampered = format!("{SESSION_ID_PREFIX}{}", URL_SAFE_NO_PAD.encode(&bytes));
    assert!(matches!(s.open(&tampered, "alice"), Err(SessionIdError::Id(IdError::Integrity))));
    assert!(matches!(
        sealer(&[(2, "b")]).open(&token, "alice"),
        Err(SessionIdError::Id(IdError::UnknownKey(_)))
    ));
    assert!(matches!(s.open("s1.!!", "alice"), Err(SessionIdError::Id(IdError::Malformed(_)))));
    assert!(matches!(s.open("x", "alice"), Err(SessionIdError::Id(IdError::Malformed(_)))));
    let huge = format!("{SESSION_ID_PREFIX}{}", "A".repeat(defaults::LEGACY_MAX_SESSION_ID_BYTES));
    assert!(matches!(s.open(&huge, "alice"), Err(SessionIdError::Id(IdError::TooLarge { .. }))));
}

#[test]
fn a_rotated_ring_still_opens_older_ids() {
    let token = sealer(&[(1, "old")]).seal(&claims()).unwrap();
    assert!(sealer(&[(2, "new"), (1, "old")]).open(&token, "alice").is_ok());
}

#[test]
fn an_oversized_upstream_id_is_refused_when_sealing() {
    let big =
        SessionClaims::new(Some("x".repeat(defaults::LEGACY_MAX_SESSION_ID_BYTES)), Reach::Local, "a", 0);
    assert!(matches!(sealer(&[(1, "a")]).seal(&big), Err(SessionIdError::Id(IdError::TooLarge { .. }))));
}

#[test]
fn session_ids_and_request_states_never_open_as_each_other() {
    let keys = [(7u8, "k")];
    let codec = StateCodec::new(ring(&keys), CodecSettings::default());
    let binding = Binding {
        principal: "alice".to_owned(),
        method: MrtrMethod::ToolsCall,
        target: "t".to_owned(),
        arguments: arguments_digest(None),
    };
    let state = codec.seal_at(&binding, 1, &Journal::default(), 1_800_000_000).unwrap();
    let as_session = swap_prefix(&state, TOKEN_PREFIX, SESSION_ID_PREFIX);
    assert!(matches!(sealer(&keys).open(&as_session, "alice"), Err(SessionIdError::Id(IdError::Integrity))));

    let session = sealer(&keys).seal(&claims()).unwrap();
    let as_state = swap_prefix(&session, SESSION_ID_PREFIX, TOKEN_PREFIX);
    assert!(matches!(codec.open_at(&as_state, &binding, 1_800_000_000), Err(StateError::Integrity)));
}

#[test]
fn every_failure_has_its_own_label() {
    let encode = serde_json::from_str::<u8>("x").unwrap_err();
    let all = [
        SessionIdError::Id(IdError::TooLarge { size: 2, limit: 1 }),
        SessionIdError::Id(IdError::Malformed("x")),
        SessionIdError::Id(IdError::UnknownKey(ring(&[(1, "a")]).sealing_id())),
        SessionIdError::Id(IdError::Integrity),
        SessionIdError::Version(9),
        SessionIdError::Principal,
        SessionIdError::Id(IdError::Encode(encode)),
        SessionIdError::Id(IdError::Seal),
    ];
    let labels: Vec<&str> = all.iter().map(SessionIdError::reason).collect();
    assert_eq!(
        labels,
        ["too_large", "malformed", "unknown_key", "integrity", "version", "principal", "encode", "seal"]
    );
}

#[test]
fn the_size_bound_is_exact_when_sealing_and_opening() {
    let limit = defaults::LEGACY_MAX_SESSION_ID_BYTES;
    let s = sealer(&[(1, "a")]);
    let seal = |n: usize| s.seal(&SessionClaims::new(Some("x".repeat(n)), Reach::Local, "a", 0));
    let largest = (0..limit).take_while(|n| seal(*n).is_ok()).last().unwrap_or_default();
    let token = seal(largest).unwrap();
    // Base64 grows in steps of 4 characters per 3 bytes: the largest id comes that close.
    assert!(token.len() <= limit && token.len() + 4 > limit, "{} of {limit}", token.len());
    assert!(matches!(seal(largest + 1), Err(SessionIdError::Id(IdError::TooLarge { .. }))));
    // Opening: exactly the limit is looked at (and found malformed), one more is too large.
    let at_limit = s.open(&"x".repeat(limit), "a").unwrap_err();
    assert!(matches!(at_limit, SessionIdError::Id(IdError::Malformed(_))), "{at_limit}");
    let over = s.open(&"x".repeat(limit + 1), "a").unwrap_err();
    assert!(matches!(over, SessionIdError::Id(IdError::TooLarge { .. })), "{over}");
}
