//! Logging setup: `tracing` with text (default) or JSON lines, filtered by `log.level` (or
//! `RUST_LOG` when set). Logs never carry secrets or state contents; see the request log line
//! in `front::service`.

use tracing_subscriber::EnvFilter;

use crate::config::LogConfig;

/// Installs the global subscriber; later calls are ignored (tests may start several gateways).
pub fn init(cfg: &LogConfig) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(&cfg.filter));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_target(false);
    let _ = if cfg.json { builder.json().try_init() } else { builder.try_init() };
}
