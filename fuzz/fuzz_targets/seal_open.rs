//! Fuzzer-chosen claims, sealed with a test key, opened against fuzzed bindings and times.
//!
//! `open_state` cannot get past the Poly1305 tag; this target seals the claim bytes itself
//! (through the `fuzzing` feature's `StateCodec::seal_bytes`), so every open reaches claims
//! decoding, the version check, the time window, the binding checks and the journal. It then
//! answers the journal's pending questions and seals the result again.
//!
//! Input layout (seeds in `corpus/seal_open/` are made by `examples/seed_corpus.rs`):
//!
//! ```text
//! byte 0      flags: 0x01 seal with the older key of the ring (rotation)
//!                    0x02 `now` is issued_at + delta (else `now` = delta)
//!                    0x04 / 0x08 / 0x10 / 0x20 other principal / method / target / arguments
//!                    0x40 tamper with one character of the token
//! bytes 1..9  delta, i64 little-endian
//! byte 9      which character to tamper with
//! rest        claims bytes, then optionally 0x00 and `inputResponses` JSON
//! ```
//!
//! Properties: never panic; a tampered token never opens; an untouched token is refused as
//! malformed exactly when its bytes are not claims JSON; otherwise the outcome is the first
//! failing check in the documented order (version, issue time, expiry, principal, method,
//! target, arguments), and an opened state is bound to the request and inside its window.
//! Accepting responses changes nothing on error, and a journal sealed again opens unchanged.

#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use mrtr_gateway::mrtr::claims::FORMAT_VERSION;
use mrtr_gateway::mrtr::codec::TOKEN_PREFIX;
use mrtr_gateway::mrtr::{
    arguments_digest, AnswerLimits, Binding, CodecSettings, Digest, Journal, KeyRing, KeySecret,
    LegacyVersion, StateClaims, StateCodec, StateError,
};
use mrtr_gateway::protocol::methods::MrtrMethod;

const NOW: u64 = 1_800_000_000;
const B64URL: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

struct Codecs {
    /// Opens with both keys; seals with the newer.
    current: StateCodec,
    /// A replica still sealing with the older key.
    older: StateCodec,
}

fn codecs() -> &'static Codecs {
    static CODECS: OnceLock<Codecs> = OnceLock::new();
    CODECS.get_or_init(|| {
        let key = |byte, label: Option<&str>| {
            KeySecret::new([byte; 32], label.map(str::to_owned)).expect("test key")
        };
        let ring = KeyRing::new(vec![key(0x42, None), key(0x17, Some("old"))]).expect("ring");
        let older = KeyRing::new(vec![key(0x17, Some("old"))]).expect("ring");
        Codecs {
            current: StateCodec::new(ring, CodecSettings::default()),
            older: StateCodec::new(older, CodecSettings::default()),
        }
    })
}

fn other_method(m: MrtrMethod) -> MrtrMethod {
    match m {
        MrtrMethod::ToolsCall => MrtrMethod::PromptsGet,
        MrtrMethod::PromptsGet => MrtrMethod::ResourcesRead,
        MrtrMethod::ResourcesRead => MrtrMethod::ToolsCall,
    }
}

/// The refusal the documented check order predicts for decoded claims, if any.
fn expected_refusal(c: &StateClaims, binding: &Binding, now: u64, skew: u64) -> Option<&'static str> {
    if c.version != FORMAT_VERSION {
        Some("version")
    } else if c.issued_at > now.saturating_add(skew) {
        Some("not_yet_valid")
    } else if now > c.expires_at.saturating_add(skew) {
        Some("expired")
    } else if c.principal != binding.principal {
        Some("principal")
    } else if c.method != binding.method {
        Some("method")
    } else if c.target != binding.target {
        Some("target")
    } else if c.arguments != binding.arguments {
        Some("arguments")
    } else {
        None
    }
}

fn json(c: &StateClaims) -> Vec<u8> {
    serde_json::to_vec(c).expect("claims serialise")
}

fn journal_json(j: &Journal) -> Vec<u8> {
    serde_json::to_vec(j).expect("journal serialises")
}

fn tamper(token: &str, at: u8) -> String {
    let body = &token.as_bytes()[TOKEN_PREFIX.len()..];
    let mut bytes = token.as_bytes().to_vec();
    let i = TOKEN_PREFIX.len() + usize::from(at) % body.len();
    let pos = B64URL.iter().position(|&b| b == bytes[i]).unwrap_or(0);
    bytes[i] = B64URL[(pos + 1 + usize::from(at) % 63) % 64];
    String::from_utf8(bytes).expect("base64url is ASCII")
}

