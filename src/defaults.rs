//! Every default bound and setting of the gateway, defined once.
//!
//! Why a module of its own: the sealed core (`src/mrtr`) must not import the config layer (or
//! tokio or hyper), and the config layer must not restate numbers the core and the upstream
//! client also use (they drifted apart when each kept its own). So the defaults live here, with
//! nothing but `std` and the protocol's [`LegacyVersion`] in scope, and the core's `Default` impls,
//! the upstream settings and the config's fallbacks all read them. The configuration reference
//! (docs/src/configuration.md) documents these values, and tests/it/references/config.rs holds
//! it to them; tests use them instead of copies.

use std::time::Duration;

use crate::protocol::LegacyVersion;

// [front]
pub const LISTEN: &str = "127.0.0.1:8080";
pub const PATH: &str = "/mcp";
pub const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;
pub const MAX_CONNECTIONS: usize = 4096;
pub const MAX_IN_FLIGHT: usize = 1024;
pub const DRAIN: Duration = Duration::from_secs(30);
/// Longest a client may take to send its request head, and then its body: a slow or stalled
/// client must not hold a connection slot (and, once its head is in, a task) for ever.
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest a new connection may take, from its accept, to finish its TLS handshake (a
/// ClientHello included) and to show which protocol it speaks: its first bytes of HTTP/1, or
/// the whole HTTP/2 preface and SETTINGS frame. A connection that sends nothing must not hold a
/// slot of `max_connections`.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest a connection may stay open with no request in flight (HTTP/1 keep-alive between
/// requests, HTTP/2 with no open stream); a request in flight (a long stream included) is never
/// cut by it. HTTP/2 peers are also pinged this often, and one that does not answer within
/// [`HANDSHAKE_TIMEOUT`] is taken for dead. Below the 90 s for which common HTTP clients keep
/// an idle connection, as load balancers do.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Once a connection past its deadline was told to close (an HTTP/2 GOAWAY), the longest it may
/// take to end with no request in flight before it is dropped (not configurable).
pub const CLOSE_GRACE: Duration = Duration::from_secs(1);
pub const CACHE_TTL_MS: u64 = 0;
pub const CACHE_SCOPE: &str = "private";
/// Characters of a client-sent value quoted in an error message or a log line (defined beside
/// the quoting, which the protocol layer owns; not configurable).
pub use crate::protocol::quote::MAX_QUOTED_CHARS;
/// Longest client `x-request-id` the gateway keeps (echoes and logs); a longer one is replaced
/// by an id of the gateway's own (not configurable).
pub const MAX_CLIENT_REQUEST_ID_BYTES: usize = 128;
/// Characters of a principal named on a log line (not configurable).
pub const MAX_LOGGED_PRINCIPAL_CHARS: usize = 128;

// [admin]
pub const ADMIN_LISTEN: &str = "127.0.0.1:9090";
/// Open connections to the admin listener (not configurable). Probes and scrapes open a few;
/// the front's handshake and idle deadlines free the slots of connections that send nothing.
pub const ADMIN_MAX_CONNECTIONS: usize = 64;
/// How long the admin listener, which stops last, finishes its requests (not configurable).
pub const ADMIN_DRAIN: Duration = Duration::from_secs(1);
/// Each step (connect, send, read) of `mrtr-gateway healthcheck`'s probe (not configurable).
pub const HEALTHCHECK_TIMEOUT: Duration = Duration::from_secs(2);

// [upstream]
/// The revision proposed in `initialize`.
pub const UPSTREAM_VERSION: LegacyVersion = LegacyVersion::V2025_11_25;
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// One upstream request, a call's whole life included.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
/// Upstream sessions (stdio: processes) per replica, and so upstream calls at once. 128 served
/// 1,000 concurrent clients as fast as 256 did in front of the demo (3,199 calls/s, p99
/// 418 ms) and within 10% of it in front of `server-everything`, on 2 cores; each session
/// costs the gateway about 70 KB (its GET stream's and its call's connections) and the legacy
/// server a session, so 256 held about 12 MB more for at most that 10%. Raise it for slow
/// tools.
pub const POOL_MAX_SESSIONS: usize = 128;
pub const POOL_IDLE: Duration = Duration::from_secs(300);
/// How long a call waits for a session when every one is leased.
pub const POOL_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);
/// Calls that may wait for a session at once; past it a call is refused at once (503).
pub const POOL_MAX_QUEUED: usize = 1024;
/// Warm stdio processes kept spawned ahead of demand (see `upstream.pool_min_warm`).
pub const POOL_MIN_WARM: usize = 0;

