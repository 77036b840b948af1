//! Progress on stderr while the check waits (a server starting, a list, a call): on a terminal
//! one line redrawn with the time spent, elsewhere (a CI log, a pipe) one plain line per step,
//! so a log never fills with redraws. The report itself goes to stdout.

use std::future::Future;
use std::io::{IsTerminal, Write};
use std::time::Duration;

use tokio::time::Instant;

/// How often a terminal's line is redrawn.
const REDRAW: Duration = Duration::from_millis(100);
const SPINNER: [char; 4] = ['|', '/', '-', '\\'];

/// Where progress goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// A terminal: a redrawn line.
    Terminal,
    /// Anything else: plain lines.
    Lines,
    /// Nowhere (tests, library callers).
    Quiet,
}

// === impl Progress ===

impl Progress {
    /// Progress on this process's stderr, redrawn when it is a terminal.
    pub fn stderr() -> Self {
        if std::io::stderr().is_terminal() {
            Self::Terminal
        } else {
            Self::Lines
        }
    }

    /// Runs `step`, showing `what` while it runs.
    pub async fn step<T>(self, what: &str, step: impl Future<Output = T>) -> T {
        let started = Instant::now();
        let out = match self {
            Self::Quiet => return step.await,
            Self::Lines => {
                eprintln!("check: {what}…");
                step.await
            }
            Self::Terminal => redrawn(what, started, step).await,
        };
        if self == Self::Terminal {
            eprintln!("\r\x1b[2K{what}: done in {:.1}s", started.elapsed().as_secs_f64());
        }
        out
    }
}

async fn redrawn<T>(what: &str, started: Instant, step: impl Future<Output = T>) -> T {
    tokio::pin!(step);
    let mut ticks = tokio::time::interval(REDRAW);
    let mut frame = 0;
    loop {
        // Biased: a finished step is never held back by a redraw.
        tokio::select! {
            biased;
            out = &mut step => return out,
            _ = ticks.tick() => {
                let spin = SPINNER[frame % SPINNER.len()];
                eprint!("\r\x1b[2K{spin} {what}… {:.1}s", started.elapsed().as_secs_f64());
                let _ = std::io::stderr().flush();
                frame += 1;
            }
        }
    }
}
