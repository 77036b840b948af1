//! The `initialize` handshake: version negotiation, capabilities, and the birth of a session.
//!
//! The answer is plain JSON carrying a fresh random `Mcp-Session-Id`. The client's declared
//! capabilities are kept with the session because they decide which tools it is offered.

use std::sync::Arc;

use http::header::HeaderValue;
use http::{Response, StatusCode};
use rand::Rng;
use serde_json::{json, Value};

use super::http::{json_response, DemoBody};
use super::session::{ClientCaps, Session, SessionLimits};
use super::stats::SessionEnd;
use super::Shared;
use crate::protocol::jsonrpc::{result_bytes, Request};
use crate::protocol::{headers, LEGACY_VERSIONS};

/// The version offered when the client asks for one the server does not speak.
const LATEST: &str = "2025-11-25";

const INSTRUCTIONS: &str = "Demo legacy MCP server. `echo` needs nothing; `greet`, \
`confirm_twice`, `flaky_question` and `place_order` (which places an order first) ask through elicitation, `summarize` through sampling, \
`list_roots` through roots/list on the GET stream, `ask_three` through all three at once, \
`url_login` through a URL-mode elicitation. `count_down` reports progress, `hang` never answers \
and `die` drops its stream. `bump_counter` changes the subscribable resource demo://counter.";

/// Errors of the handshake.
#[derive(Debug, thiserror::Error)]
pub(crate) enum InitializeError {
    #[error("the result could not be serialised: {0}")]
    Serialise(#[from] serde_json::Error),
    #[error("a fresh session id collided with a live one")]
    Collision,
}

/// Answers `initialize`, creating the session.
pub(crate) fn answer(shared: &Shared, request: &Request) -> Result<Response<DemoBody>, InitializeError> {
    let params = request.params.as_ref();
    let requested = params.and_then(|p| p.get("protocolVersion")).and_then(Value::as_str);
    let version = negotiate(requested);
    let caps = ClientCaps::from_initialize(params.and_then(|p| p.get("capabilities")));
    let limits = SessionLimits {
        max_outstanding: shared.options.max_outstanding_requests,
        max_calls: shared.options.max_calls_per_session,
    };
    let id = format!("{:032x}", rand::thread_rng().gen::<u128>());
    let raw = serde_json::value::to_raw_value(&result(version, shared.options.resource_subscriptions))?;
    let header = HeaderValue::from_str(&id).map_err(|_| InitializeError::Collision)?;
    let session = Arc::new(Session::new(id, version, caps, limits));
    shared.resources.register(&session);
    // Counted before it is visible, so that a concurrent eviction never counts it down first.
    shared.stats.record_initialize();
    if shared.store.insert(session).is_err() {
        shared.stats.record_session_end(SessionEnd::Shutdown);
        return Err(InitializeError::Collision);
    }
    let mut response = json_response(StatusCode::OK, result_bytes(&request.id, &raw));
    response.headers_mut().insert(headers::SESSION_ID, header);
    Ok(response)
}

/// Echoes a supported requested version, else offers the latest.
fn negotiate(requested: Option<&str>) -> &'static str {
    LEGACY_VERSIONS.iter().copied().find(|version| Some(*version) == requested).unwrap_or(LATEST)
}

fn result(version: &str, subscribe: bool) -> Value {
    json!({
        "protocolVersion": version,
        "capabilities": {
            "tools": {"listChanged": false},
            "prompts": {"listChanged": false},
            "resources": {"subscribe": subscribe, "listChanged": true},
            "completions": {},
            "logging": {},
        },
        "serverInfo": {"name": "mrtr-demo-legacy", "version": env!("CARGO_PKG_VERSION")},
        "instructions": INSTRUCTIONS,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn supported_versions_are_echoed_and_others_get_the_latest() {
        for version in LEGACY_VERSIONS {
            assert_eq!(negotiate(Some(version)), *version);
        }
        assert_eq!(negotiate(Some("2026-07-28")), LATEST);
        assert_eq!(negotiate(Some("2024-10-07")), LATEST);
        assert_eq!(negotiate(None), LATEST);
    }
}
