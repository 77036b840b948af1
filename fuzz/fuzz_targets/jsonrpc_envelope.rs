//! Arbitrary bytes as one JSON-RPC message: classification must fail cleanly or produce an
//! envelope, never panic; and what parses survives the gateway's own serialisers.
//!
//! Round trip: a parsed request, notification, result or error is written again with
//! `request_bytes`, `notification_bytes`, `result_bytes` or `error_bytes` and parsed once more;
//! it must come back as the same kind of message with the same id, method, params, raw result
//! text or error object.

#![no_main]

use libfuzzer_sys::fuzz_target;
use mrtr_gateway::protocol::jsonrpc::{
    error_bytes, notification_bytes, request_bytes, result_bytes, Notification, Outcome, Request, Response,
};
use mrtr_gateway::protocol::Envelope;

fn reparse(bytes: &[u8]) -> Envelope {
    match Envelope::parse(bytes) {
        Ok(envelope) => envelope,
        Err(e) => panic!("the gateway's own output does not parse ({e}): {}", String::from_utf8_lossy(bytes)),
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(envelope) = Envelope::parse(data) else {
        return;
    };
    match envelope {
        Envelope::Request(Request { id, method, params }) => {
            let again = reparse(&request_bytes(&id, &method, params.as_ref()));
            let Envelope::Request(r) = again else { panic!("a request came back as {again:?}") };
            assert_eq!((r.id, r.method, r.params), (id, method, params));
        }
        Envelope::Notification(Notification { method, params }) => {
            let again = reparse(&notification_bytes(&method, params.as_ref()));
            let Envelope::Notification(n) = again else { panic!("a notification came back as {again:?}") };
            assert_eq!((n.method, n.params), (method, params));
        }
        Envelope::Response(Response { id, outcome: Outcome::Result(raw) }) => {
            let id = id.expect("a result always has an id");
            let again = reparse(&result_bytes(&id, &raw));
            let Envelope::Response(Response { id: Some(back), outcome: Outcome::Result(text) }) = again
            else {
                panic!("a result came back as {again:?}")
            };
            assert_eq!((back, text.get()), (id, raw.get()));
        }
        Envelope::Response(Response { id, outcome: Outcome::Error(error) }) => {
            let again = reparse(&error_bytes(id.as_ref(), &error));
            let Envelope::Response(Response { id: back, outcome: Outcome::Error(e) }) = again else {
                panic!("an error came back as {again:?}")
            };
            assert_eq!((back, e), (id, error));
        }
    }
});
