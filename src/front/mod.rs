//! The 2026-07-28 Streamable HTTP surface: HTTP checks, request validation, dispatch to
//! `server/discover`, the relayed list methods and the MRTR bridge, and response framing.

pub mod body;
pub mod guard;
pub mod validate;
