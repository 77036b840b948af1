//! The embedded demo legacy server on its own, as a separate process, so that a soak can tell
//! the gateway's memory from its upstream's: start this, then the gateway with
//! `--upstream <the printed URL>` (or `MRTR_GATEWAY__UPSTREAM__URL` for `cargo bench --bench soak`).
//!
//! It uses the bounds the gateway gives its embedded demo with the default pool (512 sessions,
//! 560 connections), so the split run matches the one-process run. It serves until killed.
//!
//! It sits among the benches because only the soak uses it, and is left out of a plain
//! `cargo bench`. Run: `cargo bench --bench demo_upstream -- [PORT]` (default port 3901).

use mrtr_gateway::demo::{self, DemoOptions};
use tokio::net::TcpListener;

/// The port used when none is given.
const DEFAULT_PORT: u16 = 3901;

fn main() -> std::io::Result<()> {
    let port = std::env::args().nth(1).and_then(|p| p.parse().ok()).unwrap_or(DEFAULT_PORT);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(serve(port))
}

async fn serve(port: u16) -> std::io::Result<()> {
    let listener = TcpListener::bind(("127.0.0.1", port)).await?;
    println!("demo legacy server at http://{}{}", listener.local_addr()?, demo::MCP_PATH);
    let options = DemoOptions { max_sessions: 512, max_connections: 560, ..DemoOptions::default() };
    demo::serve(listener, options, std::future::pending::<()>()).await
}
