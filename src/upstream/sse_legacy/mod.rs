//! The deprecated HTTP+SSE transport (protocol 2024-11-05): a GET event stream that first
//! announces a message endpoint, and a POST to that endpoint for every client message.
//!
//! Some servers still speak only this. It rides the Streamable HTTP transport's client (the same
//! bounded connections) and the shared SSE parser; what differs is that every server message
//! comes on the one stream, so attribution is the lease's, as for stdio. Pieces, bottom-up:
//! [`endpoint`] resolves the announced endpoint and keeps it on the stream's origin;
//! [`events`] reads the stream as whole events; [`link`] is what a session's parts share;
//! [`pump`] routes the stream and fails the calls when it ends; [`session`] is what the seam
//! drives.

mod endpoint;
mod events;
mod link;
mod pump;
mod session;

pub use endpoint::EndpointError;
pub(crate) use session::SseSession;
