//! The configuration as a user writes it: serde structs mirroring the TOML file, every field
//! documented, unknown fields refused. Nothing here is validated; see [`super::Config`]. The
//! defaults the docs name are in [`crate::defaults`].

use std::collections::BTreeMap;

use serde::Deserialize;

use super::secret::Secret;

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawConfig {
    pub front: RawFront,
    pub admin: RawAdmin,
    pub upstream: RawUpstream,
    pub mrtr: RawMrtr,
    pub state: RawState,
    pub auth: RawAuth,
    pub log: RawLog,
    pub legacy: RawLegacy,
    pub limits: RawLimits,
    pub subscriptions: RawSubscriptions,
    pub tasks: RawTasks,
    pub cluster: RawCluster,
    pub tracing: RawTracing,
    pub elicitation: RawElicitation,
}

/// `[elicitation]`: what the gateway does with the questions legacy servers ask.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawElicitation {
    /// A question that asks for a secret (a password, token, API key, card number, CVV, SSN or
    /// IBAN in a form, or a URL that is not https): `warn` (default) relays it with a log line,
    /// a count and a mark in the migration report; `refuse` declines it upstream on the user's
    /// behalf and tells the client why. `javascript:`, `vbscript:` and `data:` URLs are refused
    /// either way.
    pub sensitive: Option<String>,
}

/// `[front]`: the 2026-07-28 listener.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawFront {
    /// Address of the MCP listener. Default `127.0.0.1:8080`.
    pub listen: Option<String>,
    /// Path of the MCP endpoint. Default `/mcp`.
    pub path: Option<String>,
    /// Largest accepted request body in bytes. Default 4 MiB.
    pub max_body_bytes: Option<usize>,
    /// Largest number of open client connections. Default 4096.
    pub max_connections: Option<usize>,
    /// Largest number of requests processed at once; beyond it requests are shed with 503.
    pub max_in_flight: Option<usize>,
    /// `Origin` values allowed in addition to loopback origins. `["*"]` allows any.
    pub allowed_origins: Option<Vec<String>>,
    /// Seconds to finish in-flight requests after SIGTERM/SIGINT. Default 30.
    pub drain_secs: Option<u64>,
    /// Longest a client may take to send its request head, and again its body, in ms. Default 10000.
    pub read_timeout_ms: Option<u64>,
    /// Longest a new connection may take to finish its TLS handshake and show its protocol (its
    /// first HTTP/1 bytes, or the HTTP/2 preface and SETTINGS), in ms; then it is closed. Also
    /// on the internal and admin listeners. Default 10000.
    pub handshake_timeout_ms: Option<u64>,
    /// Longest a connection may stay open with no request in flight, in ms; then it is closed.
    /// Also on the internal and admin listeners. Default 60000.
    pub idle_timeout_ms: Option<u64>,
    /// `ttlMs` hint on discover and list results. Default 0.
    pub cache_ttl_ms: Option<u64>,
    /// `cacheScope` hint: `private` (default) or `public`.
    pub cache_scope: Option<String>,
    /// PEM certificate chain: serve TLS when set (with `tls_key_file`).
    pub tls_cert_file: Option<String>,
    /// PEM private key for `tls_cert_file`.
    pub tls_key_file: Option<String>,
}

/// `[admin]`: metrics and health.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawAdmin {
    /// Address of the admin listener (`/metrics`, `/healthz`, `/readyz`). Default `127.0.0.1:9090`.
    pub listen: Option<String>,
    /// Set to false to run without an admin listener.
    pub enabled: Option<bool>,
}

