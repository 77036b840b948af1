//! Loopback tests of the upstream client against a scripted legacy server (`server`), one file
//! per area: session wire behaviour, call streams, the pool, and the bounds in front of it.

mod calls;
mod lend;
mod limit;
mod pool;
mod server;
mod session;
mod tls;

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use self::server::{Chunk, Reply, Script, TestServer};
use super::UpstreamSettings;

/// Settings with short, test-sized bounds.
fn settings(server: &TestServer) -> UpstreamSettings {
    let mut s = UpstreamSettings::new(server.url());
    s.client_name = "test-gateway".to_owned();
    s.connect_timeout = Duration::from_secs(2);
    s.request_timeout = Duration::from_secs(5);
    s.pool_acquire_timeout = Duration::from_millis(300);
    s
}

/// A stdio process started ahead of demand, running `program` with `args`: what the stdio
/// client's own tests (its supervisor, the warm pool) start too.
pub(super) fn spare_of(program: &str, args: &[&str]) -> super::session::Spare {
    let args = args.iter().map(|a| (*a).to_owned()).collect();
    let settings = Arc::new(UpstreamSettings::stdio(super::StdioSettings::new(program, args)));
    let gauge = prometheus::IntGauge::new("connections", "unused by stdio").unwrap();
    let connector = super::session::Connector::new(settings, gauge).unwrap();
    connector.prestart().expect("a stdio upstream has spares").unwrap()
}

fn caps() -> Value {
    json!({"roots": {}, "elicitation": {"form": {}}})
}

/// A one-shot slot for an SSE body the script hands out on the first matching request.
fn once(rx: mpsc::Receiver<Chunk>) -> Arc<Mutex<Option<mpsc::Receiver<Chunk>>>> {
    Arc::new(Mutex::new(Some(rx)))
}

fn take(slot: &Mutex<Option<mpsc::Receiver<Chunk>>>) -> Option<Reply> {
    slot.lock().take().map(Reply::Sse)
}

/// A JSON-RPC success response to `id`.
fn result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// True for the `initialize` of a new session.
fn inits(seen: &server::Seen) -> bool {
    seen.rpc_method() == Some("initialize")
}

/// True for the `DELETE` that ends a session.
fn deletes(seen: &server::Seen) -> bool {
    seen.method == http::Method::DELETE
}

/// A server whose every `tools/call` is answered 404 (the lifecycle by default).
async fn server() -> TestServer {
    TestServer::start(on_call(|_| Reply::Status(404))).await
}

/// A script that answers only `tools/call` (and the lifecycle by default).
fn on_call(reply: impl Fn(&server::Seen) -> Reply + Send + Sync + 'static) -> Script {
    Arc::new(move |seen| (seen.rpc_method() == Some("tools/call")).then(|| reply(seen)))
}
