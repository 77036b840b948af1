//! Request ids and the request span. An id is the client's own `x-request-id` when it sent
//! one the gateway accepts; otherwise a random per-process prefix and a counter, unique across
//! replicas without a random draw per request. The span carries the id, so every line logged
//! while serving the request (the request line included) names it; headers are recorded only
//! at debug level, after the stack has marked secrets sensitive.
//!
//! A client's id is echoed on the response and written on every log line of its request, so
//! it is kept only when it is one value of at most [`defaults::MAX_CLIENT_REQUEST_ID_BYTES`]
//! bytes of letters, digits and `-_.:/+=@`, and not of the form the gateway issues
//! (`<8 hex digits>-<hex digits>`, which a client could otherwise use to pass its lines off
//! as another request's). Any other is dropped, and the request gets an id of the gateway's.
//!
//! The span also names the request's principal once it is authenticated (recorded by
//! [`crate::auth`]; nothing for a request refused before, a 401), and a legacy session's
//! `Mcp-Session-Id` by a fingerprint only: the id is a bearer of the session, so the header
//! itself is marked sensitive like `Authorization`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use http::{HeaderName, HeaderValue, Request};
use tower_http::request_id::{MakeRequestId, RequestId};
use tower_http::trace::MakeSpan;
use tracing::field::Empty;
use tracing::{Level, Span};

use crate::defaults;
use crate::protocol::headers;

/// The request id header, read and echoed.
pub(super) const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The legacy session header, marked sensitive and logged as a fingerprint.
pub(super) const SESSION_ID: HeaderName = headers::SESSION_ID;

/// Characters a client's request id may hold besides ASCII letters and digits.
const ID_PUNCTUATION: &[u8] = b"-_.:/+=@";

/// Makes `<prefix>-<counter>` ids, in hex.
#[derive(Debug, Clone)]
pub(super) struct NextId {
    prefix: u32,
    counter: Arc<AtomicU64>,
}

/// Makes the request span.
#[derive(Debug, Clone, Copy)]
pub(super) struct FrontSpan;

// === impl NextId ===

impl NextId {
    pub(super) fn new() -> Self {
        Self { prefix: rand::random(), counter: Arc::new(AtomicU64::new(1)) }
    }
}

impl MakeRequestId for NextId {
    fn make_request_id<B>(&mut self, _: &Request<B>) -> Option<RequestId> {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        // Written by hand: `format!` cost several hundred instructions on every request.
        let mut id = [0u8; ID_BYTES];
        let len = issued_id(self.prefix, n, &mut id);
        HeaderValue::from_bytes(&id[..len]).ok().map(RequestId::new)
    }
}

/// The longest id issued: 8 hex digits, `-`, and up to 16 more.
const ID_BYTES: usize = 8 + 1 + 16;

/// Writes `<prefix as 8 hex digits>-<n in hex>` into `out`; returns its length.
fn issued_id(prefix: u32, n: u64, out: &mut [u8; ID_BYTES]) -> usize {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for (i, byte) in out[..8].iter_mut().enumerate() {
        *byte = HEX[(prefix >> (28 - 4 * i) & 0xf) as usize];
    }
    out[8] = b'-';
    let digits = (16 - n.leading_zeros() as usize / 4).max(1);
    for (i, byte) in out[9..9 + digits].iter_mut().enumerate() {
        *byte = HEX[(n >> (4 * (digits - 1 - i)) & 0xf) as usize];
    }
    9 + digits
}

/// Drops a client's `x-request-id` the gateway does not keep (see the module doc), so that
/// the next layer issues one.
pub(super) fn screen_request_id<B>(mut req: Request<B>) -> Request<B> {
    let mut values = req.headers().get_all(X_REQUEST_ID).iter();
    let keep = match (values.next(), values.next()) {
        (None, _) => return req,
        (Some(one), None) => acceptable_id(one.as_bytes()),
        (Some(_), Some(_)) => false,
    };
    if !keep {
        req.headers_mut().remove(X_REQUEST_ID);
    }
    req
}

fn acceptable_id(id: &[u8]) -> bool {
    !id.is_empty()
        && id.len() <= defaults::MAX_CLIENT_REQUEST_ID_BYTES
        && id.iter().all(|b| b.is_ascii_alphanumeric() || ID_PUNCTUATION.contains(b))
        && !issued_form(id)
}

/// `<8 hex digits>-<hex digits>`: the form [`NextId`] makes.
fn issued_form(id: &[u8]) -> bool {
    id.len() > 9 && id[8] == b'-' && id.iter().enumerate().all(|(i, b)| i == 8 || b.is_ascii_hexdigit())
}

// === impl FrontSpan ===

impl<B> MakeSpan<B> for FrontSpan {
    fn make_span(&mut self, req: &Request<B>) -> Span {
        let id = req.headers().get(X_REQUEST_ID).and_then(|v| v.to_str().ok()).unwrap_or_default();
        let span = tracing::info_span!(
            "front",
            request_id = id,
            principal = Empty,
            session = Empty,
            headers = Empty
        );
        if span.is_disabled() {
            return span;
        }
        if let Some(session) = req.headers().get(SESSION_ID) {
            span.record("session", crate::logging::fingerprint(session.as_bytes()).as_str());
        }
        if tracing::enabled!(Level::DEBUG) {
            span.record("headers", tracing::field::debug(req.headers()));
        }
        span
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issued_ids_are_the_prefix_and_the_counter_in_hex() {
        for (prefix, n) in [
            (0, 0),
            (0xdead_beef, 1),
            (7, 0xff),
            (u32::MAX, 0x10),
            (1, u64::MAX),
            (0x00ab_0000, 0x1_2345_6789),
        ] {
            let mut out = [0u8; ID_BYTES];
            let len = issued_id(prefix, n, &mut out);
            assert_eq!(std::str::from_utf8(&out[..len]), Ok(format!("{prefix:08x}-{n:x}").as_str()));
            assert!(issued_form(&out[..len]));
        }
    }
}