/// `[upstream]`: the legacy server.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawUpstream {
    /// Streamable HTTP endpoint of the legacy server. Absent: start the embedded demo server.
    pub url: Option<String>,
    /// Event stream of a legacy server on the deprecated HTTP+SSE transport (2024-11-05), e.g.
    /// `http://127.0.0.1:3001/sse`, instead of `url`.
    pub sse_url: Option<String>,
    /// Protocol version proposed in `initialize`. Default `2025-11-25`.
    pub protocol_version: Option<String>,
    /// Extra headers on every upstream request (e.g. an API key). Values are secrets, given
    /// inline or as `{ file = "…" }` (e.g. a mounted Kubernetes Secret).
    pub headers: Option<BTreeMap<String, RawSecretValue>>,
    /// A static bearer token for the upstream: sent as `Authorization: Bearer <token>`. A secret.
    pub bearer_token: Option<Secret>,
    /// A file holding `bearer_token` (read once at start; trailing whitespace trimmed).
    pub bearer_token_file: Option<String>,
    /// Connect timeout in milliseconds. Default 5000.
    pub connect_timeout_ms: Option<u64>,
    /// Longest one upstream request may take (a call's whole life included), in ms. Default 120000.
    pub request_timeout_ms: Option<u64>,
    /// Largest number of pooled upstream sessions. Default 128.
    pub pool_max_sessions: Option<usize>,
    /// Seconds an idle pooled session is kept. Default 300.
    pub pool_idle_secs: Option<u64>,
    /// Most calls waiting for a session when all are leased; past it calls get 503. Default 1024.
    pub pool_max_queued: Option<usize>,
    /// Longest a call waits for a session, in milliseconds, before 503. Default 10000.
    pub pool_acquire_timeout_ms: Option<u64>,
    /// Most sessions (for stdio: processes) of one principal with one set of client
    /// capabilities; callers past it wait like callers past `pool_max_sessions`, and a
    /// second client is still served. Default `pool_max_sessions` (no bound of its own).
    pub pool_max_per_key: Option<usize>,
    /// Most calls of one principal holding or waiting for an upstream session, whatever its
    /// capabilities; past it a call gets 503 at once. At most `pool_max_sessions`. Default a
    /// quarter of `pool_max_sessions` with `auth.mode = "jwt"`, all of it without auth.
    pub pool_max_per_principal: Option<usize>,
    /// Stdio only: processes kept spawned ahead of demand, waiting for `initialize`, so a call
    /// does not pay the process start. At most `pool_max_sessions`. Default 0.
    pub pool_min_warm: Option<usize>,
    /// Most TCP connections to the upstream, the legacy relay's included; more than twice
    /// `pool_max_sessions` plus `subscriptions.max_sessions`. Default
    /// `2 * (pool_max_sessions + subscriptions.max_sessions + legacy.max_sessions) + 48`.
    pub max_connections: Option<usize>,
    /// Most TCP connections to the upstream being opened at once. Default 32.
    pub max_connecting: Option<usize>,
    /// A legacy stdio server to spawn instead of `url`: `["program", "arg", …]`, or one line
    /// split on whitespace with simple quoting. One process per pooled session.
    pub command: Option<RawCommand>,
    /// Variables set in the child's environment, which otherwise holds only the passed-through
    /// names. Values are secrets.
    pub env: Option<BTreeMap<String, Secret>>,
    /// Names copied from the gateway's environment to the child's. Default `["PATH", "HOME"]`.
    pub env_passthrough: Option<Vec<String>>,
    /// Working directory of the child. Default: the gateway's.
    pub cwd: Option<String>,
    /// Longest stdout line accepted from the child; a longer one stops it. Default 4 MiB.
    pub max_line_bytes: Option<usize>,
    /// `file://` URIs answered to `roots/list` requests that no client can be asked (a
    /// server asking outside any call). Absent: such requests get an error.
    pub roots: Option<Vec<String>>,
    /// `[upstream.tls]`: trust and client identity for an `https://` upstream.
    pub tls: Option<RawUpstreamTls>,
}

/// `[upstream.tls]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawUpstreamTls {
    /// Trust the platform's root certificates. Default true.
    pub platform_roots: Option<bool>,
    /// A PEM bundle of extra CA certificates.
    pub ca_file: Option<String>,
    /// A PEM client certificate chain, for upstreams that require mutual TLS (with `client_key_file`).
    pub client_cert_file: Option<String>,
    /// The PEM private key of `client_cert_file`.
    pub client_key_file: Option<String>,
}

/// A secret value: inline, or read from a file at start (trailing whitespace trimmed).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum RawSecretValue {
    Inline(Secret),
    File(RawSecretFile),
}

/// `{ file = "…" }`: a secret read from a file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSecretFile {
    pub file: String,
}

/// `upstream.command`: an argument vector, or a command line to split.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum RawCommand {
    Argv(Vec<String>),
    Line(String),
}

