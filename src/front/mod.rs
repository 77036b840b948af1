//! The 2026-07-28 Streamable HTTP surface: the tower stack it is served as (limits, request
//! ids, tracing), HTTP checks, request validation, dispatch to `server/discover`, the relayed
//! list methods, the MRTR bridge and `subscriptions/listen`, and response framing.

mod discover;
pub mod guard;
mod listen;
mod outcome;
mod relay;
mod respond;
mod service;
mod stack;
mod stream;
mod tasks;
pub mod tool_headers;
pub mod validate;

pub use outcome::OutcomeLabel;
pub use service::FrontState;
pub use stack::{layered, stack, Limits as StackLimits};
