//! The bounds in front of the upstream: the connector never holds more connections than
//! `max_connections` and reuses them, and callers waiting for a session are served in arrival
//! order, behind a bounded queue.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Response, Uri};
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use prometheus::IntGauge;
use tokio::net::TcpListener;

use super::server::{Reply, TestServer};
use super::{caps, on_call, settings};
use crate::upstream::http::{SessionHeaders, Transport};
use crate::upstream::{Pool, UpstreamError, UpstreamSettings};

/// Accepted and open connections of [`slow_server`].
#[derive(Default)]
struct Counts {
    accepted: AtomicUsize,
    open: AtomicUsize,
    peak: AtomicUsize,
}

/// An HTTP server that answers every request with `{}` after 20 ms, counting its connections.
async fn slow_server() -> (SocketAddr, Arc<Counts>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let counts = Arc::new(Counts::default());
    let c = counts.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            c.accepted.fetch_add(1, Ordering::SeqCst);
            let open = c.open.fetch_add(1, Ordering::SeqCst) + 1;
            c.peak.fetch_max(open, Ordering::SeqCst);
            let c = c.clone();
            tokio::spawn(async move {
                let service = service_fn(|_req| async {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    let resp = Response::builder().header("content-type", "application/json");
                    Ok::<_, Infallible>(resp.body(Full::new(Bytes::from_static(b"{}"))).unwrap())
                });
                let conn = hyper::server::conn::http1::Builder::new();
                let _ = conn.serve_connection(TokioIo::new(stream), service).await;
                c.open.fetch_sub(1, Ordering::SeqCst);
            });
        }
    });
    (addr, counts)
}

#[tokio::test]
async fn many_requests_share_a_bounded_set_of_connections() {
    let (addr, counts) = slow_server().await;
    let mut s = UpstreamSettings::new(format!("http://{addr}/mcp").parse::<Uri>().unwrap());
    s.max_connections = 3;
    s.max_connecting = 1;
    let gauge = IntGauge::new("open", "open").unwrap();
    let transport = Transport::new(Arc::new(s), gauge.clone()).unwrap();
    let headers = SessionHeaders::default();
    // Each response is dropped as it arrives, as every caller does once it has read it: a
    // response held holds its request slot (and its connection).
    let sends = (0..40).map(|_| async { transport.post(&headers, b"{}".to_vec()).await.map(|r| r.status()) });
    for status in futures_util::future::join_all(sends).await {
        assert!(status.unwrap().is_success());
    }
    assert!(counts.peak.load(Ordering::SeqCst) <= 3, "peak {:?}", counts.peak);
    assert!(counts.accepted.load(Ordering::SeqCst) <= 3, "accepted {:?}", counts.accepted);
    assert!(transport.connections() <= 3 && gauge.get() <= 3);
}

#[tokio::test]
async fn waiters_are_served_in_arrival_order() {
    let server = TestServer::start(on_call(|_| Reply::Status(404))).await;
    let mut s = settings(&server);
    s.pool_max_sessions = 1;
    s.pool_acquire_timeout = Duration::from_secs(5);
    let pool = Pool::new(s).unwrap();
    let held = pool.lease((Arc::from("a"), 0), &caps()).await.unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    for n in 0..4 {
        let (waiter, tx) = (pool.clone(), tx.clone());
        tokio::spawn(async move {
            let lease = waiter.lease((Arc::from("a"), 0), &caps()).await.unwrap();
            tx.send(n).unwrap();
            drop(lease);
        });
        // Each waiter is queued before the next one arrives.
        while pool.queued() <= n {
            tokio::task::yield_now().await;
        }
    }
    drop(held);
    let mut order = Vec::new();
    for _ in 0..4 {
        order.push(rx.recv().await.unwrap());
    }
    assert_eq!(order, [0, 1, 2, 3]);
}

#[tokio::test]
async fn a_full_queue_refuses_at_once() {
    let server = TestServer::start(on_call(|_| Reply::Status(404))).await;
    let mut s = settings(&server);
    s.pool_max_sessions = 1;
    s.pool_max_queued = 1;
    s.pool_acquire_timeout = Duration::from_secs(5);
    let pool = Pool::new(s).unwrap();
    let held = pool.lease((Arc::from("a"), 0), &caps()).await.unwrap();
    let waiter = {
        let pool = pool.clone();
        tokio::spawn(async move { pool.lease((Arc::from("a"), 0), &caps()).await.map(drop) })
    };
    while pool.queued() < 1 {
        tokio::task::yield_now().await;
    }
    let started = std::time::Instant::now();
    let err = pool.lease((Arc::from("b"), 0), &caps()).await.unwrap_err();
    assert!(matches!(err, UpstreamError::QueueFull { limit: 1 }), "{err}");
    assert!(err.is_overload() && !err.poisons_session());
    assert!(started.elapsed() < Duration::from_secs(1), "refused without waiting");
    drop(held);
    waiter.await.unwrap().unwrap();
    assert_eq!(pool.queued(), 0);
}
