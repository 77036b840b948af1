//! The arguments of `mrtr-gateway check`, the migration readiness report (run by
//! `crate::check`): which server to check, the calls to try, and where the JSON report goes.
//! They sit here, beside the other flags, because the command line is parsed once, in
//! [`super::Cli`]; the server is named by the global `--upstream`, `--upstream-sse` or
//! `--upstream-command` flags, or by a command after `--`.

use std::path::PathBuf;

use clap::Args;

/// `mrtr-gateway check [--calls FILE] [--json [PATH]] [-- COMMAND ARGS...]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Args)]
pub struct CheckArgs {
    /// Tool calls to try, with canned answers for their questions (JSON; see the book's
    /// "The check command" chapter).
    #[arg(long, value_name = "FILE")]
    pub calls: Option<PathBuf>,
    /// Write the report as JSON: to PATH, or with no PATH (or `-`) to stdout instead of the
    /// readable report.
    #[arg(long, value_name = "PATH", num_args = 0..=1, default_missing_value = "-")]
    pub json: Option<PathBuf>,
    /// A legacy stdio server to start and check, as its argument list (no shell): everything
    /// after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

impl CheckArgs {
    /// Where the JSON report goes: `None` for no JSON, `Some(None)` for stdout.
    pub fn json_path(&self) -> Option<Option<&std::path::Path>> {
        self.json.as_deref().map(|p| (p.as_os_str() != "-").then_some(p))
    }
}
