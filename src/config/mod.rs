//! Configuration: a TOML file, overridden by `MRTR_GATEWAY__SECTION__KEY` environment variables,
//! overridden by CLI flags (the `config` crate layers them). The result is read into
//! [`raw::RawConfig`] (unknown fields refused) and validated into [`Config`], whose fields are the
//! final types the gateway uses. Every error names the field and the reason; secrets never
//! appear in `Debug` output or errors.

mod auth;
pub mod check;
pub mod cli;
mod command;
mod credentials;
mod park;
pub mod raw;
pub mod secret;
pub mod tls;
mod validate;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use http::{HeaderName, HeaderValue, Uri};

use crate::mrtr::LegacyVersion;

pub(crate) use auth::fetch_url;
pub use auth::{AuthConfig, JwtConfig, KeySource, RemoteKeys, ResourceConfig, RuleConfig, StaticKey};
pub use check::CheckArgs;
pub use cli::{Cli, Mode};
pub use park::{ClusterConfig, MrtrMode, ParkConfig};
pub use secret::Secret;
pub use validate::validate;

/// Prefix of environment variables, e.g. `MRTR_GATEWAY__UPSTREAM__URL`.
pub const ENV_PREFIX: &str = "MRTR_GATEWAY";

/// The environment variable that sets the configuration key `key`, e.g. `front.listen` is
/// `MRTR_GATEWAY__FRONT__LISTEN`: the inverse of the mapping [`environment`] applies.
pub fn env_name(key: &str) -> String {
    format!("{ENV_PREFIX}__{}", key.replace('.', "__").to_ascii_uppercase())
}

/// Errors from loading or validating configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{0}")]
    Load(#[from] config::ConfigError),
    #[error("{field}: {reason}")]
    Invalid { field: String, reason: String },
}

impl ConfigError {
    pub(crate) fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::Invalid { field: field.into(), reason: reason.into() }
    }
}

/// The validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub front: FrontConfig,
    /// `None` when the admin listener is disabled.
    pub admin_listen: Option<SocketAddr>,
    pub upstream: UpstreamConfig,
    pub mrtr: MrtrConfig,
    pub state: StateConfig,
    pub auth: AuthConfig,
    pub log: LogConfig,
    pub legacy: LegacyConfig,
    pub limits: LimitsConfig,
    pub subscriptions: SubscriptionsConfig,
    pub tasks: TasksConfig,
    pub cluster: ClusterConfig,
    /// OpenTelemetry export; `None` when tracing is off.
    pub tracing: Option<OtlpConfig>,
    pub elicitation: ElicitationConfig,
}

/// `[elicitation]`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ElicitationConfig {
    /// What a question that asks for a secret gets.
    pub sensitive: crate::schema::SensitivePolicy,
}

/// The 2026-07-28 listener.
#[derive(Debug, Clone)]
pub struct FrontConfig {
    pub listen: SocketAddr,
    pub path: String,
    pub max_body_bytes: usize,
    pub max_connections: usize,
    pub max_in_flight: usize,
    pub origins: OriginPolicy,
    pub drain: Duration,
    pub read_timeout: Duration,
    /// Until a new connection's TLS handshake is done and its protocol known.
    pub handshake_timeout: Duration,
    /// A connection with no request in flight.
    pub idle_timeout: Duration,
    pub cache_ttl_ms: u64,
    pub cache_scope: CacheScope,
    pub tls: Option<TlsFiles>,
}

/// Which `Origin` headers are accepted. Requests without `Origin` (non-browser clients) and
/// loopback origins are always accepted; a browser page elsewhere needs an explicit entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OriginPolicy {
    Any,
    LoopbackAnd(Vec<String>),
}

/// `cacheScope` of cacheable results.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheScope {
    Private,
    Public,
}

impl CacheScope {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Private => "private",
            Self::Public => "public",
        }
    }
}

/// Certificate and key files of a listener (the front, the internal one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Where the legacy server is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamTarget {
    /// Start the built-in demo server on loopback and front it.
    Embedded,
    Url(Uri),
    /// The event stream of a deprecated HTTP+SSE server (2024-11-05).
    Sse(Uri),
    /// Spawn a legacy stdio server, one process per session.
    Command(CommandConfig),
}

/// A legacy stdio server to spawn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandConfig {
    pub program: String,
    pub args: Vec<String>,
    /// Set in the child's environment; values are secrets.
    pub env: Vec<(String, Secret)>,
    /// Copied from the gateway's environment when present.
    pub env_passthrough: Vec<String>,
    pub cwd: Option<PathBuf>,
    pub max_line_bytes: usize,
}