/// The default `upstream.pool_max_per_key`: no bound per (principal, capabilities) beyond the
/// total one.
pub const fn pool_max_per_key(pool_max_sessions: usize) -> usize {
    pool_max_sessions
}
/// The default share of one principal of a bound every client shares (`upstream.pool_max_sessions`,
/// `legacy.max_sessions`, `mrtr.max_parked`): a quarter of it, at least one, when clients
/// authenticate, so that one client past its share still leaves three quarters to the others;
/// all of it when they do not, since every client is then the one principal `anonymous` and a
/// share would only shrink the total.
pub const fn principal_share(total: usize, authenticated: bool) -> usize {
    if authenticated {
        let quarter = total / 4;
        if quarter == 0 {
            1
        } else {
            quarter
        }
    } else {
        total
    }
}
/// TCP connections to the upstream being opened at once.
pub const MAX_CONNECTING: usize = 32;
/// Upstream connections allowed beyond two per session, for short POSTs (answers, cancels).
pub const SPARE_CONNECTIONS: usize = 16;

/// The default `upstream.max_connections`: each session (pooled, listening for
/// `subscriptions/listen`, or a legacy client's, whose relay counts against the same bound)
/// holds its GET stream and, while a call or request runs on it, that call's response stream;
/// the spare ones carry the short POSTs. Requests in flight stay `MAX_CONNECTING` below it, so
/// those connections are there for connects to start at once.
pub const fn max_connections(
    pool_max_sessions: usize,
    listen_sessions: usize,
    legacy_sessions: usize,
) -> usize {
    2 * (pool_max_sessions + listen_sessions + legacy_sessions) + SPARE_CONNECTIONS + MAX_CONNECTING
}
/// Notifications (progress, logs) queued for one request's stream before the call waits for
/// the client, on the front and between replicas (not configurable).
pub const NOTES_QUEUE: usize = 32;
/// Largest SSE event or JSON body accepted from the upstream (not configurable).
pub const MAX_EVENT_BYTES: usize = 4 * 1024 * 1024;
/// Longest stdout line accepted from a stdio upstream; a longer one ends that process.
pub const MAX_LINE_BYTES: usize = 4 * 1024 * 1024;
/// The only variables of the gateway's own environment a stdio child inherits.
pub const ENV_PASSTHROUGH: [&str; 2] = ["PATH", "HOME"];
/// Longest the end of a replayed round may take upstream (its `notifications/cancelled` and the
/// refusal of its open requests, sent after the client has its reply), and so the longest a
/// call of the same key waits for that session rather than opening another (not configurable).
/// A wind-down still running then retires its session: the upstream may be wedged.
pub const WIND_DOWN: Duration = Duration::from_secs(5);
/// Longest shutdown spends closing pooled upstream sessions (not configurable).
pub const SHUTDOWN_CLOSE: Duration = Duration::from_secs(5);

// [mrtr]
pub const GATHER_WINDOW: Duration = Duration::from_millis(50);
/// Quiet time after the latest question that ends a round early (docs/src/how-it-works.md,
/// "Gathering": how it was chosen).
pub const GATHER_IDLE: Duration = Duration::from_millis(5);
/// Tools whose question counts one replica remembers.
pub const GATHER_MEMORY_TOOLS: usize = 1024;
/// One round in this many whose remembered question count is reached still waits the idle gap,
/// so a tool that now asks more at once is learned; the others end as soon as the count is in.
pub const GATHER_RECHECK_EVERY: usize = 16;
pub const ROUND_TIMEOUT: Duration = Duration::from_secs(60);
pub const TOTAL_TIMEOUT: Duration = Duration::from_secs(120);
/// `input_required` rounds per call: clients give up after about 10.
pub const MAX_ROUNDS: u32 = 8;
pub const MAX_QUESTIONS_PER_ROUND: usize = 16;
/// One answer's serialised size.
pub const MAX_ANSWER_BYTES: usize = 64 * 1024;
/// Longest a parked call waits for its retry.
pub const PARK_TIMEOUT: Duration = Duration::from_secs(60);
/// Calls parked at once on one replica: each pins an upstream session (or process), so the
/// default is half the default pool, leaving the other half to running calls.
pub const MAX_PARKED: usize = POOL_MAX_SESSIONS / 2;
/// Answered or expired parked calls a replica remembers, so that a second retry of an answered
/// state is refused rather than replayed (not configurable).
pub const PARK_MEMORY: usize = 4096;
/// Connect timeout of a retry forwarded to the replica that parked its call.
pub const FORWARD_CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
/// Longest a forwarded retry waits for its owner to take it (connect included, until the
/// owner's response head, which the owner sends before it runs the call); then the retry is
/// replayed here. An owner whose internal listener has no free slot is taken for gone.
pub const FORWARD_ACCEPT_TIMEOUT: Duration = Duration::from_secs(5);
/// Clock difference tolerated on a forwarded retry's timestamp (not configurable).
pub const FORWARD_SKEW: Duration = Duration::from_secs(30);
/// Largest forwarded retry or answer body between replicas (not configurable).
pub const MAX_FORWARD_BYTES: usize = 8 * 1024 * 1024;
/// Answers one request chain may accumulate (not configurable).
pub const MAX_ANSWERS: usize = 64;

