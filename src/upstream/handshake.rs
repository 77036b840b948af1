//! The transport-neutral half of the legacy `initialize` handshake: the request the gateway
//! sends, and the checks on the server's answer ([`InitializeResult`]). How the messages travel
//! (a POST, a line on stdin) is each transport's business.
//!
//! A session declares, at `initialize`, the capabilities its caller computed (legacy servers
//! decide which tools exist from them) and accepts any of `LEGACY_VERSIONS` in return.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::{UpstreamError, UpstreamSettings};
use crate::protocol::jsonrpc::{request_bytes, Outcome};
use crate::protocol::{methods, RequestId, LEGACY_VERSIONS};

/// The id of `initialize`; calls count up from 1.
pub(crate) const INITIALIZE_ID: i64 = 0;

/// What the legacy server answered to `initialize` (the source of `server/discover`).
#[derive(Debug)]
pub struct InitializeResult {
    /// The negotiated revision, one of `LEGACY_VERSIONS`.
    pub protocol_version: String,
    /// The server's capabilities, as sent.
    pub capabilities: Value,
    /// `serverInfo`, as sent (`Null` if absent).
    pub server_info: Value,
    pub instructions: Option<String>,
    /// The whole result object, verbatim.
    pub raw: Box<RawValue>,
}

// === impl InitializeResult ===

impl InitializeResult {
    pub(crate) fn parse(raw: Box<RawValue>) -> Result<Self, UpstreamError> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Wire {
            protocol_version: String,
            #[serde(default)]
            capabilities: Value,
            #[serde(default)]
            server_info: Value,
            instructions: Option<String>,
        }
        let wire: Wire = serde_json::from_str(raw.get())
            .map_err(|e| UpstreamError::Initialize(format!("malformed result: {e}")))?;
        if !LEGACY_VERSIONS.contains(&wire.protocol_version.as_str()) {
            return Err(UpstreamError::Initialize(format!(
                "server chose protocol version {:?}; supported: {}",
                wire.protocol_version,
                LEGACY_VERSIONS.join(", ")
            )));
        }
        Ok(Self {
            protocol_version: wire.protocol_version,
            capabilities: wire.capabilities,
            server_info: wire.server_info,
            instructions: wire.instructions,
            raw,
        })
    }
}

/// The `initialize` request, framed as one JSON-RPC message.
pub(crate) fn request(settings: &UpstreamSettings, capabilities: &Value) -> Vec<u8> {
    let params = json!({
        "protocolVersion": settings.preferred_version.as_str(),
        "capabilities": capabilities,
        "clientInfo": { "name": settings.client_name, "version": settings.client_version },
    });
    request_bytes(&RequestId::Number(INITIALIZE_ID), methods::INITIALIZE, Some(&params))
}

/// The raw result of the server's answer to `initialize`, or why it refused.
pub(crate) fn result_of(outcome: Outcome) -> Result<Box<RawValue>, UpstreamError> {
    match outcome {
        Outcome::Result(raw) => Ok(raw),
        Outcome::Error(e) => {
            Err(UpstreamError::Initialize(format!("server refused ({}): {}", e.code, e.message)))
        }
    }
}
