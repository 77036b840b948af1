//! The legacy upstream client: sessions over Streamable HTTP (2025-03-26 … 2025-11-25), the
//! deprecated HTTP+SSE transport (2024-11-05) or a child process's stdio, and the pool that
//! leases them.
//!
//! A legacy MCP server wants a session (`initialize`) and may send requests to its client in
//! the middle of a call. Everything outside this module drives one seam, [`Session`], and never
//! learns the transport. Inside, the layout runs bottom-up with no import circle:
//! - [`event`]: what a server says during a call, and where a message came from;
//! - [`router`]: attribution of every message to its call (the lease rule), `ping`, and the
//!   answer to requests no call can take; [`state`]: what a session keeps on any transport;
//! - [`handshake`]: the `initialize` request and the checks on its answer; [`call`]: a call's
//!   event stream as its consumer sees it;
//! - [`http`], [`sse_legacy`] (the deprecated HTTP+SSE transport) and [`stdio`]: one
//!   implementation per transport; [`sse`]: the SSE parser;
//! - [`session`]: the seam; [`pool`]: sessions keyed by (principal, capabilities), leased to
//!   one call at a time so that unattributed server requests reach the call holding it;
//!   [`admission`]: calls queue for a session fairly and boundedly, so a burst of calls never
//!   becomes a burst of sessions or sockets (the HTTP connections are bounded too).
//!
//! It never forwards anything from the front client (headers, ids, tokens): it allocates its own
//! request ids and sends only what [`UpstreamSettings`] configures.

mod admission;
mod call;
mod error;
mod event;
mod handshake;
mod http;
mod pool;
mod router;
mod session;
mod settings;
pub mod sse;
mod sse_legacy;
mod state;
pub(crate) mod stdio;

#[cfg(test)]
mod tests;

pub use admission::PoolMetrics;
pub use call::Call;
pub use error::UpstreamError;
pub(crate) use event::EventTx;
pub use event::UpstreamEvent;
pub use handshake::InitializeResult;
pub use pool::{Lease, Lending, Pool, PoolKey, PoolStats};
pub(crate) use session::Connector;
pub use session::Session;
pub use settings::{StdioSettings, ToolsChanged, UpstreamSettings};
pub use sse_legacy::EndpointError;
pub use stdio::StderrTail;
