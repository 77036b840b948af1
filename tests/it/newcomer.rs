//! What a newcomer meets on the first run, on the real binary and the real test script: a URL
//! without a scheme is refused saying so, a busy port is reported once with the way to move it,
//! the readiness probe names the upstream it cannot reach, logs to a pipe carry no colour codes,
//! `--help` shows each flag's default and environment variable, and `tests/run.sh` without
//! redis-server says what to install instead of running a root-only step.

use std::net::TcpListener;
use std::process::{Output, Stdio};

use mrtr_gateway::config::cli::KEY_FLAGS;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use crate::common::fakebin::{text, FakeBin};
use crate::common::process::free_port;
use crate::common::{bounded_for, HarnessError, TestResult, PROCESS_START_WAIT};

const BINARY: &str = env!("CARGO_BIN_EXE_mrtr-gateway");

/// The binary run with `args` to its end, within the start bound.
async fn run(args: &[&str]) -> TestResult<Output> {
    let child = Command::new(BINARY)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    Ok(bounded_for(PROCESS_START_WAIT, "the binary to exit", child.wait_with_output()).await??)
}

#[tokio::test]
async fn an_upstream_without_a_scheme_is_refused_naming_the_value_and_the_scheme() -> TestResult {
    let out = run(&["--upstream", "localhost:3901/mcp", "--check-config"]).await?;
    assert_eq!(out.status.code(), Some(64));
    assert_eq!(
        text(&out.stderr),
        "mrtr-gateway: invalid configuration: upstream.url: \"localhost:3901/mcp\" has no scheme: \
         write the URL with http:// or https://, e.g. \"http://localhost:3901/mcp\"\n"
    );
    Ok(())
}

/// The line the binary prints on stderr, and that nothing on stdout said it again.
async fn busy(flag: &str, listener: &str, (key, env): (&str, &str)) -> TestResult {
    let taken = TcpListener::bind("127.0.0.1:0")?;
    let addr = taken.local_addr()?.to_string();
    let mut args = vec!["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"];
    let at = args.iter().position(|a| *a == flag).ok_or_else(|| HarnessError::Unexpected(flag.into()))?;
    args[at + 1] = &addr;
    let out = run(&args).await?;
    assert_eq!(out.status.code(), Some(70));
    assert_eq!(
        text(&out.stderr),
        format!(
            "mrtr-gateway: cannot listen on {addr} for the {listener}: Address already in use (os error 98); \
             another process is listening there: choose another address with {flag}, the configuration key \
             {key} or {env}\n"
        )
    );
    let stdout = text(&out.stdout);
    assert!(!stdout.contains(&addr), "reported once, on stderr; stdout: {stdout}");
    Ok(())
}

#[tokio::test]
async fn a_busy_port_is_reported_once_with_how_to_move_it() -> TestResult {
    busy("--listen", "MCP front", ("front.listen", "MRTR_GATEWAY__FRONT__LISTEN")).await?;
    busy("--admin-listen", "admin listener", ("admin.listen", "MRTR_GATEWAY__ADMIN__LISTEN")).await
}

/// Starts the binary with `upstream` (flags) and returns its first "upstream not reachable
/// yet" log line, read from a pipe.
async fn unreachable_line(upstream: &[&str]) -> TestResult<String> {
    let mut child = Command::new(BINARY)
        .args(upstream)
        .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .env_remove("NO_COLOR")
        .kill_on_drop(true)
        .spawn()?;
    let stdout = child.stdout.take().ok_or_else(|| HarnessError::Unexpected("no stdout".into()))?;
    let mut lines = BufReader::new(stdout).lines();
    let mut seen = String::new();
    let found = bounded_for(PROCESS_START_WAIT, "the readiness probe's log line", async {
        while let Some(line) = lines.next_line().await? {
            seen.push_str(&line);
            seen.push('\n');
            if line.contains("upstream not reachable yet") {
                return Ok(line);
            }
        }
        Err(HarnessError::Unexpected(format!("stdout ended without the line: {seen}")))
    })
    .await?;
    child.kill().await?;
    let line = found?;
    assert!(!seen.contains('\x1b'), "no colour codes in logs written to a pipe: {seen:?}");
    Ok(line)
}

