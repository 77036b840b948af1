//! The life of one child process after it started: read its stdout, route every message,
//! notice how it ends, fail the calls it leaves behind, and stop and reap it.
//!
//! One task per process owns the [`Child`]. It ends the process when asked (or when the last
//! session handle drops), when the process exits or closes stdout, and when a stdout line is
//! over the bound. Calls in flight then get a [`UpstreamError`] naming what happened (exit
//! status or signal), never the child's own output, which goes to the log. Stopping is bounded
//! at every step: close stdin, wait; SIGTERM to the process group, wait; SIGKILL, reap. The
//! group is signalled, not just the child, because some servers leave a helper running after
//! their stdin closes. A stdout line that is not JSON-RPC is logged and skipped: some servers
//! print a banner before they speak.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;

use rustix::process::{kill_process_group, Pid, Signal};
use tokio::process::{Child, ChildStdout};
use tokio::sync::watch;

use super::lines::{Line, LineReader};
use super::process::{Input, InputTx};
use crate::upstream::event::Origin;
use crate::upstream::router::Action;
use crate::upstream::state::{self, SessionState};
use crate::upstream::UpstreamError;

/// How long a child may take to exit after its stdin closed, then after SIGTERM, then to be
/// reaped after SIGKILL: together under the pool's bound on closing a session.
const STDIN_GRACE: Duration = Duration::from_millis(1500);
const TERM_GRACE: Duration = Duration::from_millis(1500);
const KILL_WAIT: Duration = Duration::from_secs(1);
/// How long a child that closed stdout may take to exit before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(1);
/// Longest excerpt of a skipped stdout line in the log.
const LOG_EXCERPT: usize = 200;

/// The handle on a process's task. Dropping it stops the process too.
pub(super) struct Supervisor {
    stop: watch::Sender<bool>,
    done: watch::Receiver<bool>,
}

/// What the task needs to run, besides stdout.
pub(super) struct Watched {
    pub(super) child: Child,
    pub(super) pid: u32,
    pub(super) state: Arc<SessionState>,
    pub(super) input: InputTx,
    pub(super) max_line: usize,
}

/// Why the read loop ended.
enum End {
    Stop,
    Eof,
    TooLong,
    ReadFailed(std::io::Error),
    Exited(std::io::Result<ExitStatus>),
}

/// What the calls left behind are told: the process died or was stopped (for breaking the
/// framing, say), and the gateway's own description of how.
enum Gone {
    Closed(String),
}

// === impl Supervisor ===

impl Supervisor {
    pub(super) fn start(watched: Watched, stdout: ChildStdout) -> Self {
        let (stop, stop_rx) = watch::channel(false);
        let (done_tx, done) = watch::channel(false);
        tokio::spawn(async move {
            supervise(watched, stdout, stop_rx).await;
            let _ = done_tx.send(true);
        });
        Self { stop, done }
    }

    /// Stops the process and waits until it is reaped and its calls failed.
    pub(super) async fn stop(&self) {
        let _ = self.stop.send(true);
        let mut done = self.done.clone();
        let _ = done.wait_for(|d| *d).await;
    }
}

// === impl Gone ===

impl Gone {
    fn error(&self) -> UpstreamError {
        match self {
            Self::Closed(what) => UpstreamError::ProcessEnded(what.clone()),
        }
    }

    fn describe(&self) -> &str {
        match self {
            Self::Closed(what) => what,
        }
    }
}

async fn supervise(mut w: Watched, stdout: ChildStdout, mut stop: watch::Receiver<bool>) {
    let mut lines = LineReader::new(stdout, w.max_line);
    let end = read_until_end(&mut w, &mut lines, &mut stop).await;
    drop(lines);
    let gone = finish(&mut w, end).await;
    // Whatever it left running in its group goes too.
    signal_group(w.pid, Signal::KILL);
    tracing::info!(pid = w.pid, reason = gone.describe(), "upstream process gone");
    w.state.fail_all(|| gone.error()).await;
}

