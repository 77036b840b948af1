//! The accept loop shared by the front, admin and internal listeners: one task per connection,
//! HTTP/1.1 and HTTP/2 (hyper-util's auto builder: HTTP/2 over TLS by ALPN, or in plain text
//! with prior knowledge, h2c), optional TLS (rustls), a connection cap, deadlines on every
//! phase of a connection before and between requests, and a graceful drain: on shutdown stop
//! accepting, let in-flight requests finish up to the drain time, then close what is left. A
//! listener serves a `tower::Service` built once; each request drives a clone of it (which
//! clones `Arc`s).
//!
//! The deadlines ([`deadline`]), so that a connection that sends nothing cannot hold one of the
//! listener's slots: from its accept, the handshake bound covers the TLS handshake (a
//! ClientHello included) and the first bytes that tell its protocol (HTTP/1's first byte, or
//! the HTTP/2 preface and SETTINGS frame); after that, the idle bound covers any time with no
//! request in flight (HTTP/1 keep-alive between requests, an HTTP/2 connection with no open
//! stream). A request is in flight from its head until its response body is sent or dropped,
//! so a stream that lasts minutes is never cut. hyper adds its own: the HTTP/1 request head
//! (`header_read_timeout`), and a ping of HTTP/2 peers every idle bound, which a dead one fails
//! to answer within the handshake bound. A connection past its deadline is told to close
//! (HTTP/2: GOAWAY, so a request crossing it is known unprocessed), then dropped if it has not
//! ended [`defaults::CLOSE_GRACE`] later with no request in flight.

use std::convert::Infallible;
use std::error::Error as StdError;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use http::{Request, Response};
use hyper::body::{Body, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulConnection;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, watch, Semaphore};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;
use tower::{Service, ServiceExt};

use crate::defaults;

mod deadline;
mod sniff;

use deadline::{Activity, Deadlines, Tracked, Watched};
use sniff::{Builders, Protocol};

/// Errors of the accept loop and its TLS setup.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("reading {path}: {source}")]
    TlsFile { path: String, source: std::io::Error },
    #[error("no private key in {0}")]
    NoKey(String),
    #[error("TLS configuration: {0}")]
    Tls(#[from] rustls::Error),
}

/// How a listener serves.
#[derive(Clone)]
pub struct ServeOptions {
    pub max_connections: usize,
    pub drain: Duration,
    /// Longest an HTTP/1 client may take to send a request head; then its connection is closed.
    pub header_read_timeout: Duration,
    /// Longest a new connection may take, from its accept, to finish its TLS handshake and show
    /// its protocol; then it is closed.
    pub handshake_timeout: Duration,
    /// Longest a connection may stay open with no request in flight; then it is closed.
    pub idle_timeout: Duration,
    pub tls: Option<TlsAcceptor>,
}

/// One accepted connection, before it is served.
struct Conn {
    peer: SocketAddr,
    activity: Arc<Activity>,
    deadlines: Deadlines,
    /// Turns true when the listener shuts down.
    stop: watch::Receiver<bool>,
}

/// How a connection's watchdog ended it.
enum Ended {
    /// The connection ended by itself (or by a graceful close it was told to make).
    Served(Result<(), Box<dyn StdError + Send + Sync>>),
    /// Dropped: past its deadline, or its grace to close.
    Dropped,
}

/// Serves `service` on `listener` until `shutdown` completes, then drains.
pub async fn serve<S, B>(
    listener: TcpListener,
    service: S,
    opts: ServeOptions,
    shutdown: impl Future<Output = ()>,
) where
    S: Service<Request<Incoming>, Response = Response<B>, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<Box<dyn StdError + Send + Sync>>,
{
    let permits = Arc::new(Semaphore::new(opts.max_connections));
    // Shared, not cloned per connection: the three builders are 584 bytes, which every
    // connection's task would carry for its whole life.
    let builders = Arc::new(Builders::new(&opts));
    let deadlines = Deadlines { handshake: opts.handshake_timeout, idle: opts.idle_timeout };
    let (stopping, stop) = watch::channel(false);
    let mut conns = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            biased;
            _ = &mut shutdown => break,
            p = permits.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => break },
        };
        let (stream, peer) = tokio::select! {
            biased;
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => { tracing::warn!(error = %e, "accept failed"); tokio::time::sleep(Duration::from_millis(50)).await; continue }
            },
        };
        // Reap the connections that ended, so the set holds only those still open.
        while conns.try_join_next().is_some() {}
        let _ = stream.set_nodelay(true);
        let conn = Conn { peer, activity: Activity::new(), deadlines, stop: stop.clone() };
        let svc = tracked(service.clone(), conn.activity.clone());
        let builders = Arc::clone(&builders);
        // Two tasks, not one with a branch: a plain connection's task does not carry the
        // size of a TLS stream and handshake.
        match opts.tls.clone() {
            None => conns.spawn(async move {
                let _permit = permit;
                conn.serve_plain(&builders, stream, svc).await;
            }),
            Some(acceptor) => conns.spawn(async move {
                let _permit = permit;
                conn.serve_tls(&acceptor, &builders, stream, svc).await;
            }),
        };
    }
    drop(listener);
    let _ = stopping.send(true);
    let drained = tokio::time::timeout(opts.drain, async { while conns.join_next().await.is_some() {} });
    if drained.await.is_err() {
        tracing::warn!(drain = ?opts.drain, "drain time over; closing remaining connections");
        conns.shutdown().await;
    }
}

