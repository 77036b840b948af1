//! The link between replicas, both halves in one place: the forwarder that sends a retry to the
//! replica holding its parked call (`forward.rs`, the bridge's [`crate::bridge::OwnerLink`]),
//! the internal listener that serves such retries (`listen.rs`), and the wire format they share
//! (`wire.rs`); and the same for task requests sent to the replica that owns the task
//! (`tasks.rs`, the task bridge's [`crate::tasks::TaskLink`]). Built on the bridge and the task
//! bridge: the listener runs a forwarded retry with the bridge's `run_forwarded` and a task
//! request with `Tasks::serve_forwarded`, never with the front, and both reach owners only
//! through the traits they define, so neither half imports the layer above it.

pub mod forward;
pub mod listen;
pub mod tasks;
pub mod wire;

pub use forward::{ForwardError, Forwarder};
pub use listen::Cluster;