// [state]
pub const STATE_TTL: Duration = Duration::from_secs(600);
pub const CLOCK_SKEW: Duration = Duration::from_secs(30);
pub const MAX_TOKEN_BYTES: usize = 256 * 1024;
/// How often `state.key_file` is checked for new content. A Kubernetes Secret volume is
/// updated by a symlink swap within about a minute of the Secret changing; a few seconds more
/// is noise, and reading a small file that often costs nothing.
pub const KEY_FILE_POLL: Duration = Duration::from_secs(5);

// [log]
pub const LOG_LEVEL: &str = "info";
/// `text` (one human-readable line per event) or `json` (one JSON object per line).
pub const LOG_FORMAT: &str = "text";

// [legacy]
/// Legacy (2025-era) clients are relayed to the upstream as transparent sessions.
pub const LEGACY_ENABLED: bool = true;
/// Legacy sessions one replica relays at once; past it a new one is refused (503).
pub const LEGACY_MAX_SESSIONS: usize = 256;
/// A legacy session with no request and no open stream for this long is ended.
pub const LEGACY_IDLE: Duration = Duration::from_secs(600);
/// Longest `Mcp-Session-Id` accepted from a client or sealed for one (not configurable).
pub const LEGACY_MAX_SESSION_ID_BYTES: usize = 1024;
/// Longest a legacy session's request waits for its GET stream, received first, to be answered
/// upstream before it is sent anyway (not configurable).
pub const LEGACY_STREAM_ORDER_WAIT: Duration = Duration::from_secs(1);

// [front] header-carried parameters (not configurable)
/// Most tools whose `x-mcp-header` annotations one replica remembers.
pub const TOOL_HEADERS_MAX_TOOLS: usize = 4096;
/// Bound on listing the upstream's tools for a call naming a tool the replica has not seen.
pub const TOOL_LIST_FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// After a complete listing, a call naming an unknown tool lists the tools again only this
/// much later.
pub const TOOL_LIST_REFETCH_AFTER: Duration = Duration::from_secs(10);
/// Most `tools/list` pages one such listing reads.
pub const TOOL_LIST_FETCH_PAGES: usize = 16;
// [auth]
/// Clock skew tolerated on a token's `exp` and `nbf`.
pub const AUTH_LEEWAY: Duration = Duration::from_secs(30);
/// Background refresh interval of remote (JWKS) keys.
pub const JWKS_REFRESH: Duration = Duration::from_secs(300);
/// Least time between two key refreshes caused by tokens with an unknown `kid`.
pub const JWKS_MIN_REFRESH: Duration = Duration::from_secs(30);
/// How long the last good keys stay in use while the issuer cannot be reached.
pub const JWKS_MAX_STALE: Duration = Duration::from_secs(3600);
/// One fetch of a JWKS or discovery document.
pub const JWKS_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest a request waits for the key refresh its unknown `kid` caused.
pub const JWKS_WAIT: Duration = Duration::from_secs(2);
/// Connections the key fetcher may hold open (a refresh makes one or two requests at a time).
pub const JWKS_MAX_CONNECTIONS: usize = 4;
/// Connections the OTLP exporter may hold open (one batch export at a time, and a retry).
pub const OTLP_MAX_CONNECTIONS: usize = 2;
/// Largest JWKS or discovery document accepted (not configurable).
pub const JWKS_MAX_BYTES: usize = 256 * 1024;
/// The methods an `[[auth.rules]]` entry allows when it names none: every method.
pub const RULE_METHODS: &str = "*";
/// RFC 9728 `bearer_methods_supported`: the gateway reads the `Authorization` header only.
pub const BEARER_METHODS: [&str; 1] = ["header"];