/// `service` as hyper calls it: each request drives its own clone (a tower service is called
/// through `&mut`), and is in flight on `activity` until its response body is dropped. The
/// request's future is boxed: hyper keeps a slot of the future's size for every connection,
/// idle ones included, and a front request's future is several KB.
fn tracked<S, B>(
    service: S,
    activity: Arc<Activity>,
) -> impl hyper::service::Service<
    Request<Incoming>,
    Response = Response<Tracked<B>>,
    Error = Infallible,
    Future: Send + 'static,
> + Send
       + 'static
where
    S: Service<Request<Incoming>, Response = Response<B>, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: Body + Send + 'static,
{
    service_fn(move |req| {
        let in_flight = activity.begin();
        // A map, not an async block: the block kept the call's future twice (its capture and
        // its awaited value), 1.1 KB where the future is 0.55 KB.
        let call = service.clone().oneshot(req);
        Box::pin(
            call.map(move |result| result.map(|response| response.map(|body| Tracked::new(body, in_flight)))),
        )
    })
}

// === impl Conn ===

impl Conn {
    /// Serves a plain connection with a builder of the protocol its first bytes tell (see
    /// [`sniff`]), waiting for them within the handshake bound and until shutdown; the auto
    /// builder when they do not tell by then, whose deadlines then apply as before.
    async fn serve_plain<S, B>(mut self, builders: &Builders, stream: TcpStream, svc: S)
    where
        S: hyper::service::Service<Request<Incoming>, Response = Response<B>, Error = Infallible>
            + Send
            + 'static,
        S::Future: Send + 'static,
        B: Body<Data = bytes::Bytes> + Send + 'static,
        B::Error: Into<Box<dyn StdError + Send + Sync>>,
    {
        let deadline = self.activity.handshake_deadline(self.deadlines);
        let known = tokio::select! {
            biased;
            _ = self.stop.wait_for(|stop| *stop) => None,
            known = tokio::time::timeout_at(deadline, sniff::plain(&stream)) => known.ok().flatten(),
        };
        self.serve(builders, known, stream, svc).await;
    }

    /// Serves a connection of `protocol` with its builder, or with the auto builder when the
    /// protocol is not known. The connection is boxed: awaited in place, its state (1.5 KB with
    /// the auto builder, which holds either protocol's) was laid out in the connection's task
    /// more than once, one slot per future that moves it (measured: a 5.7 KB task).
    async fn serve<I, S, B>(mut self, builders: &Builders, protocol: Option<Protocol>, io: I, svc: S)
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
        S: hyper::service::Service<Request<Incoming>, Response = Response<B>, Error = Infallible>
            + Send
            + 'static,
        S::Future: Send + 'static,
        B: Body<Data = bytes::Bytes> + Send + 'static,
        B::Error: Into<Box<dyn StdError + Send + Sync>>,
    {
        let io = TokioIo::new(Watched::new(io, self.activity.clone()));
        let ended = match protocol {
            Some(Protocol::Http1) => self.watch(Box::pin(builders.http1.serve_connection(io, svc))).await,
            Some(Protocol::Http2) => self.watch(Box::pin(builders.http2.serve_connection(io, svc))).await,
            None => self.watch(Box::pin(builders.auto.serve_connection(io, svc))).await,
        };
        match ended {
            Ended::Served(result) => log_end(self.peer, result),
            Ended::Dropped => tracing::debug!(peer = %self.peer, "closed a connection past its deadline"),
        }
    }

