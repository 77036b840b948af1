//! A connector that bounds the TCP connections an outbound client holds, and how many it is
//! opening at once.
//!
//! The `hyper-util` client opens a new connection for every request that finds none idle, and
//! when an idle one comes back first it finishes the connect in the background anyway. Under a
//! burst that means thousands of half-open sockets towards a server that already has all the
//! connections it will accept. Here every connection holds a permit from `open` for as long as
//! its socket lives, and every attempt holds one from `attempts` until it connected or failed:
//! a request past the bound waits, in order, for a permit or for an idle connection to come back.
//!
//! That wait is bounded too (by the connect timeout). When an idle connection comes back first,
//! the client does not drop the attempt: it finishes it in a background task. With the bound
//! saturated, as under sustained load, those abandoned attempts queued for a permit for ever,
//! one more for nearly every request that found no idle connection, and each held its task,
//! its request future and buffers: the gateway's heap grew by kilobytes per call (see the soak
//! in docs/src/benchmarks.md). Bounded, an attempt that gets no permit in time gives up.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::Uri;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioIo;
use prometheus::IntGauge;
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tower::{Service, ServiceExt};

/// Why a bounded connection could not be made.
#[derive(Debug, thiserror::Error)]
pub enum LimitError {
    #[error("the connection limit was shut down")]
    Closed,
    #[error("no connection became free within {0:?}")]
    Saturated(Duration),
    #[error("cannot connect")]
    Connect(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// The two bounds of one destination, shared by every connector built on them: the upstream's
/// pool and the legacy relay count their connections against one [`Bound`].
#[derive(Debug, Clone)]
pub struct Bound {
    limits: Arc<Limits>,
}

#[derive(Debug)]
struct Limits {
    open: Arc<Semaphore>,
    attempts: Semaphore,
    max_open: usize,
    /// Longest an attempt waits for a free connection before it gives up.
    permit_wait: Duration,
    gauge: IntGauge,
}

/// [`HttpConnector`] behind a [`Bound`].
#[derive(Clone)]
pub struct LimitedConnector {
    inner: HttpConnector,
    bound: Bound,
}

/// A connection and the permit it holds until its socket is closed.
pub struct LimitedIo {
    io: TokioIo<TcpStream>,
    _permit: OpenPermit,
}

/// One open connection: a permit, and its share of the gauge.
struct OpenPermit {
    _permit: OwnedSemaphorePermit,
    gauge: IntGauge,
}

type ConnectFuture = Pin<Box<dyn Future<Output = Result<LimitedIo, LimitError>> + Send>>;

// === impl Bound ===

impl Bound {
    /// At most `max_open` connections open and `max_attempts` being opened (both at least 1),
    /// an attempt waiting at most `permit_wait` for a free connection; `gauge` follows the
    /// number open.
    pub fn new(max_open: usize, max_attempts: usize, permit_wait: Duration, gauge: IntGauge) -> Self {
        let max_open = max_open.max(1);
        let limits = Limits {
            open: Arc::new(Semaphore::new(max_open)),
            attempts: Semaphore::new(max_attempts.max(1)),
            max_open,
            permit_wait,
            gauge,
        };
        Self { limits: Arc::new(limits) }
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.limits.max_open - self.limits.open.available_permits()
    }
}

// === impl LimitedConnector ===

impl LimitedConnector {
    /// `inner`'s connections, counted against `bound`.
    pub fn new(inner: HttpConnector, bound: &Bound) -> Self {
        Self { inner, bound: bound.clone() }
    }

    /// Connections open now (on every connector of the bound).
    pub fn open(&self) -> usize {
        self.bound.open()
    }
}

impl Service<Uri> for LimitedConnector {
    type Response = LimitedIo;
    type Error = LimitError;
    type Future = ConnectFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Readiness is decided per attempt, in `call`, so that waiting stays inside the future
        // the client can drop (its request timeout, or an idle connection coming back).
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        let (inner, limits) = (self.inner.clone(), self.bound.limits.clone());
        Box::pin(connect(inner, limits, dst))
    }
}

async fn connect(inner: HttpConnector, limits: Arc<Limits>, dst: Uri) -> Result<LimitedIo, LimitError> {
    let open = tokio::time::timeout(limits.permit_wait, limits.open.clone().acquire_owned())
        .await
        .map_err(|_| LimitError::Saturated(limits.permit_wait))?
        .map_err(|_| LimitError::Closed)?;
    let attempt = limits.attempts.acquire().await.map_err(|_| LimitError::Closed)?;
    let io = inner.oneshot(dst).await.map_err(|e| LimitError::Connect(e.into()))?;
    drop(attempt);
    Ok(LimitedIo { io, _permit: OpenPermit::new(open, limits.gauge.clone()) })
}

// === impl OpenPermit ===

impl OpenPermit {
    fn new(permit: OwnedSemaphorePermit, gauge: IntGauge) -> Self {
        gauge.inc();
        Self { _permit: permit, gauge }
    }
}

impl Drop for OpenPermit {
    fn drop(&mut self) {
        self.gauge.dec();
    }
}

// === impl LimitedIo ===

impl Connection for LimitedIo {
    fn connected(&self) -> Connected {
        self.io.connected()
    }
}

impl Read for LimitedIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl Write for LimitedIo {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    fn connector(max_open: usize, permit_wait: Duration) -> LimitedConnector {
        let gauge = IntGauge::new("open", "open connections").unwrap();
        LimitedConnector::new(HttpConnector::new(), &Bound::new(max_open, 1, permit_wait, gauge))
    }

    /// An attempt the client abandoned to a background task (an idle connection came back
    /// first) must not wait for a permit for ever while the bound stays saturated: each one
    /// that did kept its task and buffers alive, and under load they piled up without limit.
    #[tokio::test]
    async fn an_attempt_past_a_saturated_bound_gives_up_after_the_permit_wait() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let uri: Uri = format!("http://{}/", listener.local_addr().unwrap()).parse().unwrap();
        let mut connector = connector(1, Duration::from_millis(50));
        let held = connector.call(uri.clone()).await.unwrap();
        assert_eq!(connector.open(), 1);
        let background = tokio::spawn(connector.call(uri));
        let ended = tokio::time::timeout(Duration::from_secs(2), background).await;
        let outcome = ended.expect("the abandoned attempt still waits for a permit").unwrap();
        assert!(matches!(outcome, Err(LimitError::Saturated(_))));
        drop(held);
        assert_eq!(connector.open(), 0);
    }
}
