//! Shared MCP vocabulary: JSON-RPC envelopes, method names, `_meta` keys and protocol versions.
//!
//! Both sides of the gateway (the 2026-07-28 front and the legacy upstream) speak JSON-RPC 2.0;
//! this module owns the words they share so that no string literal for a method or a `_meta` key
//! is spelled twice. It performs no I/O.

pub mod jsonrpc;
pub mod log_level;
pub mod methods;
pub mod params;
pub mod quote;
pub mod version;

pub use jsonrpc::{Envelope, EnvelopeError, RequestId};
pub use version::LegacyVersion;

/// The protocol revision the front speaks.
pub const MODERN_VERSION: &str = "2026-07-28";

/// Versions the front accepts in `MCP-Protocol-Version` and `_meta`.
pub const FRONT_SUPPORTED_VERSIONS: &[&str] = &[MODERN_VERSION];

/// Legacy revisions the upstream client can negotiate, newest first: the spellings of
/// [`LegacyVersion::ALL`].
pub const LEGACY_VERSIONS: &[&str] = &{
    let mut out = [""; LegacyVersion::ALL.len()];
    let mut i = 0;
    while i < out.len() {
        out[i] = LegacyVersion::ALL[i].as_str();
        i += 1;
    }
    out
};

/// `_meta` keys of the 2026-07-28 per-request envelope.
pub mod meta {
    /// Required: the protocol version of this request.
    pub const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
    /// Required: the capabilities the client declares for this request.
    pub const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
    /// Optional: self-reported client identity.
    pub const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
    /// Optional (deprecated): log level for `notifications/message` on this request.
    pub const LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
    /// Result `_meta`: self-reported server identity.
    pub const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
    /// Progress token of a request.
    pub const PROGRESS_TOKEN: &str = "progressToken";
    /// Opt-in hint a legacy server may put in a pushed request's `params._meta` to name the
    /// `inputRequests` key the gateway uses for it (our own prefix; not part of MCP).
    pub const INPUT_KEY_HINT: &str = "dev.mrtr-gateway/inputKey";
    /// Notification and result `_meta` on a `subscriptions/listen` stream: the listen
    /// request's JSON-RPC id.
    pub const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
}

/// 2026-07-28 HTTP header names (compared case-insensitively by `http`). Typed names, not
/// strings: a lookup or insert by a `&str` parses and hashes the name on every request.
pub mod headers {
    use http::HeaderName;

    pub const PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
    pub const METHOD: HeaderName = HeaderName::from_static("mcp-method");
    pub const NAME: HeaderName = HeaderName::from_static("mcp-name");
    pub const PARAM_PREFIX: &str = "mcp-param-";
    pub const SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
    pub const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");
}

/// JSON-RPC and MCP error codes used by the gateway.
pub mod codes {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL_ERROR: i64 = -32603;
    pub const HEADER_MISMATCH: i64 = -32020;
    pub const MISSING_CLIENT_CAPABILITY: i64 = -32021;
    pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
    /// Legacy "resource not found"; 2026-07-28 uses -32602 instead.
    pub const LEGACY_RESOURCE_NOT_FOUND: i64 = -32002;
    /// Legacy (2025-11-25) URL elicitation required.
    pub const LEGACY_URL_ELICITATION_REQUIRED: i64 = -32042;
}