fn check_open(
    result: &Result<StateClaims, StateError>,
    decoded: Option<&StateClaims>,
    b: &Binding,
    now: u64,
) {
    let skew = codecs().current.settings().skew.as_secs();
    match (result, decoded) {
        (Err(e), None) => assert_eq!(e.reason(), "malformed", "{e}"),
        (Err(e), Some(c)) => assert_eq!(Some(e.reason()), expected_refusal(c, b, now, skew), "{e}"),
        (Ok(_), None) => panic!("opened claims that do not decode"),
        (Ok(opened), Some(c)) => {
            assert_eq!(expected_refusal(c, b, now, skew), None);
            assert_eq!(&opened.binding(), b);
            assert_eq!(json(opened), json(c));
        }
    }
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 10 {
        return;
    }
    let flags = data[0];
    let delta = i64::from_le_bytes(data[1..9].try_into().expect("8 bytes"));
    let at = data[9];
    let rest = &data[10..];
    let (claims, responses) = match rest.iter().position(|&b| b == 0) {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    let codecs = codecs();
    let sealer = if flags & 0x01 != 0 { &codecs.older } else { &codecs.current };
    let Ok(token) = sealer.seal_bytes(claims) else {
        // Only an oversized token is refused at sealing.
        return;
    };

    let decoded: Option<StateClaims> = serde_json::from_slice(claims).ok();
    let mut binding = match &decoded {
        Some(c) => c.binding(),
        None => Binding {
            principal: "fuzz".to_owned(),
            method: MrtrMethod::ToolsCall,
            target: "tool".to_owned(),
            arguments: arguments_digest(None),
        },
    };
    if flags & 0x04 != 0 {
        binding.principal.push('x');
    }
    if flags & 0x08 != 0 {
        binding.method = other_method(binding.method);
    }
    if flags & 0x10 != 0 {
        binding.target.push('x');
    }
    if flags & 0x20 != 0 {
        let mut bytes = binding.arguments.0;
        bytes[0] ^= 1;
        binding.arguments = Digest(bytes);
    }
    let now = if flags & 0x02 != 0 {
        decoded.as_ref().map_or(NOW, |c| c.issued_at).saturating_add_signed(delta)
    } else {
        delta as u64
    };

    if flags & 0x40 != 0 {
        let forged = tamper(&token, at);
        let result = codecs.current.open_at(&forged, &binding, now);
        assert!(
            matches!(
                result,
                Err(StateError::Malformed(_) | StateError::UnknownKey(_) | StateError::Integrity)
            ),
            "a tampered token was not refused at authentication: {result:?}"
        );
        return;
    }

    let result = codecs.current.open_at(&token, &binding, now);
    check_open(&result, decoded.as_ref(), &binding, now);
    let Ok(mut opened) = result else { return };

    // An opened state survives being sealed again verbatim.
    let again = codecs.current.seal_bytes(&json(&opened)).expect("reseal");
    check_open(&codecs.current.open_at(&again, &binding, now), Some(&opened), &binding, now);

    // Answer its pending questions, then seal the journal for the next round.
    let responses = responses.and_then(|r| serde_json::from_slice::<serde_json::Value>(r).ok());
    let map = responses.as_ref().and_then(|v| v.as_object());
    let version = [LegacyVersion::V2025_11_25, LegacyVersion::V2025_06_18, LegacyVersion::V2025_03_26]
        [usize::from(at) % 3];
    let limits = AnswerLimits::default();
    let before = journal_json(&opened.journal);
    let (answered, pending) = (opened.journal.answered.len(), opened.journal.pending.len());
    match opened.journal.accept_responses(map, version, &limits) {
        Err(_) => assert_eq!(journal_json(&opened.journal), before, "a refused answer changed the journal"),
        Ok(accepted) => {
            assert_eq!(opened.journal.answered.len(), answered + accepted.answered);
            assert!(opened.journal.pending.len() <= pending);
            assert_eq!(accepted.missing, opened.journal.pending.len());
            if accepted.answered > 0 {
                assert!(opened.journal.answered.len() <= limits.max_answers);
            }
        }
    }
    let round = opened.round.saturating_add(1);
    let Ok(next) = codecs.current.seal_at(&binding, round, &opened.journal, NOW) else {
        return;
    };
    let reopened = codecs.current.open_at(&next, &binding, NOW).expect("a freshly sealed state opens");
    assert_eq!(reopened.round, round);
    assert_eq!(journal_json(&reopened.journal), journal_json(&opened.journal));
});