#[tokio::test]
async fn the_readiness_probe_names_the_upstream_in_plain_text() -> TestResult {
    let closed = free_port()?;
    let url = format!("http://{closed}/mcp");
    let line = unreachable_line(&["--upstream", &url]).await?;
    assert!(line.contains(&format!(" upstream={url} ")), "{line}");
    assert!(line.contains("error=cannot connect to the upstream: "), "{line}");
    let line = unreachable_line(&["--upstream-command", "mrtr-no-such-program --token=secret"]).await?;
    assert!(line.contains(" upstream=command mrtr-no-such-program "), "{line}");
    assert!(!line.contains("secret"), "the arguments are not logged: {line}");
    Ok(())
}

#[tokio::test]
async fn help_shows_each_flags_default_and_environment_variable() -> TestResult {
    let out = run(&["--help"]).await?;
    assert!(out.status.success());
    let help = text(&out.stdout);
    assert!(help.contains("[default: 127.0.0.1:8080] [env: MRTR_GATEWAY__FRONT__LISTEN]"), "{help}");
    assert!(help.contains("[default: 127.0.0.1:9090] [env: MRTR_GATEWAY__ADMIN__LISTEN]"), "{help}");
    assert!(help.contains("[default: text] [env: MRTR_GATEWAY__LOG__FORMAT]"), "{help}");
    // The subcommand's help too: the flags are global.
    let stdio = text(&run(&["stdio", "--help"]).await?.stdout);
    for flag in &KEY_FLAGS {
        let line = help.lines().find(|l| l.trim_start().starts_with(&format!("{} ", flag.flag())));
        let line = line.ok_or_else(|| HarnessError::Unexpected(format!("{} not in {help}", flag.flag())))?;
        let tail = format!("[default: {}] [env: {}]", flag.default, flag.env());
        assert!(line.ends_with(&tail), "{line}");
        assert!(stdio.contains(&tail) || flag.id == "upstream_sse", "stdio --help: {}: {stdio}", flag.flag());
    }
    Ok(())
}

/// A `PATH` for `tests/run.sh` with no redis-server and no cargo (the script must stop before
/// it needs either): `dirname` and `cat`, an `id` that says `uid`, and, when asked, an `apt-get`
/// that records its arguments.
fn without_redis(uid: u32, apt_get: bool) -> TestResult<FakeBin> {
    let bin = FakeBin::new()?.real(&["dirname", "cat"])?.script("id", &format!("echo {uid}"))?;
    if !apt_get {
        return Ok(bin);
    }
    let log = bin.dir().join("apt-get.log");
    bin.script("apt-get", &format!("echo \"$@\" >> {}", log.display()))
}

#[tokio::test]
async fn the_test_script_without_redis_says_what_to_install_and_runs_nothing_as_root() -> TestResult {
    let bin = without_redis(1000, true)?;
    let out = bin.run("tests/run.sh", &[], &[]).await?;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "tests/run.sh: redis-server is not installed, and the single-use state tests start one.\n\
         Install it as root, then run tests/run.sh again:\n    \
         sudo apt-get install redis-server    (Debian, Ubuntu)\n\
         or put any redis-server binary on PATH. This script does not run sudo itself.\n"
    );
    assert_eq!(text(&out.stdout), "", "nothing ran");
    assert!(!bin.dir().join("apt-get.log").exists(), "apt-get was not run as a normal user");

    let out = without_redis(0, false)?.run("tests/run.sh", &[], &[]).await?;
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("There is no apt-get here: install redis-server with"), "{out:?}");

    // As root with apt-get: it says what it installs before it does, and stops when that
    // brought no redis-server (this apt-get installs nothing).
    let bin = without_redis(0, true)?;
    let out = bin.run("tests/run.sh", &[], &[]).await?;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stdout),
        "== redis-server is missing: installing the Debian package redis-server with apt-get (running as root)\n"
    );
    let apt = std::fs::read_to_string(bin.dir().join("apt-get.log"))?;
    assert_eq!(apt, "update -qq\ninstall -y -qq redis-server\n");
    assert!(text(&out.stderr).ends_with("yet there is no redis-server on PATH\n"), "{out:?}");
    Ok(())
}
