//! Loopback tests that drive the demo server with plain hyper requests, as the gateway will.

mod calls;
mod client;
mod inputs;
mod sessions;
