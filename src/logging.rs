//! Logging setup: `tracing` with text (default) or JSON lines, filtered by `log.level` (or
//! `RUST_LOG` when set). Logs never carry secrets or state contents; see the request log line
//! in `front::service`. The HTTP gateway logs to stdout; the stdio front logs to stderr, because
//! its stdout carries nothing but JSON-RPC messages. Text lines are coloured only on a terminal
//! (and not when `NO_COLOR` is set): a file or a log collector gets them plain.

use std::error::Error as StdError;
use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::config::LogConfig;

/// Where log lines go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sink {
    Stdout,
    Stderr,
}

/// Installs the global subscriber; later calls are ignored (tests may start several gateways).
pub fn init(cfg: &LogConfig, sink: Sink) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(&cfg.filter));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_target(false);
    let builder = builder.with_ansi(!cfg.json && colours(sink));
    let _ = match (sink, cfg.json) {
        (Sink::Stdout, true) => builder.json().try_init(),
        (Sink::Stdout, false) => builder.try_init(),
        (Sink::Stderr, true) => builder.with_writer(std::io::stderr).json().try_init(),
        (Sink::Stderr, false) => builder.with_writer(std::io::stderr).try_init(),
    };
}

/// Whether text lines to `sink` get colour codes: only when a terminal shows them, and
/// `NO_COLOR` (no-color.org) is unset or empty.
fn colours(sink: Sink) -> bool {
    let terminal = match sink {
        Sink::Stdout => std::io::stdout().is_terminal(),
        Sink::Stderr => std::io::stderr().is_terminal(),
    };
    terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// An error and every source behind it, joined by `": "`: the text of a log line's `error`
/// field. May hold upstream-supplied text; never send it to a client.
pub fn chain(error: &(dyn StdError + 'static)) -> String {
    let mut out = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        out.push_str(": ");
        out.push_str(&e.to_string());
        source = e.source();
    }
    out
}

/// The first 8 hex digits of the SHA-256 of a session id: enough to tell a session's log lines
/// and spans apart, nothing to use it with. Log lines and exported spans carry this, never the
/// id itself.
pub fn fingerprint(id: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(id)[..4].iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
pub(crate) mod captured;
