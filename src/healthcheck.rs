//! `mrtr-gateway healthcheck`: asks a running gateway's admin listener for `/healthz` over
//! loopback and exits 0 on `200`, 1 otherwise. It exists so that a container image without a
//! shell or `curl` (the distroless runtime) can still carry a `HEALTHCHECK`: the binary is the
//! probe. Blocking `std` I/O with a timeout on every step; no runtime is started.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::time::Duration;

use crate::defaults;

/// Why the probe failed.
#[derive(Debug, thiserror::Error)]
pub enum HealthError {
    #[error("the admin listener is disabled (admin.enabled = false): nothing to probe")]
    Disabled,
    #[error("connecting to {addr}: {source}")]
    Connect { addr: SocketAddr, source: std::io::Error },
    #[error("talking to {addr}: {source}")]
    Io { addr: SocketAddr, source: std::io::Error },
    #[error("{addr} answered something that is not an HTTP status line")]
    Malformed { addr: SocketAddr },
    #[error("{addr}{path} answered HTTP {status}")]
    Status { addr: SocketAddr, path: &'static str, status: u16 },
}

/// The path probed: the process serves.
pub const PATH: &str = "/healthz";
/// The most of the answer read: its status line is all that is needed.
const MAX_ANSWER_BYTES: u64 = 4096;

/// Probes `/healthz` of the admin listener configured as `admin_listen`.
pub fn check(admin_listen: Option<SocketAddr>) -> Result<(), HealthError> {
    let addr = target(admin_listen.ok_or(HealthError::Disabled)?);
    match status(addr, PATH, defaults::HEALTHCHECK_TIMEOUT)? {
        200 => Ok(()),
        status => Err(HealthError::Status { addr, path: PATH, status }),
    }
}

/// Where to connect for a listener bound to `listen`: a wildcard address is reached on the
/// loopback address of its family.
pub fn target(listen: SocketAddr) -> SocketAddr {
    let ip = match listen.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, listen.port())
}

/// Sends `GET path` to `addr` and returns the answer's HTTP status code.
pub fn status(addr: SocketAddr, path: &'static str, timeout: Duration) -> Result<u16, HealthError> {
    let mut stream =
        TcpStream::connect_timeout(&addr, timeout).map_err(|source| HealthError::Connect { addr, source })?;
    let io = |source| HealthError::Io { addr, source };
    stream.set_read_timeout(Some(timeout)).map_err(io)?;
    stream.set_write_timeout(Some(timeout)).map_err(io)?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).map_err(io)?;
    let mut answer = Vec::new();
    stream.take(MAX_ANSWER_BYTES).read_to_end(&mut answer).map_err(io)?;
    parse_status(&answer).ok_or(HealthError::Malformed { addr })
}

/// The status code of an HTTP/1.x status line at the start of `answer`.
fn parse_status(answer: &[u8]) -> Option<u16> {
    let line = answer.split(|b| *b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut parts = line.split_ascii_whitespace();
    parts.next().filter(|v| v.starts_with("HTTP/1."))?;
    parts.next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;
    use std::thread;

    use super::*;

    /// A one-shot server on loopback that answers `answer` to the first request.
    fn serve_once(answer: &'static str) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let mut head = [0u8; 1024];
            let n = conn.read(&mut head).unwrap();
            assert!(head[..n].starts_with(b"GET /healthz HTTP/1.1\r\n"));
            conn.write_all(answer.as_bytes()).unwrap();
        });
        addr
    }

    #[test]
    fn healthy_on_200() {
        let addr = serve_once("HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nok\n");
        check(Some(addr)).unwrap();
    }

    #[test]
    fn unhealthy_on_other_status() {
        let addr = serve_once("HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n");
        let err = check(Some(addr)).unwrap_err();
        assert!(matches!(err, HealthError::Status { status: 503, .. }), "{err}");
    }

    #[test]
    fn unhealthy_on_garbage() {
        let addr = serve_once("SSH-2.0-OpenSSH\r\n");
        assert!(matches!(check(Some(addr)).unwrap_err(), HealthError::Malformed { .. }));
    }

    #[test]
    fn unhealthy_when_nothing_listens() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        assert!(matches!(check(Some(addr)).unwrap_err(), HealthError::Connect { .. }));
    }

    #[test]
    fn disabled_admin_is_an_error() {
        assert!(matches!(check(None).unwrap_err(), HealthError::Disabled));
    }

    #[test]
    fn wildcard_listeners_are_probed_on_loopback() {
        assert_eq!(target("0.0.0.0:9090".parse().unwrap()), "127.0.0.1:9090".parse().unwrap());
        assert_eq!(target("[::]:9090".parse().unwrap()), "[::1]:9090".parse().unwrap());
        assert_eq!(target("10.1.2.3:9090".parse().unwrap()), "10.1.2.3:9090".parse().unwrap());
    }
}