async fn read_until_end(
    w: &mut Watched,
    lines: &mut LineReader<ChildStdout>,
    stop: &mut watch::Receiver<bool>,
) -> End {
    loop {
        tokio::select! {
            // Stopping wins over a chatty child; an exit is acted on only while stdout is quiet,
            // so what the child wrote before it exited is still read.
            biased;
            _ = stop.changed() => return End::Stop,
            line = lines.next() => match line {
                Ok(Some(Line::Text(text))) => on_line(&w.state, &w.input, w.pid, &text).await,
                Ok(Some(Line::TooLong)) => return End::TooLong,
                Ok(None) => return End::Eof,
                Err(e) => return End::ReadFailed(e),
            },
            status = w.child.wait() => return End::Exited(status),
        }
    }
}

/// Routes one stdout line: a message for a call, an answer to write back, or junk to skip.
async fn on_line(state: &SessionState, input: &InputTx, pid: u32, line: &[u8]) {
    let text = String::from_utf8_lossy(line);
    let text = text.trim();
    if text.is_empty() {
        return;
    }
    match state.route(text, Origin::Unattributed) {
        Err(e) => {
            let excerpt: String = text.chars().take(LOG_EXCERPT).collect();
            tracing::warn!(pid, error = %e, line = %excerpt, "upstream process wrote a line that is not JSON-RPC; skipped");
        }
        Ok((action, _)) => {
            if let Some(Action::Answer(id, outcome)) = state::deliver(action).await {
                match state::response_bytes(&id, outcome) {
                    Ok(bytes) => {
                        let _ = input.send(Input::Line(bytes)).await;
                    }
                    Err(e) => tracing::warn!(pid, error = %e, "could not answer an upstream request"),
                }
            }
        }
    }
}

/// Makes sure the process is gone and reaped; says what ended it.
async fn finish(w: &mut Watched, end: End) -> Gone {
    match end {
        End::Stop => {
            shut_down(w).await;
            Gone::Closed("the upstream session was closed".to_owned())
        }
        End::Exited(Ok(status)) => Gone::Closed(exit_description(status)),
        End::Exited(Err(e)) => {
            tracing::warn!(pid = w.pid, error = %e, "could not wait for the upstream process");
            kill(w).await;
            Gone::Closed("the upstream process could not be watched and was stopped".to_owned())
        }
        End::ReadFailed(e) => {
            tracing::warn!(pid = w.pid, error = %e, "reading the upstream process's output failed");
            kill(w).await;
            Gone::Closed("the upstream process's output broke and it was stopped".to_owned())
        }
        End::Eof => match wait_for(&mut w.child, EXIT_GRACE).await {
            Some(status) => Gone::Closed(exit_description(status)),
            None => {
                kill(w).await;
                Gone::Closed("the upstream process closed its output and was stopped".to_owned())
            }
        },
        End::TooLong => {
            tracing::error!(
                pid = w.pid,
                max_line_bytes = w.max_line,
                "upstream process wrote a stdout line over the size limit: killing it"
            );
            kill(w).await;
            Gone::Closed(format!(
                "the upstream process wrote a message over {} bytes and was stopped",
                w.max_line
            ))
        }
    }
}

/// Close stdin, wait; SIGTERM the group, wait; SIGKILL, reap.
async fn shut_down(w: &mut Watched) {
    let _ = tokio::time::timeout(STDIN_GRACE, w.input.send(Input::Close)).await;
    if wait_for(&mut w.child, STDIN_GRACE).await.is_some() {
        return;
    }
    tracing::info!(pid = w.pid, "upstream process still running after stdin closed: SIGTERM");
    signal_group(w.pid, Signal::TERM);
    if wait_for(&mut w.child, TERM_GRACE).await.is_some() {
        return;
    }
    tracing::warn!(pid = w.pid, "upstream process ignored SIGTERM: SIGKILL");
    kill(w).await;
}

