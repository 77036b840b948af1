//! Arbitrary bytes as one JSON-RPC message: classification must fail cleanly or produce an
//! envelope, never panic.

#![no_main]

use libfuzzer_sys::fuzz_target;
use mrtr_gateway::protocol::Envelope;

fuzz_target!(|data: &[u8]| {
    let _ = Envelope::parse(data);
});
