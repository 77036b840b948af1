//! The upstream bounds: however many calls arrive, the gateway opens no more upstream
//! connections than `upstream.max_connections` and reuses them; calls past the sessions and
//! the queue get a fast 503 overload error; once the load is gone, calls succeed again.
//!
//! A counting TCP relay stands between the gateway and the demo server, so the connections
//! are counted where the upstream accepts them.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use futures_util::future::join_all;
use http::StatusCode;
use mrtr_gateway::demo::{self, DemoOptions};
use serde_json::json;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::common::{Client, Reply, Setup, TestResult};

const SESSIONS: usize = 2;
const CONNECTIONS: usize = 2 * SESSIONS + 2;
const QUEUED: usize = 4;
const BURST: usize = 20;

/// Accepted and open connections, as the upstream sees them.
#[derive(Default)]
struct Counts {
    accepted: AtomicUsize,
    open: AtomicUsize,
    peak: AtomicUsize,
}

/// A loopback relay to `upstream` that counts its connections; stops when dropped.
struct Relay {
    addr: SocketAddr,
    counts: Arc<Counts>,
    task: JoinHandle<()>,
}

impl Relay {
    async fn start(upstream: SocketAddr) -> TestResult<Self> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let counts = Arc::new(Counts::default());
        let task = tokio::spawn(accept(listener, upstream, counts.clone()));
        Ok(Self { addr, counts, task })
    }

    fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn accept(listener: TcpListener, upstream: SocketAddr, counts: Arc<Counts>) {
    while let Ok((inbound, _)) = listener.accept().await {
        counts.accepted.fetch_add(1, Ordering::SeqCst);
        let open = counts.open.fetch_add(1, Ordering::SeqCst) + 1;
        counts.peak.fetch_max(open, Ordering::SeqCst);
        tokio::spawn(relay(inbound, upstream, counts.clone()));
    }
}

async fn relay(mut inbound: TcpStream, upstream: SocketAddr, counts: Arc<Counts>) {
    if let Ok(mut outbound) = TcpStream::connect(upstream).await {
        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
    }
    counts.open.fetch_sub(1, Ordering::SeqCst);
}

/// A call that holds its session for about a second.
async fn slow_call(client: &Client) -> TestResult<Reply> {
    client.call_tool("count_down", json!({"steps": 2, "delay_ms": 500})).send().await
}

#[tokio::test]
async fn upstream_connections_and_queue_are_bounded() -> TestResult {
    let demo = demo::spawn_loopback(DemoOptions::default())?;
    let relay = Relay::start(demo.addr).await?;
    let setup = Setup::new()
        .set("upstream", &format!("pool_max_sessions = {SESSIONS}"))
        .set("upstream", &format!("max_connections = {CONNECTIONS}"))
        .set("upstream", &format!("pool_max_queued = {QUEUED}"))
        // Only pooled sessions here: no connection is set aside for listen sessions.
        .set("subscriptions", "enabled = false");
    let (gateway, client) = setup.attach_url(&relay.url()).await?;

    let replies = join_all((0..BURST).map(|_| slow_call(&client))).await;
    let (mut done, mut refused) = (0, 0);
    for reply in replies {
        let reply = reply?;
        if reply.status == StatusCode::SERVICE_UNAVAILABLE {
            let message = reply.expect_error(StatusCode::SERVICE_UNAVAILABLE, -32603)?;
            assert!(message.contains("overloaded"), "{message}");
            refused += 1;
        } else {
            assert_eq!(reply.text()?, "Done after 2 steps");
            done += 1;
        }
    }
    assert!(done >= SESSIONS + QUEUED, "the sessions and the queue were served: {done}");
    assert!(refused >= 1, "calls past the queue were refused");
    let rejections = metric(&gateway, "mrtr_gateway_upstream_rejections_total{reason=\"queue_full\"}");
    assert_eq!(rejections, refused as f64);

    let after = client.call_tool("echo", json!({"message": "calm again"})).send().await?;
    assert_eq!(after.text()?, "Echo: calm again");
    let peak = relay.counts.peak.load(Ordering::SeqCst);
    let accepted = relay.counts.accepted.load(Ordering::SeqCst);
    assert!(peak <= CONNECTIONS, "{peak} connections open at once, bound {CONNECTIONS}");
    assert!(accepted <= CONNECTIONS, "{accepted} connections opened: they were not reused");
    crate::common::bounded("the gateway to drain", gateway.shutdown()).await?;
    Ok(())
}

fn metric(gateway: &mrtr_gateway::app::Gateway, series: &str) -> f64 {
    crate::common::harness::metric(gateway, series)
}
