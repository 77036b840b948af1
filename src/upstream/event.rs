//! The vocabulary every upstream transport shares: what a legacy server says during a call
//! ([`UpstreamEvent`]), the queue a call's events travel on ([`EventTx`]), and where a message
//! came from ([`Origin`]).
//!
//! It sits at the bottom of the module: the router, the calls and every transport use it, and
//! it uses none of them, so the folder has no import circle.

use serde_json::Value;
use tokio::sync::mpsc;

use super::UpstreamError;
use crate::protocol::jsonrpc::Outcome;
use crate::protocol::RequestId;

/// Something the legacy server said during a call.
#[derive(Debug)]
pub enum UpstreamEvent {
    /// A server request to answer with [`Session::respond`](super::Session::respond).
    Request { id: RequestId, method: String, params: Option<Value> },
    /// A notification (progress, log message, list change, …).
    Notification { method: String, params: Option<Value> },
    /// The call's response; no event follows it.
    Response(Outcome),
}

/// The queue of one call's events; an `Err` is the call's terminal failure.
pub(crate) type EventTx = mpsc::Sender<Result<UpstreamEvent, UpstreamError>>;

/// The stream a message arrived on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// The POST (or its resumption) of the call with this upstream id: its messages belong to
    /// that call.
    Post(i64),
    /// A stream that ties nothing to a call: the standalone GET stream of an HTTP session, or
    /// a child process's stdout. Its server requests go to the call that holds the lease.
    Unattributed,
}
