//! Arbitrary text as a `requestState` token: opening must fail cleanly, never panic, and
//! never accept a token it did not seal.

#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use mrtr_gateway::mrtr::{arguments_digest, Binding, CodecSettings, KeyRing, KeySecret, StateCodec};
use mrtr_gateway::protocol::methods::MrtrMethod;

const NOW: u64 = 1_800_000_000;

fn codec() -> Option<&'static StateCodec> {
    static CODEC: OnceLock<Option<StateCodec>> = OnceLock::new();
    CODEC
        .get_or_init(|| {
            let secrets = vec![
                KeySecret::new([0x42; 32], None).ok()?,
                KeySecret::new([0x17; 32], Some("old".to_owned())).ok()?,
            ];
            let ring = KeyRing::new(secrets).ok()?;
            Some(StateCodec::new(ring, CodecSettings::default()))
        })
        .as_ref()
}

fn binding() -> Binding {
    Binding {
        principal: "fuzz".to_owned(),
        method: MrtrMethod::ToolsCall,
        target: "tool".to_owned(),
        arguments: arguments_digest(None),
    }
}

fuzz_target!(|data: &[u8]| {
    let (Some(codec), Ok(token)) = (codec(), std::str::from_utf8(data)) else {
        return;
    };
    // Random input cannot carry a valid tag: success would mean forgery.
    assert!(codec.open_at(token, &binding(), NOW).is_err());
});