// [limits]
/// The default `burst` of a `[limits]` rate: its tokens per second rounded up, and at least
/// one MRTR chain's requests (its first call and a retry for each of `max_rounds` rounds), since
/// every retry takes a token: a quiet client's chain is never limited half way.
pub fn limit_burst(rate_per_sec: f64, max_rounds: u32) -> u32 {
    // Saturating float-to-int cast; the config layer caps the rate at MAX_RATE_PER_SEC.
    (rate_per_sec.ceil() as u32).max(max_rounds.saturating_add(1))
}
/// Highest `rate_per_sec` accepted (a token every microsecond).
pub const MAX_RATE_PER_SEC: f64 = 1_000_000.0;
/// Rate-limited requests between two sweeps of the keys of principals gone quiet (not
/// configurable): the limiters' memory holds at most the keys seen since the last sweep plus
/// those whose bucket has not refilled yet.
pub const LIMIT_SWEEP_EVERY: u64 = 1024;

// [state] single use
pub const SINGLE_USE: bool = false;
/// Longest one state-store command (connect included) may take before the request fails closed.
pub const STATE_STORE_TIMEOUT: Duration = Duration::from_secs(1);
/// How often the state store is pinged for `/readyz` (not configurable).
pub const STATE_STORE_PING: Duration = Duration::from_secs(2);
/// Prefix of the keys that mark a consumed token (not configurable).
pub const STATE_STORE_KEY_PREFIX: &str = "mrtr-gateway:used:";

// [admin] the per-tool migration report (not configurable)
/// Tools with an entry of their own in `/admin/tools` and a `tool` label on the `tool_*`
/// series; the runs of any further tool are summed in one `(other)` entry.
pub const TOOL_REPORT_MAX_TOOLS: usize = 256;
/// Longest tool name given an entry of its own, in bytes; longer names count under `(other)`.
pub const TOOL_REPORT_MAX_NAME_BYTES: usize = 256;
/// Mean rounds per completed call from which a tool's verdict is `many rounds`: each round
/// replays the call from the top, so by the third the replays cost more than the questions.
pub const TOOL_REPORT_MANY_ROUNDS: f64 = 3.0;
/// (Tool, reason) pairs the report remembers having logged, so that each repair, refusal and
/// sensitive question is logged once; past it, new pairs are counted but not logged.
pub const TOOL_REPORT_MAX_LOGGED: usize = 4096;

// [elicitation]
/// `elicitation.sensitive`: what a question that asks for a secret gets, `warn` (relayed, logged
/// and counted) or `refuse` (declined upstream on the user's behalf).
pub const ELICITATION_SENSITIVE: &str = "warn";

// the 2026-07-28 schema checks of what is relayed (not configurable)
/// Distinct list pages whose check is remembered (a client lists the same tools again and again).
pub const SCHEMA_MAX_PAGES: usize = 64;
/// Distinct tool `outputSchema`s kept compiled.
pub const SCHEMA_MAX_VALIDATORS: usize = 512;

// [subscriptions]
/// `subscriptions/listen` is bridged onto the upstream's list changes and resource updates.
pub const SUBSCRIPTIONS_ENABLED: bool = true;
/// Listen streams one replica holds at once; past it a new one is refused (503).
pub const SUBSCRIPTIONS_MAX_LISTENERS: usize = 256;
/// Listen streams one principal holds at once on one replica; past it a new one is refused (429).
pub const SUBSCRIPTIONS_MAX_PER_PRINCIPAL: usize = 16;
/// Resource URIs one listen request may name.
pub const SUBSCRIPTIONS_MAX_URIS: usize = 64;
/// Upstream sessions (stdio: processes) held for listen streams at once, one per listening
/// (principal, capability set); past it a listen stream of a new key is refused (503).
pub const SUBSCRIPTIONS_MAX_SESSIONS: usize = 16;
/// A key's calls lease its listen session first while no other call has it, so that what they
/// change on a per-session server reaches the key's listen streams.
pub const SUBSCRIPTIONS_SHARE_WITH_CALLS: bool = true;
/// Notifications queued for one listen stream (and between the upstream session and its
/// listeners); a client that falls this far behind has its stream ended (not configurable).
pub const LISTEN_QUEUE: usize = 64;
/// Bound on one `resources/subscribe` or `resources/unsubscribe` upstream (not configurable).
pub const LISTEN_UPSTREAM_TIMEOUT: Duration = Duration::from_secs(10);
/// How often a listen session's health is checked besides its own failures (not configurable).
pub const LISTEN_HEALTH_CHECK: Duration = Duration::from_secs(5);
/// How often a listen session, which otherwise sends nothing upstream, pings the server, so
/// that one which ends quiet sessions keeps it (not configurable).
pub const LISTEN_KEEPALIVE: Duration = Duration::from_secs(60);

