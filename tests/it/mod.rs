//! One file per behaviour area of the gateway.

mod admin;
mod bounded;
mod capabilities;
mod catalog;
mod elicitation;
mod failures;
mod front;
mod inputs;
mod progress;
mod replicas;
mod state;

use serde_json::{json, Value};

/// The capabilities of a client that can answer a form elicitation and nothing else.
pub(crate) fn form_only() -> Value {
    json!({"elicitation": {}})
}

/// The capabilities of a client that can answer everything the demo asks.
pub(crate) fn everything() -> Value {
    json!({"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}})
}
