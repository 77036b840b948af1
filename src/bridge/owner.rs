//! The bridge's side of reaching the replica that parked a call: what it asks of the link to
//! the owner, and what the answer can be. The link itself (HTTP to the owner's internal
//! listener, signed with the replica MAC) is the cluster's, one layer up; the bridge sees only
//! this trait, so it never imports the listener or the wire it shares with it.

use std::future::Future;
use std::pin::Pin;

use super::{MrtrRequest, Notes, Reply};
use crate::error::FrontError;

/// What forwarding a retry came to.
pub enum Forwarded {
    /// The owner served it: relay this.
    Served(Result<Reply, FrontError>),
    /// The owner no longer holds the call.
    NotHeld,
    /// The owner did not answer; the retry is replayed here. The error is for the log line.
    Failed(Box<dyn std::error::Error + Send + Sync>),
}

/// A future of one forwarded retry.
pub type Forwarding<'a> = Pin<Box<dyn Future<Output = Forwarded> + Send + 'a>>;

/// Reaches the owners of parked calls (`[cluster]` configured).
pub trait OwnerLink: Send + Sync {
    /// Forwards `req`, whose state is `state`, to the replica advertised as `owner`; the
    /// notifications the owner relays go to `notes`.
    fn forward<'a>(
        &'a self,
        owner: &'a str,
        req: &'a MrtrRequest,
        state: &'a str,
        notes: Option<&'a Notes>,
    ) -> Forwarding<'a>;
}
