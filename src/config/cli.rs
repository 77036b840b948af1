//! Command-line flags. Each flag but `--config` and `--check-config` is also a config-file key
//! and an environment variable (`MRTR_GATEWAY__SECTION__KEY`); a flag wins over both. The flags
//! are global, so they may follow the `stdio` subcommand too.
//!
//! [`KEY_FLAGS`] is the one table of which flag sets which key, and what applies when nothing
//! sets it: [`Cli::overrides`] reads it, and so does `--help`, which shows each such flag's
//! default (taken from `src/defaults.rs`, never restated) and its environment variable.

use std::path::PathBuf;

use clap::{Arg, CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::defaults;

/// Printed after the flags in `--help`.
const AFTER_HELP: &str =
    "Every configuration key, not only those above, can also be set in the environment: \
    the key upstream.pool_max_sessions is MRTR_GATEWAY__UPSTREAM__POOL_MAX_SESSIONS. A flag wins over \
    the environment, which wins over the configuration file.";

use super::check::CheckArgs;

/// mrtr-gateway: serve 2026-07-28 MCP clients from a legacy MCP server, statelessly.
#[derive(Debug, Default, Parser)]
#[command(name = "mrtr-gateway", version, about, after_help = AFTER_HELP)]
pub struct Cli {
    /// TOML configuration file; absent: the defaults, the environment and the flags only (no
    /// environment variable).
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Legacy Streamable HTTP endpoint (`upstream.url`).
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

/// A flag that sets one configuration key.
pub struct KeyFlag {
    /// The flag's argument id: its field in [`Cli`], `--` and dashes for underscores on the
    /// command line.
    pub id: &'static str,
    /// The configuration key it sets.
    pub key: &'static str,
    /// What applies when neither the flag, the environment nor the file sets the key.
    pub default: &'static str,
    value: fn(&Cli) -> &Option<String>,
}

/// Every flag that sets a configuration key.
pub const KEY_FLAGS: [KeyFlag; 9] = [
    KeyFlag {
        id: "upstream",
        key: "upstream.url",
        default: "none: the embedded demo server",
        value: |c| &c.upstream,
    },
    KeyFlag { id: "upstream_sse", key: "upstream.sse_url", default: "none", value: |c| &c.upstream_sse },
    KeyFlag {
        id: "upstream_command",
        key: "upstream.command",
        default: "none",
        value: |c| &c.upstream_command,
    },
    KeyFlag { id: "listen", key: "front.listen", default: defaults::LISTEN, value: |c| &c.listen },
    KeyFlag {
        id: "admin_listen",
        key: "admin.listen",
        default: defaults::ADMIN_LISTEN,
        value: |c| &c.admin_listen,
    },
    KeyFlag {
        id: "state_key_file",
        key: "state.key_file",
        default: "none: an ephemeral key",
        value: |c| &c.state_key_file,
    },
    KeyFlag { id: "log_format", key: "log.format", default: defaults::LOG_FORMAT, value: |c| &c.log_format },
    KeyFlag { id: "log_level", key: "log.level", default: defaults::LOG_LEVEL, value: |c| &c.log_level },
    KeyFlag {
        id: "advertise_url",
        key: "cluster.advertise_url",
        default: "none",
        value: |c| &c.advertise_url,
    },
];

// === impl KeyFlag ===

impl KeyFlag {
    /// The flag as typed, e.g. `--admin-listen`.
    pub fn flag(&self) -> String {
        format!("--{}", self.id.replace('_', "-"))
    }

    /// The environment variable that sets the same key.
    pub fn env(&self) -> String {
        super::env_name(self.key)
    }

    /// The flag's help line, with its default and environment variable.
    fn annotate(&self, arg: Arg) -> Arg {
        let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
        arg.help(format!("{help} [default: {}] [env: {}]", self.default, self.env()))
    }
}

/// The flag that sets the configuration key `key`, as typed (`--listen`), if one does.
pub fn flag_for(key: &str) -> Option<String> {
    KEY_FLAGS.iter().find(|f| f.key == key).map(KeyFlag::flag)
}

// === impl Cli ===

impl Cli {
    /// The command line's definition, each keyed flag's help showing its default and its
    /// environment variable.
    pub fn command_with_defaults() -> clap::Command {
        KEY_FLAGS.iter().fold(Self::command(), |cmd, flag| cmd.mut_arg(flag.id, |arg| flag.annotate(arg)))
    }

    /// Parses this process's arguments; on an error or `--help`, prints it and exits.
    pub fn parse_args() -> Self {
        let matches = Self::command_with_defaults().get_matches();
        Self::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
    }

    /// The config keys this invocation overrides, as `(key, value)` pairs.
    pub fn overrides(&self) -> Vec<(&'static str, String)> {
        KEY_FLAGS.iter().filter_map(|f| (f.value)(self).clone().map(|v| (f.key, v))).collect()
    }
}

#[cfg(test)]
mod tests;
