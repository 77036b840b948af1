//! The legacy upstream client: Streamable HTTP (2025-03-26 … 2025-11-25) sessions and their pool.
//!
//! A legacy MCP server wants a session (`initialize`, `Mcp-Session-Id`) and may send requests to
//! its client in the middle of a call, on the call's POST stream or on the standalone GET stream.
//! This module owns everything the gateway needs to be that client: the SSE parser ([`sse`]),
//! the HTTP exchanges ([`transport`]), one session with its call event streams ([`Session`],
//! [`Call`]), and the pool that leases a session to one call at a time ([`Pool`], [`Lease`]) so
//! that GET-stream requests can be attributed to the call that holds the session.
//!
//! It never forwards anything from the front client (headers, ids, tokens): it allocates its own
//! request ids and sends only the headers configured in [`UpstreamSettings`].

mod call;
mod dispatch;
mod error;
mod get_stream;
mod messages;
mod pool;
mod session;
mod settings;
pub mod sse;
pub mod tls;
mod transport;

#[cfg(test)]
mod tests;

pub use call::{Call, UpstreamEvent};
pub use error::UpstreamError;
pub use pool::{Lease, Pool, PoolKey, PoolStats};
pub use session::{InitializeResult, Session};
pub use settings::{UpstreamSettings, DEFAULT_PREFERRED_VERSION};