// [tasks] legacy task tools served as 2026-07-28 tasks (docs/src/tasks.md)
/// Bridge legacy task tools to the tasks extension.
pub const TASKS_ENABLED: bool = true;
/// Running tasks one replica holds at once, each with its pinned upstream session (and the
/// finished ones it keeps for `tasks/get`).
pub const TASKS_MAX_TASKS: usize = 64;
/// Running tasks of one principal on one replica.
pub const TASKS_MAX_PER_PRINCIPAL: usize = 16;
/// Largest result (or error) of a finished task the gateway keeps, in bytes.
pub const TASKS_MAX_RESULT_BYTES: usize = 1024 * 1024;
/// How long a task is kept from its creation: the `ttl` asked upstream and the id's expiry.
pub const TASKS_TTL: Duration = Duration::from_secs(600);
/// `pollIntervalMs` suggested to clients.
pub const TASKS_POLL_INTERVAL: Duration = Duration::from_millis(500);
/// How long an ordinary call of a client that declared the tasks extension runs before it
/// becomes a task (`tasks.long_after_ms`); zero: never by duration.
pub const TASKS_LONG_AFTER: Duration = Duration::ZERO;
/// Longest `taskId` accepted from a client or sealed for one (not configurable).
pub const TASK_ID_MAX_BYTES: usize = 1024;
/// Questions one task may have pending at once (not configurable).
pub const TASK_MAX_PENDING_QUESTIONS: usize = 16;
/// Bound on one upstream `tools/call`, `tasks/get` or `tasks/cancel` of a task (not configurable).
pub const TASK_UPSTREAM_TIMEOUT: Duration = Duration::from_secs(30);
/// Room in a stored task record for the detailed task's own fields around its result (not
/// configurable).
pub const TASK_RECORD_OVERHEAD_BYTES: usize = 16 * 1024;
/// Prefix of the result store's keys of finished tasks (not configurable).
pub const TASK_STORE_KEY_PREFIX: &str = "mrtr-gateway:task:";
/// Largest `tasks.max_result_bytes` accepted: a result travels between replicas within
/// [`MAX_FORWARD_BYTES`], and is sealed (a third larger) in the result store.
pub const TASKS_MAX_RESULT_BYTES_LIMIT: usize = MAX_FORWARD_BYTES / 2;
/// Bound on one task request forwarded to the task's owner, beyond the owner's own bound on
/// the upstream exchange it may make for it ([`TASK_UPSTREAM_TIMEOUT`]); not configurable.
pub const TASK_FORWARD_SLACK: Duration = Duration::from_secs(5);

// [tracing]
/// `service.name` of the exported spans.
pub const TRACING_SERVICE_NAME: &str = "mrtr-gateway";
/// Share of new traces recorded.
pub const TRACING_SAMPLE_RATIO: f64 = 1.0;
/// Finished spans waiting for export; past it new spans are dropped.
pub const TRACING_MAX_QUEUE: usize = 2048;
/// Longest one export may take.
pub const TRACING_EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// The path of the OTLP/HTTP traces endpoint, added to a collector URL given without a path.
pub const TRACING_OTLP_PATH: &str = "/v1/traces";
/// Most spans in one export request (not configurable; at most the queue).
pub const TRACING_EXPORT_BATCH: usize = 512;
/// Longest the exit waits for the last spans to be exported (not configurable).
pub const TRACING_SHUTDOWN: Duration = Duration::from_secs(5);

// --- metric buckets and label bounds, shared by the front's series and the migration report's

/// Distinct tool labels kept on the divergence counter before folding into `"other"`.
pub const MAX_DIVERGENCE_TOOLS: usize = 256;

/// Seconds, for every duration histogram.
pub const LATENCY_BUCKETS: &[f64] = &[
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0, 30.0,
];

/// Rounds of a completed call (at most `mrtr.max_rounds`, itself at most 64).
pub const ROUND_BUCKETS: &[f64] = &[0.0, 1.0, 2.0, 3.0, 4.0, 8.0, 16.0, 64.0];
/// Questions of one round (at most `mrtr.max_questions_per_round`).
pub const QUESTION_BUCKETS: &[f64] = &[1.0, 2.0, 3.0, 4.0, 8.0, 16.0, 64.0];
