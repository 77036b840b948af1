//! Which protocol a connection speaks, told before hyper reads from it, so that it is served
//! by a builder of that one protocol.
//!
//! hyper-util's auto builder, left to tell HTTP/1 from HTTP/2 itself, reads the first bytes
//! (up to the length of the HTTP/2 preface) and hands them back to hyper as a read of their
//! own. hyper's read buffer then holds those few bytes when it asks for room for a full read,
//! and grows from 8 KB to 16 KB: every connection kept twice the read buffer one request needs,
//! idle or not (a heap profile of 1,000 idle connections showed it). A plain connection's first
//! bytes are peeked instead (left in the socket), and a TLS connection's protocol is the one
//! ALPN chose; with the protocol known, hyper reads the request itself from its first byte.
//! When neither tells (a partial HTTP/2 preface, no ALPN, an error), the auto builder decides
//! as before.

use hyper::server::conn::http1;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use tokio::net::TcpStream;

use super::ServeOptions;

/// What HTTP/2 with prior knowledge starts with.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The protocol of a connection, once known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Protocol {
    Http1,
    Http2,
}

/// The protocol of a plain connection from the bytes it sent first (left unread); `None` when
/// they do not tell yet. Waits for at least one byte: the caller bounds the wait.
pub(super) async fn plain(stream: &TcpStream) -> Option<Protocol> {
    let mut head = [0u8; H2_PREFACE.len()];
    let n = stream.peek(&mut head).await.ok()?;
    of_first_bytes(&head[..n])
}

/// The protocol ALPN chose on a TLS connection, if it chose one.
pub(super) fn alpn(protocol: Option<&[u8]>) -> Option<Protocol> {
    match protocol? {
        b"h2" => Some(Protocol::Http2),
        b"http/1.1" => Some(Protocol::Http1),
        _ => None,
    }
}

/// The builders a listener serves its connections with, made once: one per protocol, for a
/// connection whose protocol is known, and the auto builder for one whose protocol is not.
/// hyper's own HTTP/1 builder, not the auto builder restricted to HTTP/1: its connection is
/// 640 bytes against the auto builder's 1.5 KB, which has room for either protocol's state.
/// Each has hyper's HTTP/1 head timeout or its HTTP/2 pings (both need a timer to run).
pub(super) struct Builders {
    pub(super) http1: http1::Builder,
    pub(super) http2: Builder<TokioExecutor>,
    pub(super) auto: Builder<TokioExecutor>,
}

impl Builders {
    pub(super) fn new(opts: &ServeOptions) -> Self {
        let mut http1 = http1::Builder::new();
        http1.timer(TokioTimer::new()).header_read_timeout(opts.header_read_timeout);
        let mut auto = Builder::new(TokioExecutor::new());
        auto.http1().timer(TokioTimer::new()).header_read_timeout(opts.header_read_timeout);
        auto.http2()
            .timer(TokioTimer::new())
            .keep_alive_interval(Some(opts.idle_timeout))
            .keep_alive_timeout(opts.handshake_timeout);
        Self { http1, http2: auto.clone().http2_only(), auto }
    }
}

fn of_first_bytes(head: &[u8]) -> Option<Protocol> {
    if head.is_empty() {
        return None;
    }
    if head == H2_PREFACE {
        return Some(Protocol::Http2);
    }
    if H2_PREFACE.starts_with(head) {
        return None;
    }
    Some(Protocol::Http1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_bytes_tell_the_protocol_once_they_can() {
        assert_eq!(of_first_bytes(b"POST /mcp HTTP/1.1\r\n"), Some(Protocol::Http1));
        assert_eq!(of_first_bytes(b"G"), Some(Protocol::Http1));
        assert_eq!(of_first_bytes(H2_PREFACE), Some(Protocol::Http2));
        // A partial preface could still be either: the auto builder decides.
        assert_eq!(of_first_bytes(b"PRI * HTTP/2"), None);
        assert_eq!(of_first_bytes(b"P"), None);
        assert_eq!(of_first_bytes(b""), None);
        // "PRI" then something else is not HTTP/2.
        assert_eq!(of_first_bytes(b"PRIX"), Some(Protocol::Http1));
    }

    #[test]
    fn alpn_names_the_protocol() {
        assert_eq!(alpn(Some(b"h2")), Some(Protocol::Http2));
        assert_eq!(alpn(Some(b"http/1.1")), Some(Protocol::Http1));
        assert_eq!(alpn(Some(b"spdy/3")), None);
        assert_eq!(alpn(None), None);
    }
}
