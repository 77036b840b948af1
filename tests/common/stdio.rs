//! A gateway in front of the scripted stdio legacy server (`tests/fixtures/stdio_server.py`,
//! run with `python3`), configured from TOML as an operator would, and the process-level
//! counts (pipes, child processes) that show the gateway leaks neither.
//!
//! Stdio tests (and the stdio front's, `stdio_front`) hold [`serial`] for their whole run: they
//! are the only tests that create pipes and child processes, so with it held the counts of this
//! test process are theirs alone.

use std::path::Path;

use mrtr_gateway::app::Gateway;
use mrtr_gateway::config::Config;
use tokio::sync::{Mutex, MutexGuard};

use super::harness::test_key;
use super::{eventually, Client, TestResult};

/// The fixture server, relative to the crate root.
const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/stdio_server.py");

static SERIAL: Mutex<()> = Mutex::const_new(());

/// A gateway spawning the fixture, and a client of it.
pub(crate) struct StdioGateway {
    pub(crate) gateway: Gateway,
    pub(crate) client: Client,
}

/// Takes the stdio tests' lock.
pub(crate) async fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().await
}

/// The `[upstream]` lines that run the fixture with `flags`.
pub(crate) fn fixture_command(flags: &[&str]) -> String {
    let mut argv = vec!["python3", FIXTURE];
    argv.extend_from_slice(flags);
    format!("command = {argv:?}")
}

/// The fixture with `flags` as one `--upstream-command` line (the gateway splits it on spaces).
pub(crate) fn fixture_command_line(flags: &[&str]) -> String {
    let mut argv = vec!["python3", FIXTURE];
    argv.extend_from_slice(flags);
    argv.join(" ")
}

// === impl StdioGateway ===

impl StdioGateway {
    /// Starts a gateway whose upstream is the fixture run with `flags`, plus extra `[upstream]`
    /// and `[mrtr]` lines, and waits until it is ready.
    pub(crate) async fn start(flags: &[&str], upstream: &[&str], mrtr: &[&str]) -> TestResult<Self> {
        Self::start_with(flags, upstream, mrtr, "").await
    }

    /// [`StdioGateway::start`], with `sections` (whole TOML sections, e.g. `[elicitation]`)
    /// added to the configuration.
    pub(crate) async fn start_with(
        flags: &[&str],
        upstream: &[&str],
        mrtr: &[&str],
        sections: &str,
    ) -> TestResult<Self> {
        let toml = format!(
            "[front]\nlisten = \"127.0.0.1:0\"\n[admin]\nlisten = \"127.0.0.1:0\"\n[log]\nlevel = \"warn\"\n\
             [state]\nkeys = [{:?}]\n[mrtr]\ngather_window_ms = 200\n{}\n[upstream]\n{}\n{}\n{sections}\n",
            test_key("k1", 0x11),
            mrtr.join("\n"),
            fixture_command(flags),
            upstream.join("\n"),
        );
        let gateway = Gateway::start(Config::from_toml(&toml)?).await?;
        eventually("the stdio upstream to answer initialize", || gateway.ready.is_ready()).await?;
        let client = Client::new(gateway.url("/mcp"));
        Ok(Self { gateway, client })
    }

    /// Stops the gateway, which stops its child processes.
    pub(crate) async fn stop(self) -> TestResult {
        super::bounded("the gateway to drain", self.gateway.shutdown()).await
    }
}

/// Open pipe descriptors of this process (the ends of child stdio).
pub(crate) fn open_pipes() -> usize {
    let Ok(fds) = std::fs::read_dir("/proc/self/fd") else { return 0 };
    fds.filter_map(Result::ok)
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter(|target| target.to_string_lossy().starts_with("pipe:"))
        .count()
}

/// Child processes of this process running Python, zombies included.
pub(crate) fn python_children() -> usize {
    let me = std::process::id().to_string();
    let Ok(procs) = std::fs::read_dir("/proc") else { return 0 };
    procs
        .filter_map(Result::ok)
        .filter_map(|p| std::fs::read_to_string(p.path().join("stat")).ok())
        .filter(|stat| is_python_child_of(stat, &me))
        .count()
}

/// `pid (comm) state ppid …`: the comm may hold spaces, so split after its parenthesis.
fn is_python_child_of(stat: &str, parent: &str) -> bool {
    let Some((head, tail)) = stat.rsplit_once(')') else { return false };
    let ppid = tail.split_whitespace().nth(1);
    head.contains("(python") && ppid == Some(parent)
}

/// True while a process with this pid exists (a zombie counts).
pub(crate) fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}