/// `[mrtr]`: the replay flow.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawMrtr {
    /// Milliseconds to gather concurrent questions after the first unanswered one. Default 50.
    pub gather_window_ms: Option<u64>,
    /// Longest time one round may wait on the upstream, in milliseconds. Default 60000.
    pub round_timeout_ms: Option<u64>,
    /// Longest total time of one front request, in milliseconds. Default 120000.
    pub total_timeout_ms: Option<u64>,
    /// Most `input_required` rounds in one request chain. Default 8 (clients give up after 10).
    pub max_rounds: Option<u32>,
    /// Most questions in one round. Default 16.
    pub max_questions_per_round: Option<usize>,
    /// Largest accepted answer (one `inputResponses` value) in bytes. Default 64 KiB.
    pub max_answer_bytes: Option<usize>,
    /// Milliseconds of upstream quiet after its latest question that end a round before the
    /// gather window does. Default 5; at most `gather_window_ms`.
    pub gather_idle_ms: Option<u64>,
    /// Tools whose questions-at-once counts a replica remembers (0: none). Default 1024.
    pub gather_memory_tools: Option<usize>,
    /// A round whose remembered count is reached ends at once, except one round in this many,
    /// which still waits the idle gap (1: every round waits it). Default 16.
    pub gather_recheck_every: Option<usize>,
    /// Tool name → questions it asks at once, for replicas that have not yet seen the tool.
    pub gather_expect: Option<BTreeMap<String, usize>>,
    /// How a round ends: `replay` (default: cancel the call, replay it on the retry), `park`
    /// (keep it running on this replica until the retry) or `auto` (park the tools that showed
    /// a divergence on this replica or are listed in `side_effecting`, replay the others).
    pub mode: Option<String>,
    /// Tool name → mode, overriding `mode` for that tool.
    pub tool_modes: Option<BTreeMap<String, String>>,
    /// Tools that `auto` mode always parks (they do something before their first question).
    pub side_effecting: Option<Vec<String>>,
    /// Longest a parked call waits for its retry, in milliseconds; then it is cancelled
    /// upstream. Default 60000.
    pub park_timeout_ms: Option<u64>,
    /// Most calls parked at once on this replica; a round beyond it is replayed. Default 64.
    pub max_parked: Option<usize>,
    /// Most calls of one principal parked at once on this replica; a round beyond it is
    /// replayed. At most `max_parked`. Default a quarter of `max_parked` with
    /// `auth.mode = "jwt"`, all of it without auth.
    pub max_parked_per_principal: Option<usize>,
}

/// `[state]`: the sealed `requestState`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawState {
    /// Base64 32-byte keys, optionally `id:` before each; the first seals, all open. Secrets.
    pub keys: Option<Vec<Secret>>,
    /// A file with one key per line (same syntax), e.g. a mounted Kubernetes Secret. Re-read
    /// when its content changes and on SIGHUP; a bad new file is refused and the old ring kept.
    pub key_file: Option<String>,
    /// How often `key_file` is checked for a change, in milliseconds. Default 5000.
    pub key_file_poll_ms: Option<u64>,
    /// Lifetime of a state token in seconds. Default 600.
    pub ttl_secs: Option<u64>,
    /// Clock skew tolerated between replicas in seconds. Default 30.
    pub clock_skew_secs: Option<u64>,
    /// Largest accepted token in bytes. Default 256 KiB.
    pub max_token_bytes: Option<usize>,
    /// Accept each token once across every replica (needs `redis_url`). Default false.
    pub single_use: Option<bool>,
    /// The Redis server that records consumed tokens, e.g. `redis://127.0.0.1:6379/0`. A
    /// secret (it may carry a password).
    pub redis_url: Option<Secret>,
}

/// `[auth]`: who the client is.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawAuth {
    /// `none` (default; every client is the principal `anonymous`) or `jwt`.
    pub mode: Option<String>,
    /// HS256 shared secret (jwt mode). A secret.
    pub jwt_hs256_secret: Option<Secret>,
    /// PEM public key file (RSA or EC) for RS256/ES256 tokens (jwt mode).
    pub jwt_public_key_file: Option<String>,
    /// Required `iss` claim.
    pub jwt_issuer: Option<String>,
    /// Required `aud` claim.
    pub jwt_audience: Option<String>,
    /// The token issuer: the required `iss` claim, and with `oidc_discovery` where the keys
    /// are found (`{issuer}/.well-known/openid-configuration` → `jwks_uri`).
    pub issuer: Option<String>,
    /// Find the keys through the issuer's OpenID discovery document. Default false.
    pub oidc_discovery: Option<bool>,
    /// A JWKS document of token-signing keys (https, or http on loopback).
    pub jwks_url: Option<String>,
    /// Seconds between background refreshes of the remote keys. Default 300.
    pub jwks_refresh_secs: Option<u64>,
    /// Least seconds between two refreshes caused by an unknown `kid`. Default 30.
    pub jwks_min_refresh_secs: Option<u64>,
    /// Seconds the last good keys stay in use while the issuer cannot be reached. Default 3600.
    pub jwks_max_stale_secs: Option<u64>,
    /// One key fetch, in milliseconds (connect, send, read). Default 5000.
    pub jwks_timeout_ms: Option<u64>,
    /// Longest a request waits for a refresh its unknown `kid` caused, in ms. Default 2000.
    pub jwks_wait_ms: Option<u64>,
    /// A PEM bundle of CA certificates trusted for the key source, besides the platform's.
    pub jwks_ca_file: Option<String>,
    /// Clock skew tolerated on `exp` and `nbf`, in seconds. Default 30.
    pub leeway_secs: Option<u64>,
    /// Required `aud` claim (RFC 8707); defaults to `resource`. Same as `jwt_audience`.
    pub audience: Option<String>,
    /// The gateway's resource URL (RFC 9728 `resource`): turns on the metadata document and
    /// `resource_metadata` in challenges.
    pub resource: Option<String>,
    /// RFC 9728 `authorization_servers`.
    pub authorization_servers: Option<Vec<String>>,
    /// RFC 9728 `scopes_supported`.
    pub scopes_supported: Option<Vec<String>>,
    /// RFC 9728 `bearer_methods_supported`. Default `["header"]`.
    pub bearer_methods_supported: Option<Vec<String>>,
    /// `[[auth.rules]]`: who may call what. None: every client may call anything. Without
    /// authentication (`mode = "none"`) rules name no scopes or claims and filter for everyone.
    pub rules: Option<Vec<RawRule>>,
}

