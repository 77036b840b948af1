//! The last lines a child process wrote on stderr, kept beside the log for whoever started it
//! and must explain a failed start (`mrtr-gateway check` names them when a server cannot
//! start). Bounded: [`MAX_LINES`] lines of at most [`MAX_LINE_CHARS`] characters each.

use std::collections::VecDeque;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::watch;

/// Lines kept; older ones are dropped.
const MAX_LINES: usize = 20;
/// Characters kept of one line.
const MAX_LINE_CHARS: usize = 400;

/// A child's stderr, its last lines.
#[derive(Debug)]
pub struct StderrTail {
    lines: Mutex<VecDeque<String>>,
    /// True once the child closed its stderr (it exited, most likely).
    closed: watch::Sender<bool>,
}

impl Default for StderrTail {
    fn default() -> Self {
        Self { lines: Mutex::default(), closed: watch::Sender::new(false) }
    }
}

// === impl StderrTail ===

impl StderrTail {
    /// The lines kept, oldest first.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().iter().cloned().collect()
    }

    /// Waits until the child closed its stderr, at most `wait`: a child that failed has
    /// usually written why just before it exited, and that line may still be in the pipe.
    pub async fn settle(&self, wait: Duration) {
        let mut closed = self.closed.subscribe();
        let _ = tokio::time::timeout(wait, closed.wait_for(|c| *c)).await;
    }

    pub(super) fn push(&self, line: &str) {
        let line: String = line.chars().take(MAX_LINE_CHARS).collect();
        let mut lines = self.lines.lock();
        if lines.len() == MAX_LINES {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    pub(super) fn close(&self) {
        self.closed.send_replace(true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn it_keeps_the_last_lines_clipped_and_knows_when_stderr_closed() {
        let tail = StderrTail::default();
        for i in 0..MAX_LINES + 3 {
            tail.push(&format!("line {i}"));
        }
        tail.push(&"x".repeat(MAX_LINE_CHARS + 10));
        let lines = tail.lines();
        assert_eq!(lines.len(), MAX_LINES);
        assert_eq!(lines[0], "line 4");
        assert_eq!(lines[MAX_LINES - 1].len(), MAX_LINE_CHARS);
        let waited = tokio::time::Instant::now();
        tail.close();
        tail.settle(Duration::from_secs(5)).await;
        assert!(waited.elapsed() < Duration::from_secs(1), "a closed stderr settles at once");
    }

    /// A stderr still open is waited for, up to the bound, and no longer once it closes.
    #[tokio::test(start_paused = true)]
    async fn settling_waits_for_stderr_to_close_at_most_the_bound() {
        let tail = std::sync::Arc::new(StderrTail::default());
        let start = tokio::time::Instant::now();
        tail.settle(Duration::from_secs(2)).await;
        assert_eq!(start.elapsed(), Duration::from_secs(2), "an open stderr is waited for");
        let closer = tail.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            closer.close();
        });
        let start = tokio::time::Instant::now();
        tail.settle(Duration::from_secs(2)).await;
        assert_eq!(start.elapsed(), Duration::from_millis(300), "until it closes");
    }
}
