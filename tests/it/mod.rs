//! One file per behaviour area of the gateway.

mod admin;
mod boundary;
mod bounded;
mod capabilities;
mod catalog;
mod chatty_upstream;
mod check;
mod ci_guards;
mod client_faults;
mod deadlines;
mod doc_links;
mod documented_auth;
mod documented_front;
mod documented_limits;
mod documented_ops;
mod elicitation;
mod failures;
mod faults;
mod filtering;
mod front;
mod https;
mod inputs;
mod jwks;
mod key_rotation;
mod layering;
mod legacy_clients;
mod legacy_credentials;
mod legacy_records;
mod legacy_rules;
mod legacy_seam;
mod limits;
mod listen_endings;
mod listen_sessions;
mod logs;
mod newcomer;
mod otel;
mod outbound;
mod param_headers;
mod park;
mod park_replicas;
mod progress;
mod references;
mod reflection;
mod replicas;
mod restart;
mod schema;
mod sensitive_forms;
mod shares;
mod single_use;
mod sse_legacy;
mod state;
mod stdio;
mod stdio_front;
mod stdio_pool;
mod subscriptions;
mod tasks;
mod tasks_inside;
mod tasks_legacy_clients;
mod tasks_long;
mod tasks_replicas;
mod tasks_report;
mod tasks_rounds;
mod tasks_screen;
mod tool_report;
mod url_elicitation;

use serde_json::{json, Value};

/// The capabilities of a client that can answer a form elicitation and nothing else.
pub(crate) fn form_only() -> Value {
    json!({"elicitation": {}})
}

/// The capabilities of a client that can answer everything the demo asks.
pub(crate) fn everything() -> Value {
    json!({"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}})
}