/// One `[[auth.rules]]` entry: principals with all of `scopes` and all of `claims` may use the
/// listed methods, tools, prompts and resources (names and URIs with `*` wildcards), and never
/// the ones its `deny_*` lists name.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawRule {
    pub scopes: Option<Vec<String>>,
    pub claims: Option<std::collections::BTreeMap<String, String>>,
    /// Methods this rule allows. Default `["*"]`.
    pub methods: Option<Vec<String>>,
    pub tools: Option<Vec<String>>,
    pub prompts: Option<Vec<String>>,
    pub resources: Option<Vec<String>>,
    /// Tools refused to the principals this rule applies to, whatever any rule allows.
    pub deny_tools: Option<Vec<String>>,
    /// Prompts refused likewise.
    pub deny_prompts: Option<Vec<String>>,
    /// Resource URIs (and templates) refused likewise.
    pub deny_resources: Option<Vec<String>>,
}

/// `[log]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawLog {
    /// `text` (default) or `json`.
    pub format: Option<String>,
    /// A tracing filter, e.g. `info` or `mrtr_gateway=debug`. Default `info`.
    pub level: Option<String>,
}

/// `[legacy]`: clients of the 2025-era protocol (an `initialize` handshake, `Mcp-Session-Id`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawLegacy {
    /// Relay legacy clients to the upstream as transparent sessions on the same endpoint.
    /// Default true; false refuses them (`initialize` gets 404 `-32601`).
    pub enabled: Option<bool>,
    /// Most legacy sessions one replica relays at once; past it `initialize` gets 503. Default 256.
    pub max_sessions: Option<usize>,
    /// Most legacy sessions of one principal on one replica; past it `initialize` gets 503.
    /// At most `max_sessions`. Default a quarter of `max_sessions` with `auth.mode = "jwt"`,
    /// all of it without auth.
    pub max_sessions_per_principal: Option<usize>,
    /// Seconds a legacy session may go without a request or an open stream before it is
    /// ended (upstream session deleted, stdio process stopped). Default 600.
    pub idle_secs: Option<u64>,
}

/// `[limits]`: token-bucket rate limits. Every limit is off unless configured.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawLimits {
    /// Each principal's requests, whatever the method. Absent: no limit.
    pub principal: Option<RawRate>,
    /// Tool name → each principal's `tools/call` requests of that tool.
    pub tools: Option<BTreeMap<String, RawRate>>,
}

/// One token bucket.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRate {
    /// Tokens added per second (fractions allowed, e.g. 0.5 for one every two seconds).
    pub rate_per_sec: f64,
    /// Most tokens the bucket holds: the burst allowed after a quiet spell. Default: the rate
    /// per second rounded up, at least 1.
    pub burst: Option<u32>,
}

/// `[subscriptions]`: `subscriptions/listen`, bridged onto the upstream's list changes and
/// `resources/subscribe`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawSubscriptions {
    /// Bridge `subscriptions/listen`. Default true; false answers it 404 `-32601` and leaves the
    /// list-change and subscribe flags out of `server/discover`.
    pub enabled: Option<bool>,
    /// Most listen streams one replica holds at once; past it a new one gets 503. Default 256.
    pub max_listeners: Option<usize>,
    /// Most listen streams of one principal on one replica; past it a new one gets 429.
    /// Default 16; at most `max_listeners`.
    pub max_per_principal: Option<usize>,
    /// Most resource URIs in one listen request; past it the request gets 400. Default 64.
    pub max_uris: Option<usize>,
    /// Most upstream sessions (stdio: processes) held for listen streams, one per listening
    /// principal and capability set; past it a listen stream that needs a new one gets 503.
    /// Default 16; at most `max_listeners`. They count in `upstream.max_connections`.
    pub max_sessions: Option<usize>,
    /// While a principal listens, its calls run on the listen session whenever no other call
    /// has it, so a server that notifies a session only of its own changes tells the listen
    /// streams of them. Default true; false keeps every call on the pool's sessions.
    pub share_with_calls: Option<bool>,
}

