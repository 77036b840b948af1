//! The link between replicas, both halves in one place: the forwarder that sends a retry to the
//! replica holding its parked call (`forward.rs`, the bridge's [`crate::bridge::OwnerLink`]),
//! the internal listener that serves such retries (`listen.rs`), and the wire format they share
//! (`wire.rs`). Built on the bridge: the listener runs a forwarded retry with the bridge's
//! `run_forwarded`, never with the front, and the bridge reaches owners only through the trait
//! it defines, so neither half imports the layer above it.

pub mod forward;
pub mod listen;
pub mod wire;

pub use forward::{ForwardError, Forwarder};
pub use listen::Cluster;