/// The legacy upstream.
#[derive(Debug, Clone)]
pub struct UpstreamConfig {
    pub target: UpstreamTarget,
    /// The revision proposed in `initialize`.
    pub protocol_version: LegacyVersion,
    /// `upstream.headers` and the bearer token; marked sensitive, so `Debug` hides the values.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    pub pool_max_sessions: usize,
    pub pool_idle: Duration,
    pub pool_max_queued: usize,
    pub pool_acquire_timeout: Duration,
    /// Most sessions of one (principal, capabilities) key; at most `pool_max_sessions`.
    pub pool_max_per_key: usize,
    /// Most calls of one principal holding or waiting for a session; at most `pool_max_sessions`.
    pub pool_max_per_principal: usize,
    /// Warm processes of a stdio upstream (0 for the other targets).
    pub pool_min_warm: usize,
    pub max_connections: usize,
    pub max_connecting: usize,
    /// The answer to `roots/list` requests no client can be asked, as `file://` URIs.
    pub roots: Option<Vec<String>>,
    /// Trust and client identity for an `https://` upstream.
    pub tls: crate::config::tls::TlsSettings,
}

/// Bounds of the replay flow.
#[derive(Debug, Clone)]
pub struct MrtrConfig {
    pub gather_window: Duration,
    pub round_timeout: Duration,
    pub total_timeout: Duration,
    pub max_rounds: u32,
    pub max_questions_per_round: usize,
    pub max_answer_bytes: usize,
    /// Quiet after the latest question that ends a round early; at most `gather_window`.
    pub gather_idle: Duration,
    /// Tools remembered per replica for how many questions they ask at once.
    pub gather_memory_tools: usize,
    /// One round in this many whose remembered count is reached still waits the idle gap.
    pub gather_recheck_every: usize,
    /// Questions a tool asks at once, known before any call: (tool name, count).
    pub gather_expect: Vec<(String, usize)>,
    /// Replay, park or auto, per tool, and the park registry's bounds.
    pub park: ParkConfig,
}

/// The sealed state.
#[derive(Debug, Clone)]
pub struct StateConfig {
    /// Key lines (`[id:]base64`), first seals; empty means an ephemeral key.
    pub keys: Vec<KeyLine>,
    pub ttl: Duration,
    pub clock_skew: Duration,
    pub max_token_bytes: usize,
    /// Single-use tokens: `Some` when `state.single_use` is on.
    pub single_use: Option<SingleUseConfig>,
    /// `state.redis_url`, checked: the shared store of single use and of finished tasks.
    pub redis_url: Option<Secret>,
    /// `state.key_file`: re-read when its content changes and on SIGHUP.
    pub key_file: Option<PathBuf>,
    /// How often the key file's content is checked for a change.
    pub key_file_poll: Duration,
}

/// Where consumed single-use tokens are recorded.
#[derive(Debug, Clone)]
pub struct SingleUseConfig {
    /// A `redis://` or `redis+unix://` URL; a secret, it may hold a password.
    pub redis_url: Secret,
}

/// One configured key and where it came from (for error messages that never show the key).
#[derive(Debug, Clone)]
pub struct KeyLine {
    pub source: String,
    pub text: Secret,
    /// Read from `state.key_file` (replaced on reload) rather than given inline.
    pub from_file: bool,
}

/// Legacy (2025-era) clients on the same endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LegacyConfig {
    pub enabled: bool,
    pub max_sessions: usize,
    /// Most sessions of one principal; at most `max_sessions`.
    pub max_sessions_per_principal: usize,
    pub idle: Duration,
}

/// `subscriptions/listen`: whether it is bridged, and its bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubscriptionsConfig {
    pub enabled: bool,
    /// Listen streams one replica holds at once.
    pub max_listeners: usize,
    /// Listen streams one principal holds at once; at most `max_listeners`.
    pub max_per_principal: usize,
    /// Resource URIs one listen request may name.
    pub max_uris: usize,
    /// The key's calls lease its listen session first when no other call has it.
    pub share_with_calls: bool,
    /// Upstream sessions held for listen streams at once (one per listening key).
    pub max_sessions: usize,
}

impl SubscriptionsConfig {
    /// The upstream sessions listen streams may hold: none when the bridge is off.
    pub fn upstream_sessions(&self) -> usize {
        if self.enabled {
            self.max_sessions
        } else {
            0
        }
    }
}

impl Default for SubscriptionsConfig {
    fn default() -> Self {
        use crate::defaults as d;
        Self {
            enabled: d::SUBSCRIPTIONS_ENABLED,
            max_listeners: d::SUBSCRIPTIONS_MAX_LISTENERS,
            max_per_principal: d::SUBSCRIPTIONS_MAX_PER_PRINCIPAL,
            max_uris: d::SUBSCRIPTIONS_MAX_URIS,
            share_with_calls: d::SUBSCRIPTIONS_SHARE_WITH_CALLS,
            max_sessions: d::SUBSCRIPTIONS_MAX_SESSIONS,
        }
    }
}

