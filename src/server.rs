//! The accept loop shared by the front and admin listeners: one task per connection, HTTP/1.1
//! and HTTP/2 (hyper-util's auto builder), optional TLS (rustls), a connection cap, and a
//! graceful drain: on shutdown stop accepting, let in-flight requests finish up to the drain
//! time, then close what is left. A listener serves a `tower::Service` built once; each request
//! drives a clone of it (which clones `Arc`s).

use std::convert::Infallible;
use std::error::Error as StdError;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response};
use hyper::body::{Body, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;
use tower::{Service, ServiceExt};

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
    pub tls: Option<TlsAcceptor>,
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
    let graceful = GracefulShutdown::new();
    let permits = Arc::new(Semaphore::new(opts.max_connections));
    let mut builder = Builder::new(TokioExecutor::new());
    // hyper applies a header read timeout only with a timer to run it.
    builder.http1().timer(TokioTimer::new()).header_read_timeout(opts.header_read_timeout);
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            _ = &mut shutdown => break,
            p = permits.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => break },
        };
        let (stream, peer) = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => { tracing::warn!(error = %e, "accept failed"); tokio::time::sleep(Duration::from_millis(50)).await; continue }
            },
        };
        let _ = stream.set_nodelay(true);
        let service = service.clone();
        // A tower service is called through `&mut`: each request drives its own clone. The
        // request's future is boxed: hyper keeps a slot of the future's size for every
        // connection, idle ones included, and a front request's future is several KB.
        let svc = service_fn(move |req| Box::pin(service.clone().oneshot(req)));
        let (watcher, builder) = (graceful.watcher(), builder.clone());
        // Two tasks, not one with a branch: a plain connection's task does not carry the
        // size of a TLS stream and handshake.
        match opts.tls.clone() {
            None => tokio::spawn(async move {
                let _permit = permit;
                let served = watcher.watch(builder.serve_connection(TokioIo::new(stream), svc).into_owned());
                log_end(peer, served.await);
            }),
            Some(acceptor) => tokio::spawn(async move {
                let _permit = permit;
                match acceptor.accept(stream).await {
                    Ok(tls) => {
                        let served =
                            watcher.watch(builder.serve_connection(TokioIo::new(tls), svc).into_owned());
                        log_end(peer, served.await);
                    }
                    Err(e) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                }
            }),
        };
    }
    drop(listener);
    if tokio::time::timeout(opts.drain, graceful.shutdown()).await.is_err() {
        tracing::warn!(drain = ?opts.drain, "drain time over; closing remaining connections");
    }
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