    /// Serves a TLS connection once its handshake is done, within the handshake bound.
    async fn serve_tls<S, B>(mut self, acceptor: &TlsAcceptor, builders: &Builders, tcp: TcpStream, svc: S)
    where
        S: hyper::service::Service<Request<Incoming>, Response = Response<B>, Error = Infallible>
            + Send
            + 'static,
        S::Future: Send + 'static,
        B: Body<Data = bytes::Bytes> + Send + 'static,
        B::Error: Into<Box<dyn StdError + Send + Sync>>,
    {
        let deadline = self.activity.handshake_deadline(self.deadlines);
        let handshake = tokio::time::timeout_at(deadline, acceptor.accept(tcp));
        let accepted = tokio::select! {
            biased;
            _ = self.stop.wait_for(|stop| *stop) => return,
            accepted = handshake => accepted,
        };
        match accepted {
            Ok(Ok(tls)) => {
                let protocol = sniff::alpn(tls.get_ref().1.alpn_protocol());
                self.serve(builders, protocol, tls, svc).await;
            }
            Ok(Err(e)) => tracing::debug!(peer = %self.peer, error = %e, "TLS handshake failed"),
            Err(_) => tracing::debug!(peer = %self.peer, "TLS handshake not done within the handshake bound"),
        }
    }

    /// Serves `conn` until it ends, closing it gracefully when its watchdog says so (a deadline
    /// passed, or the listener shuts down) and dropping it if it has not ended a grace later.
    /// The deadlines are kept by a task of their own ([`watchdog`]): a timer polled beside the
    /// connection would be polled, its waker registered again, every time the connection's task
    /// wakes, several times per request; the connection's task polls only a oneshot.
    async fn watch<C>(&mut self, mut conn: Pin<Box<C>>) -> Ended
    where
        C: GracefulConnection,
        C::Error: Into<Box<dyn StdError + Send + Sync>>,
    {
        let (tell, told) = oneshot::channel();
        tokio::spawn(watchdog(self.activity.clone(), self.deadlines, self.stop.clone(), tell, self.peer));
        let closing = tokio::select! {
            // The connection's own end first: a request that just ended is not cut.
            biased;
            ended = conn.as_mut() => return Ended::Served(ended.map_err(Into::into)),
            told = told => match told {
                Ok(at) => at,
                // The watchdog cannot end before the connection: it ends when this receiver goes.
                Err(_) => return Ended::Served(conn.await.map_err(Into::into)),
            },
        };
        conn.as_mut().graceful_shutdown();
        loop {
            // With a request still in flight there is no deadline: look again a grace later.
            let deadline = self.activity.deadline(self.deadlines, Some(closing));
            let wake = deadline.unwrap_or_else(|| Instant::now() + defaults::CLOSE_GRACE);
            tokio::select! {
                biased;
                ended = conn.as_mut() => return Ended::Served(ended.map_err(Into::into)),
                () = tokio::time::sleep_until(wake) => {
                    let now = Instant::now();
                    if self.activity.deadline(self.deadlines, Some(closing)).is_some_and(|d| d <= now) {
                        return Ended::Dropped;
                    }
                }
            }
        }
    }
}

/// Tells the connection (through `tell`) to close once it is past its deadline or the listener
/// shuts down, with the time closing began; ends without a word when the connection ends first
/// (its receiver is dropped).
async fn watchdog(
    activity: Arc<Activity>,
    deadlines: Deadlines,
    mut stop: watch::Receiver<bool>,
    mut tell: oneshot::Sender<Instant>,
    peer: SocketAddr,
) {
    loop {
        // With a request in flight there is no deadline: look again an idle bound later.
        let deadline = activity.deadline(deadlines, None);
        let wake = deadline.unwrap_or_else(|| Instant::now() + deadlines.idle);
        tokio::select! {
            biased;
            () = tell.closed() => return,
            _ = stop.wait_for(|stop| *stop) => break,
            () = tokio::time::sleep_until(wake) => {
                let now = Instant::now();
                if activity.deadline(deadlines, None).is_some_and(|d| d <= now) {
                    tracing::debug!(%peer, "connection past its deadline: closing it");
                    break;
                }
            }
        }
    }
    let _ = tell.send(Instant::now());
}

/// Logs a connection that ended with an error (at debug: clients hang up all the time).
fn log_end(peer: std::net::SocketAddr, result: Result<(), Box<dyn StdError + Send + Sync>>) {
    if let Err(e) = result {
        tracing::debug!(%peer, error = %e, "connection ended with an error");
    }
}

/// Builds a TLS acceptor from PEM files.
pub fn tls_acceptor(cert: &std::path::Path, key: &std::path::Path) -> Result<TlsAcceptor, ServerError> {
    let read = |p: &std::path::Path| {
        std::fs::read(p).map_err(|source| ServerError::TlsFile { path: p.display().to_string(), source })
    };
    let certs = rustls_pemfile::certs(&mut &read(cert)?[..])
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| ServerError::TlsFile { path: cert.display().to_string(), source })?;
    let key_der = rustls_pemfile::private_key(&mut &read(key)?[..])
        .map_err(|source| ServerError::TlsFile { path: key.display().to_string(), source })?
        .ok_or_else(|| ServerError::NoKey(key.display().to_string()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key_der)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
