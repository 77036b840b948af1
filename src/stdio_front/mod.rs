//! The 2026-07-28 stdio front: the gateway as a server a client launches, speaking
//! newline-delimited JSON-RPC on its own stdin and stdout (transports/stdio), in front of the
//! same legacy upstream the HTTP front serves.
//!
//! # Why it drives the HTTP front's service
//! Each line becomes a synthesised `POST` to the configured path, carrying the headers the
//! HTTP front requires (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`, derived from the
//! body so they always match it, and `Accept: application/json, text/event-stream`), and is
//! handed to the very tower stack [`crate::front::stack`] assembles. So the MRTR rounds, the
//! sealed `requestState`, the capability checks, the `_meta` validation, the limits and the
//! metrics are those of the HTTP front, not a second copy that could drift from them; this
//! module only frames lines and maps the transport's rules:
//! - a response becomes one line; an SSE response (progress notifications, then the result)
//!   becomes one line per event, in order;
//! - requests run concurrently, so responses may come out of order;
//! - `notifications/cancelled` aborts the task of the request with that id: its future is
//!   dropped, which drops the response stream, which cancels the upstream call (as closing an
//!   SSE stream does over HTTP), and nothing more is written for it;
//! - the front never writes requests (MRTR questions are `input_required` results), and logs go
//!   to stderr, so stdout carries JSON-RPC messages only;
//! - `subscriptions/listen` is the HTTP front's listen stream as lines: the acknowledgement,
//!   then each notification as it comes; the client's `notifications/cancelled` ends it. When
//!   its upstream session is lost it ends with `notifications/cancelled` naming it (see
//!   [`reply`]), and at the end of input with the graceful result;
//! - end of stdin stops reading; listen streams end gracefully, in-flight requests finish
//!   within `front.drain`, then the process ends.
//!
//! The one check made here rather than in the front: an MRTR method whose `name`/`uri` is not a
//! string gets the front's own `-32602`, since over stdio there is no `Mcp-Name` header whose
//! absence the front would otherwise report as a header mismatch.

mod inflight;
mod output;
mod reply;
mod serve;
mod synth;

pub use serve::{serve, serve_then_stop, StdioOptions};

/// Why the stdio front stopped other than by the end of its input.
#[derive(Debug, thiserror::Error)]
pub enum StdioFrontError {
    #[error("reading stdin: {0}")]
    Read(std::io::Error),
    #[error("writing stdout: {0}")]
    Write(std::io::Error),
}
