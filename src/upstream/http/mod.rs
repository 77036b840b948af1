//! The Streamable HTTP transport (2025-03-26 … 2025-11-25): the HTTP exchanges
//! ([`transport`]), the reader of JSON or SSE response bodies ([`messages`]), one session and
//! its calls ([`session`], [`exchange`]), the standalone GET stream ([`get_stream`]), what all
//! three share ([`inner`]), the opening of a legacy session ([`open`]), below them so that none
//! imports another in a circle, the bound on the TCP connections under them all ([`limit`]), the
//! client that drives a plain upstream's connections in the requests' own tasks ([`driven`]),
//! and the lower bound on the requests in flight over them ([`slots`]).
//!
//! Everything HTTP-specific stays in here; the rest of the upstream client drives an
//! [`HttpSession`] through the transport-neutral [`Session`](super::Session).

mod drain;
mod driven;
mod exchange;
mod get_stream;
mod inner;

mod messages;
mod open;
mod session;
mod slots;
mod transport;

#[cfg(test)]
pub(crate) use drain::CancelDrain;
pub(crate) use session::HttpSession;
pub(crate) use slots::SlotBody;
#[cfg(test)]
pub(crate) use transport::SessionHeaders;
pub(crate) use transport::Transport;