/// Legacy task tools served as 2026-07-28 tasks: whether, and their bounds; and which
/// ordinary calls become tasks too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TasksConfig {
    pub enabled: bool,
    /// Running tasks one replica holds at once (and finished ones kept for `tasks/get`).
    pub max_tasks: usize,
    /// Running tasks of one principal at once; at most `max_tasks`.
    pub max_per_principal: usize,
    /// Largest kept result or error of a finished task.
    pub max_result_bytes: usize,
    /// A task's life from its creation.
    pub ttl: Duration,
    /// The poll interval suggested to clients.
    pub poll_interval: Duration,
    /// Tools whose calls become tasks at once (exact names).
    pub long_tools: Vec<String>,
    /// How long an ordinary call runs before it becomes a task; `None`: never by duration.
    pub long_after: Option<Duration>,
}

impl Default for TasksConfig {
    fn default() -> Self {
        use crate::defaults as d;
        Self {
            enabled: d::TASKS_ENABLED,
            max_tasks: d::TASKS_MAX_TASKS,
            max_per_principal: d::TASKS_MAX_PER_PRINCIPAL,
            max_result_bytes: d::TASKS_MAX_RESULT_BYTES,
            ttl: d::TASKS_TTL,
            poll_interval: d::TASKS_POLL_INTERVAL,
            long_tools: Vec::new(),
            long_after: Some(d::TASKS_LONG_AFTER).filter(|after| !after.is_zero()),
        }
    }
}

/// Rate limits; each is off when `None` or absent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LimitsConfig {
    /// Each principal's requests.
    pub principal: Option<Rate>,
    /// Each principal's calls of one tool: (tool name, rate).
    pub tools: Vec<(String, Rate)>,
}

/// One token bucket: a token every `period`, at most `burst` held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    pub period: Duration,
    pub burst: std::num::NonZeroU32,
}

/// Logging.
#[derive(Debug, Clone)]
pub struct LogConfig {
    pub json: bool,
    pub filter: String,
}

/// OpenTelemetry tracing, exported over OTLP/HTTP (protobuf).
#[derive(Debug, Clone)]
pub struct OtlpConfig {
    /// The collector's traces URL (`/v1/traces` added when none was given).
    pub endpoint: Uri,
    pub service_name: String,
    /// Share of new traces recorded, in `[0, 1]`.
    pub sample_ratio: f64,
    /// Most finished spans queued for export.
    pub max_queue: usize,
    pub export_timeout: Duration,
}

// === impl Config ===

impl Config {
    /// Loads the file (if any), the environment and the CLI flags, and validates the result.
    pub fn load(cli: &Cli) -> Result<Self, ConfigError> {
        Self::load_from(cli.config.as_deref(), &cli.overrides(), environment())
    }

    /// Loads with an explicit environment source, so tests need not touch the process env.
    pub fn load_from(
        file: Option<&Path>,
        overrides: &[(&'static str, String)],
        env: config::Environment,
    ) -> Result<Self, ConfigError> {
        let mut builder = config::Config::builder();
        if let Some(path) = file {
            let f = config::File::from(path).format(config::FileFormat::Toml).required(true);
            builder = builder.add_source(f);
        }
        builder = builder.add_source(env);
        for (key, value) in overrides {
            builder = builder.set_override(*key, value.as_str())?;
        }
        let raw: raw::RawConfig = builder.build()?.try_deserialize()?;
        validate(raw)
    }

    /// Parses a TOML document alone (used to check the shipped examples).
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        let source = config::File::from_str(text, config::FileFormat::Toml);
        let raw: raw::RawConfig = config::Config::builder().add_source(source).build()?.try_deserialize()?;
        validate(raw)
    }
}

/// The keys that hold a list of strings: their environment variables are comma-separated lists
/// (`MRTR_GATEWAY__STATE__KEYS=k1,k2`). Every other variable is one value, so a comma in a
/// string (a command line, a URL) stays. `tests/it/references/config.rs` fails on a list key
/// missing here.
const LIST_KEYS: [&str; 9] = [
    "state.keys",
    "front.allowed_origins",
    "upstream.env_passthrough",
    "upstream.roots",
    "mrtr.side_effecting",
    "tasks.long_tools",
    "auth.authorization_servers",
    "auth.scopes_supported",
    "auth.bearer_methods_supported",
];

/// The environment source: `MRTR_GATEWAY__SECTION__KEY`, lists comma-separated.
pub fn environment() -> config::Environment {
    let env = config::Environment::with_prefix(ENV_PREFIX)
        .prefix_separator("__")
        .separator("__")
        .try_parsing(true)
        .list_separator(",");
    LIST_KEYS.iter().fold(env, |env, key| env.with_list_parse_key(key))
}
