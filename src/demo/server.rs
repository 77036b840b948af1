//! The accept loop: bounded connections, an idle-session sweeper, and a bounded graceful drain.
//!
//! Shaped after mini-redis: the caller binds the listener and chooses when to stop. On
//! shutdown the sessions are closed first, which stops every call and ends every event stream,
//! so that open SSE responses do not hold the drain open.

use std::future::Future;
use std::io;
use std::sync::{Arc, Weak};
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

use super::http;
use super::Shared;

/// How long connections get to finish after shutdown before they are cut.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(2);
/// Pause after a failed accept (e.g. out of file descriptors) before trying again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// Bounds on how often idle sessions are looked for.
const SWEEP_MIN: Duration = Duration::from_secs(1);
const SWEEP_MAX: Duration = Duration::from_secs(60);
/// A client must send its request headers within this time.
const HEADER_TIMEOUT: Duration = Duration::from_secs(30);

/// Errors of the accept loop.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ServerError {
    #[error("the connection limit semaphore was closed")]
    LimitClosed,
}

/// Serves `listener` until `shutdown` completes.
pub(crate) async fn run(shared: Arc<Shared>, listener: TcpListener, shutdown: impl Future) -> io::Result<()> {
    let (drain, draining) = watch::channel(false);
    let mut connections = JoinSet::new();
    let sweeper = tokio::spawn(sweep(Arc::downgrade(&shared)));
    let result = accept_until(&shared, &listener, &mut connections, &draining, shutdown).await;
    shared.store.close_all();
    let _ = drain.send(true);
    let drained =
        tokio::time::timeout(DRAIN_TIMEOUT, async { while connections.join_next().await.is_some() {} });
    if drained.await.is_err() {
        tracing::warn!("demo server: connections still open after the drain; cutting them");
    }
    connections.abort_all();
    sweeper.abort();
    result.map_err(io::Error::other)
}

async fn accept_until(
    shared: &Arc<Shared>,
    listener: &TcpListener,
    connections: &mut JoinSet<()>,
    draining: &watch::Receiver<bool>,
    shutdown: impl Future,
) -> Result<(), ServerError> {
    let limit = Arc::new(Semaphore::new(shared.options.max_connections.max(1)));
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            _ = &mut shutdown => return Ok(()),
            permit = Arc::clone(&limit).acquire_owned() => permit.map_err(|_| ServerError::LimitClosed)?,
        };
        let accepted = tokio::select! {
            _ = &mut shutdown => return Ok(()),
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, _)) => {
                // SSE responses go out in several small writes; without this, Nagle's
                // algorithm and the peer's delayed ACK stall each call by ~40 ms.
                let _ = stream.set_nodelay(true);
                shared.stats.connection_accepted();
                let task = connection(Arc::clone(shared), stream, draining.clone(), permit);
                connections.spawn(task);
            }
            Err(error) => {
                tracing::warn!(%error, "demo server: accept failed");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
            }
        }
        while connections.try_join_next().is_some() {}
    }
}

async fn connection(
    shared: Arc<Shared>,
    stream: TcpStream,
    mut draining: watch::Receiver<bool>,
    _permit: OwnedSemaphorePermit,
) {
    let service = service_fn(move |request| http::handle(Arc::clone(&shared), request));
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(HEADER_TIMEOUT);
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    tokio::select! {
        result = conn.as_mut() => log_end(result),
        _ = until_draining(&mut draining) => {
            conn.as_mut().graceful_shutdown();
            log_end(conn.await);
        }
    }
}

/// Completes when the drain starts (or the server is gone).
async fn until_draining(draining: &mut watch::Receiver<bool>) {
    // The borrow guard is dropped here so the connection future stays `Send`.
    let _ = draining.wait_for(|draining| *draining).await.map(|_| ());
}

fn log_end(result: Result<(), Box<dyn std::error::Error + Send + Sync>>) {
    // Clients dropping connections and `die` aborting streams are routine here.
    if let Err(error) = result {
        tracing::debug!(%error, "demo server: connection ended with an error");
    }
}

/// Holds the server weakly, so that an aborted server is freed (and its calls stopped) even
/// though this task is not.
async fn sweep(shared: Weak<Shared>) {
    let Some(period) = shared.upgrade().map(|s| s.options.session_idle_timeout / 4) else {
        return;
    };
    let mut ticks = tokio::time::interval(period.clamp(SWEEP_MIN, SWEEP_MAX));
    loop {
        ticks.tick().await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        shared.store.evict_idle(std::time::Instant::now());
    }
}
