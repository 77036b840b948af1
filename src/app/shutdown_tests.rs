//! The order of a graceful shutdown, as an orchestrator sees it: `/readyz` fails first and keeps
//! answering (503) while in-flight calls drain, `/healthz` still answers, and the admin listener
//! closes only after the front has drained.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::json;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::Gateway;
use crate::config::Config;
use crate::healthcheck::{self, HealthError};

/// Bounds every wait of this test: a broken shutdown fails it instead of hanging it.
const BOUND: Duration = Duration::from_secs(90);
const POLL: Duration = Duration::from_millis(20);
const MAX_POLLS: usize = 2000;

async fn admin_status(addr: SocketAddr, path: &'static str) -> Result<u16, HealthError> {
    tokio::task::spawn_blocking(move || healthcheck::status(addr, path, Duration::from_secs(5)))
        .await
        .expect("probe thread")
}

/// Sends a `tools/call` of the demo's `hang` tool, which never answers, and returns the open
/// connection so the call stays in flight.
async fn hanging_call(gw: &Gateway) -> TcpStream {
    let body =
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "hang", "arguments": {},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}})
        .to_string();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: tools/call\r\nMcp-Name: hang\r\nContent-Length: {}\r\n\r\n",
        gw.front_addr,
        body.len()
    );
    let mut conn = TcpStream::connect(gw.front_addr).await.expect("connect to the front");
    conn.write_all(head.as_bytes()).await.expect("send head");
    conn.write_all(body.as_bytes()).await.expect("send body");
    conn
}

async fn eventually(what: &str, done: impl FnMut() -> bool) {
    crate::clock::eventually(what, POLL * MAX_POLLS as u32, done).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_fails_first_and_admin_outlives_the_drain() {
    let cfg = Config::from_toml(
        "[front]\nlisten = \"127.0.0.1:0\"\ndrain_secs = 60\n[admin]\nlisten = \"127.0.0.1:0\"\n",
    )
    .expect("config");
    let gw = Gateway::start(cfg).await.expect("start");
    let admin = gw.admin_addr.expect("admin listener");
    eventually("the upstream to answer initialize", || gw.ready.is_ready()).await;
    assert_eq!(admin_status(admin, "/readyz").await.expect("readyz"), 200);

    let in_flight = hanging_call(&gw).await;
    let stats = gw.demo.as_ref().expect("embedded demo").stats.clone();
    eventually("the hanging call to reach the upstream", || stats.tool_calls("hang") == 1).await;

    let shutdown = tokio::spawn(tokio::time::timeout(BOUND, gw.shutdown()));
    let mut saw_draining = false;
    for _ in 0..MAX_POLLS {
        match admin_status(admin, "/readyz").await {
            Ok(503) => {
                saw_draining = true;
                break;
            }
            Ok(200) => tokio::time::sleep(POLL).await,
            other => panic!("/readyz during the drain: {other:?} (the admin listener must outlive it)"),
        }
    }
    assert!(saw_draining, "/readyz never failed during the drain");
    assert_eq!(admin_status(admin, "/healthz").await.expect("healthz while draining"), 200);
    // The client goes away: the drain has nothing left to wait for.
    drop(in_flight);

    shutdown.await.expect("shutdown task").expect("shutdown within its bound");
    assert!(matches!(admin_status(admin, "/healthz").await, Err(HealthError::Connect { .. })));
}
