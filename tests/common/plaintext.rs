//! What a TLS-only listener does with a plaintext HTTP request. "It fails somehow" proves
//! nothing: a listener that is not running fails too. So the request goes over a raw TCP
//! connection that must be accepted, and what comes back is read to its end: a listener that
//! speaks only TLS answers with nothing, or with a TLS alert record, never an HTTP response.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{bounded, HarnessError, TestResult};

/// The start of a TLS alert record: content type 21, then the major version 3.
const TLS_ALERT: [u8; 2] = [0x15, 0x03];

/// Connects to `addr` (which must accept), writes a plaintext HTTP/1.1 POST and returns every
/// byte the listener wrote back before it closed the connection.
pub(crate) async fn plaintext_reply(addr: SocketAddr) -> TestResult<Vec<u8>> {
    let mut stream = bounded("a TCP connection to the TLS listener", TcpStream::connect(addr)).await??;
    let request = format!(
        "POST /mcp HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{{}}"
    );
    stream.write_all(request.as_bytes()).await?;
    let mut reply = Vec::new();
    // A reset after the alert is a close too: what was read before it is the answer.
    match bounded("the TLS listener to close the connection", stream.read_to_end(&mut reply)).await? {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => return Err(e.into()),
    }
    Ok(reply)
}

/// Fails unless `addr` accepted a plaintext request and closed it without an HTTP response,
/// writing at most a TLS alert first.
pub(crate) async fn assert_tls_only(addr: SocketAddr) -> TestResult {
    let reply = plaintext_reply(addr).await?;
    if reply.starts_with(b"HTTP/") {
        return Err(HarnessError::Unexpected(format!(
            "a plaintext request was served: {}",
            String::from_utf8_lossy(&reply)
        )));
    }
    if !reply.is_empty() && !reply.starts_with(&TLS_ALERT) {
        return Err(HarnessError::Unexpected(format!("neither a TLS alert nor a close: {reply:02x?}")));
    }
    Ok(())
}