/// SIGKILL to the group and the child, then reap it.
async fn kill(w: &mut Watched) {
    signal_group(w.pid, Signal::KILL);
    let _ = w.child.start_kill();
    if wait_for(&mut w.child, KILL_WAIT).await.is_none() {
        // Dropping the child leaves it to the runtime's orphan reaper.
        tracing::warn!(pid = w.pid, "upstream process not reaped after SIGKILL");
    }
}

async fn wait_for(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    tokio::time::timeout(limit, child.wait()).await.ok().and_then(Result::ok)
}

/// Signals the child's process group (its pid: it was started as the group leader).
fn signal_group(pid: u32, signal: Signal) {
    let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) else { return };
    // ESRCH: the group is already empty.
    let _ = kill_process_group(pid, signal);
}

/// "exited with status 3", "was killed by signal 9 (SIGKILL)": no output of the child.
fn exit_description(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("the upstream process exited with status {code}"),
        (None, Some(sig)) => format!("the upstream process was killed by signal {sig}{}", signal_name(sig)),
        (None, None) => "the upstream process ended".to_owned(),
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        1 => " (SIGHUP)",
        2 => " (SIGINT)",
        6 => " (SIGABRT)",
        9 => " (SIGKILL)",
        11 => " (SIGSEGV)",
        13 => " (SIGPIPE)",
        15 => " (SIGTERM)",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logging::captured::{capture, Captured, Capturing};
    use crate::upstream::session::Spare;
    use crate::upstream::tests::spare_of;

    #[test]
    fn exits_are_described_by_status_or_signal() {
        assert_eq!(
            exit_description(ExitStatus::from_raw(3 << 8)),
            "the upstream process exited with status 3"
        );
        assert_eq!(
            exit_description(ExitStatus::from_raw(9)),
            "the upstream process was killed by signal 9 (SIGKILL)"
        );
    }

    #[test]
    fn the_usual_signals_are_named_and_others_shown_by_number_only() {
        let named = [(1, "SIGHUP"), (2, "SIGINT"), (6, "SIGABRT"), (9, "SIGKILL"), (11, "SIGSEGV")];
        for (sig, name) in named.into_iter().chain([(13, "SIGPIPE"), (15, "SIGTERM")]) {
            assert_eq!(signal_name(sig), format!(" ({name})"));
        }
        assert_eq!(signal_name(10), "");
    }

    /// A process running `script` in `sh`, supervised; the log from its start on.
    fn supervised(script: &str) -> (Spare, Captured, Capturing) {
        let (captured, guard) = capture(tracing::Level::INFO);
        (spare_of("/bin/sh", &["-c", script]), captured, guard)
    }

    /// Waits, at most 5 s, until the supervisor logged that the process went.
    async fn gone(captured: &Captured) {
        let logged = tokio::time::timeout(Duration::from_secs(5), async {
            while !captured.text().contains("upstream process gone") {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        });
        assert!(logged.await.is_ok(), "{}", captured.text());
    }

    /// The log line of a process that went says how, in the gateway's words.
    #[tokio::test]
    async fn a_process_that_went_is_logged_with_how() {
        let (spare, captured, _guard) = supervised("exit 3");
        gone(&captured).await;
        let text = captured.text();
        assert!(text.contains("reason=\"the upstream process exited with status 3\""), "{text}");
        assert!(text.contains(&format!("pid={}", spare.pid())), "{text}");
    }

    /// What a process left running in its group goes with it.
    #[tokio::test]
    async fn what_a_process_left_in_its_group_goes_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pid");
        let (_spare, captured, _guard) =
            supervised(&format!("sleep 30 & echo $! > {}; exit 3", file.display()));
        gone(&captured).await;
        let pid = std::fs::read_to_string(&file).unwrap();
        // Killed, though no parent reaps it here: gone, or a zombie.
        let stat = format!("/proc/{}/stat", pid.trim());
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while std::fs::read_to_string(&stat).is_ok_and(|s| !s.contains(") Z ")) {
            assert!(std::time::Instant::now() < deadline, "the process's child {pid} still runs");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}
