//! Starting one child process and the two pipes the gateway only writes or only logs.
//!
//! The child gets an empty environment plus the configured variables and the passed-through
//! names (by default `PATH` and `HOME`): the gateway's own environment holds state keys, JWT
//! secrets and `MRTR_GATEWAY__*` settings that a legacy server must never see. It runs in a
//! process group of its own, so that stopping it also stops whatever it started. Its stdin is
//! written by one task from a bounded queue, in order; each write is bounded in time, so a
//! child that stops reading cannot wedge its session. Every stderr line goes to the log with
//! the child's pid.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};
use tokio::sync::mpsc;

use super::lines::{Line, LineReader};
use super::tail::StderrTail;
use crate::upstream::state::SessionState;
use crate::upstream::{StdioSettings, UpstreamError};

/// Messages queued for stdin before writers wait.
const INPUT_QUEUE: usize = 64;
/// Longest stderr line logged whole.
const MAX_STDERR_LINE: usize = 16 * 1024;

/// What the stdin task is asked to do.
pub(super) enum Input {
    /// Write one message (without its newline).
    Line(Vec<u8>),
    /// Close stdin: the child's signal to exit.
    Close,
}

pub(super) type InputTx = mpsc::Sender<Input>;

/// A freshly started child and its pipes.
pub(super) struct Spawned {
    pub(super) child: Child,
    pub(super) pid: u32,
    pub(super) stdin: ChildStdin,
    pub(super) stdout: ChildStdout,
    pub(super) stderr: ChildStderr,
}

/// Starts `settings`' command with piped stdio in a new process group.
pub(super) fn spawn(settings: &StdioSettings) -> Result<Spawned, UpstreamError> {
    let mut cmd = Command::new(&settings.program);
    cmd.args(&settings.args)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    for name in &settings.env_passthrough {
        if let Some(value) = std::env::var_os(name) {
            cmd.env(name, value);
        }
    }
    for (name, value) in &settings.env {
        cmd.env(name, value);
    }
    if let Some(dir) = &settings.cwd {
        cmd.current_dir(dir);
    }
    let mut child = cmd.spawn().map_err(UpstreamError::Spawn)?;
    let pipes = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let (Some(stdin), Some(stdout), Some(stderr)) = pipes else {
        return Err(UpstreamError::Spawn(std::io::Error::other("the child's pipes are missing")));
    };
    let pid = child.id().unwrap_or_default();
    Ok(Spawned { child, pid, stdin, stdout, stderr })
}

/// Starts the stdin task; dropping every sender, or [`Input::Close`], closes stdin.
pub(super) fn spawn_writer(
    stdin: ChildStdin,
    state: Arc<SessionState>,
    pid: u32,
    timeout: Duration,
) -> InputTx {
    let (tx, rx) = mpsc::channel(INPUT_QUEUE);
    tokio::spawn(write_input(stdin, rx, state, pid, timeout));
    tx
}

async fn write_input(
    mut stdin: ChildStdin,
    mut rx: mpsc::Receiver<Input>,
    state: Arc<SessionState>,
    pid: u32,
    timeout: Duration,
) {
    while let Some(Input::Line(mut line)) = rx.recv().await {
        line.push(b'\n');
        let written = async {
            stdin.write_all(&line).await?;
            stdin.flush().await
        };
        match tokio::time::timeout(timeout, written).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::debug!(pid, error = %e, "writing to the upstream process failed");
                state.mark_unhealthy();
                return;
            }
            Err(_) => {
                tracing::warn!(pid, ?timeout, "the upstream process stopped reading its input");
                state.mark_unhealthy();
                return;
            }
        }
    }
}

/// Logs every stderr line of the child until it closes stderr, keeping the last ones in `tail`
/// when there is one.
pub(super) fn spawn_stderr_log(stderr: ChildStderr, pid: u32, tail: Option<Arc<StderrTail>>) {
    tokio::spawn(async move {
        let mut lines = LineReader::new(stderr, MAX_STDERR_LINE);
        loop {
            match lines.next().await {
                Ok(Some(Line::Text(text))) => {
                    let text = String::from_utf8_lossy(&text);
                    tracing::info!(pid, line = %text.trim_end(), "upstream stderr");
                    if let Some(tail) = &tail {
                        tail.push(text.trim_end());
                    }
                }
                Ok(Some(Line::TooLong)) => {
                    tracing::info!(pid, max = MAX_STDERR_LINE, "upstream stderr line too long; not logged");
                }
                Ok(None) | Err(_) => break,
            }
        }
        if let Some(tail) = &tail {
            tail.close();
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stderr line is kept up to 16 KiB (then clipped in the tail); a longer one is dropped
    /// whole, and the lines after it are read as before.
    #[tokio::test]
    async fn stderr_lines_are_kept_up_to_the_bound_and_longer_ones_dropped() {
        let script = "head -c 2000 /dev/zero | tr '\\0' a >&2; echo >&2; \
                      head -c 17000 /dev/zero | tr '\\0' b >&2; echo >&2; echo done >&2";
        let settings = StdioSettings::new("/bin/sh", vec!["-c".to_owned(), script.to_owned()]);
        let spawned = spawn(&settings).unwrap();
        let tail = Arc::new(StderrTail::default());
        spawn_stderr_log(spawned.stderr, spawned.pid, Some(tail.clone()));
        tail.settle(Duration::from_secs(10)).await;
        let lines = tail.lines();
        assert_eq!(lines.len(), 2, "{:?}", lines.iter().map(|l| l.len()).collect::<Vec<_>>());
        assert!(lines[0].starts_with("aaaa"), "the 2,000-byte line is kept");
        assert_eq!(lines[1], "done", "the 17,000-byte line is dropped, and what follows read");
    }
}
