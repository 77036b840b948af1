//! Command-line flags. Each flag is also a config-file key and an environment variable
//! (`MRTR_GATEWAY__SECTION__KEY`); a flag wins over both. The flags are global, so they may
//! follow the `stdio` subcommand too.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use super::check::CheckArgs;

/// mrtr-gateway: serve 2026-07-28 MCP clients from a legacy MCP server, statelessly.
#[derive(Debug, Default, Parser)]
#[command(name = "mrtr-gateway", version, about)]
pub struct Cli {
    /// TOML configuration file.
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Legacy Streamable HTTP endpoint (`upstream.url`); absent: the embedded demo server.
    #[arg(long, global = true, value_name = "URL")]
    pub upstream: Option<String>,
    /// Event stream of a legacy HTTP+SSE server (2024-11-05) instead (`upstream.sse_url`),
    /// e.g. `http://127.0.0.1:3001/sse`.
    #[arg(long, global = true, value_name = "URL")]
    pub upstream_sse: Option<String>,
    /// A legacy stdio server to spawn instead (`upstream.command`), e.g. `"npx -y my-server"`;
    /// split on whitespace, with '…' and "…" quoting.
    #[arg(long, global = true, value_name = "COMMAND")]
    pub upstream_command: Option<String>,
    /// MCP listener address (`front.listen`).
    #[arg(long, global = true, value_name = "ADDR")]
    pub listen: Option<String>,
    /// Admin listener address for /metrics, /healthz, /readyz (`admin.listen`).
    #[arg(long, global = true, value_name = "ADDR")]
    pub admin_listen: Option<String>,
    /// File of state keys, one base64 32-byte key per line, `id:` optional (`state.key_file`).
    #[arg(long, global = true, value_name = "FILE")]
    pub state_key_file: Option<String>,
    /// URL other replicas reach this one's internal listener at (`cluster.advertise_url`),
    /// e.g. `http://$(POD_IP):9443`.
    #[arg(long, global = true, value_name = "URL")]
    pub advertise_url: Option<String>,
    /// Log format, `text` or `json` (`log.format`).
    #[arg(long, global = true, value_name = "FORMAT")]
    pub log_format: Option<String>,
    /// Log filter, e.g. `info` (`log.level`).
    #[arg(long, global = true, value_name = "FILTER")]
    pub log_level: Option<String>,
    /// Validate the configuration, print it (secrets redacted) and exit.
    #[arg(long, global = true)]
    pub check_config: bool,
    /// What to serve on; absent: the HTTP front (`front.listen`).
    #[command(subcommand)]
    pub mode: Option<Mode>,
}

/// The transport the gateway serves 2026-07-28 on, or another command than serving.
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum Mode {
    /// Speak 2026-07-28 over this process's stdin and stdout (newline-delimited JSON-RPC), for
    /// clients that launch servers; logs go to stderr. Every option applies.
    Stdio,
    /// Probe the admin listener's /healthz on loopback (`admin.listen`; a wildcard address is
    /// reached on loopback) and exit 0 when it answers 200, 1 otherwise: a health check for
    /// images without a shell.
    Healthcheck,
    /// Check a legacy server before deploying it: talk to it directly as a legacy client and
    /// through an embedded gateway as a 2026-07-28 client, and report what differs. Exits 1
    /// when something a 2026-07-28 client would see breaks.
    Check(CheckArgs),
}

impl Cli {
    /// The config keys this invocation overrides, as `(key, value)` pairs.
    pub fn overrides(&self) -> Vec<(&'static str, String)> {
        [
            ("upstream.url", &self.upstream),
            ("upstream.sse_url", &self.upstream_sse),
            ("upstream.command", &self.upstream_command),
            ("front.listen", &self.listen),
            ("admin.listen", &self.admin_listen),
            ("state.key_file", &self.state_key_file),
            ("log.format", &self.log_format),
            ("log.level", &self.log_level),
            ("cluster.advertise_url", &self.advertise_url),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.clone().map(|v| (k, v)))
        .collect()
    }
}