/// `[tasks]`: legacy task tools (`execution.taskSupport`) served to 2026-07-28 clients as tasks
/// of the `io.modelcontextprotocol/tasks` extension.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawTasks {
    /// Bridge legacy task tools. Default true; false hides the tools that can only run as legacy
    /// tasks, strips `execution` from the others and answers the `tasks/*` methods `-32601`.
    pub enabled: Option<bool>,
    /// Most running tasks one replica holds (each pins an upstream session); past it a call that
    /// would start one gets 503. Finished tasks are kept for `tasks/get` until they expire, at
    /// most this many too (past it the one closest to expiry is dropped). Default 64.
    pub max_tasks: Option<usize>,
    /// Most running tasks of one principal on one replica; past it 429. Default 16; at most
    /// `max_tasks`.
    pub max_per_principal: Option<usize>,
    /// Largest result or error of a finished task kept for `tasks/get`, in bytes; a larger one
    /// ends the task `failed`. Default 1 MiB.
    pub max_result_bytes: Option<usize>,
    /// How long a task lives from its creation, in seconds: the `ttl` asked upstream, the
    /// `ttlMs` told the client and the task id's expiry. Default 600.
    pub ttl_secs: Option<u64>,
    /// The `pollIntervalMs` suggested to clients, in milliseconds. Default 500.
    pub poll_interval_ms: Option<u64>,
    /// Tools without task support whose calls, by a client that declared the extension, become
    /// tasks at once: the call runs on upstream on this replica while the client polls it.
    /// Default none.
    pub long_tools: Option<Vec<String>>,
    /// Other calls by such a client become tasks once they have run this long, in
    /// milliseconds (a call that finishes first answers in-line). Default 0: never; else
    /// shorter than the ttl and than `upstream.request_timeout_ms`.
    pub long_after_ms: Option<u64>,
}

/// `[cluster]`: how replicas reach each other's parked calls.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawCluster {
    /// The URL other replicas reach this one's internal listener at, e.g.
    /// `http://10.0.0.7:9443` (the pod IP). Absent: parked calls are found only by the replica
    /// that parked them; a retry elsewhere replays.
    pub advertise_url: Option<String>,
    /// Address of the internal listener that answers forwarded retries. Required with
    /// `advertise_url`.
    pub listen: Option<String>,
    /// Connect timeout of a forwarded retry, in milliseconds. Default 500.
    pub forward_connect_timeout_ms: Option<u64>,
    /// Longest a forwarded retry waits for its owner to take it (connect included, until the
    /// owner's response head), in milliseconds; then it is replayed. Default 5000.
    pub forward_accept_timeout_ms: Option<u64>,
    /// PEM certificate chain: the internal listener serves TLS (with `tls_key_file`), and
    /// `advertise_url` must then be `https://`.
    pub tls_cert_file: Option<String>,
    /// PEM private key for `tls_cert_file`.
    pub tls_key_file: Option<String>,
    /// A PEM bundle of CA certificates trusted, beside the platform's roots, when forwarding a
    /// retry to an `https://` owner (the CA that signed the replicas' certificates).
    pub tls_ca_file: Option<String>,
}

/// `[tracing]`: OpenTelemetry traces, exported over OTLP/HTTP (protobuf). Off unless
/// `otlp_endpoint` is set.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawTracing {
    /// The collector, e.g. `http://127.0.0.1:4318` (`/v1/traces` is added when the URL has no
    /// path). Absent or empty: tracing is off.
    pub otlp_endpoint: Option<String>,
    /// `service.name` of the exported spans. Default `mrtr-gateway`.
    pub service_name: Option<String>,
    /// Share of new traces recorded, 0.0 to 1.0; a request with an incoming trace context
    /// follows its sampled flag. Default 1.0.
    pub sample_ratio: Option<f64>,
    /// Most finished spans queued for export; past it new spans are dropped. Default 2048.
    pub max_queue: Option<usize>,
    /// Longest one export may take, in ms. Default 10000.
    pub export_timeout_ms: Option<u64>,
}
