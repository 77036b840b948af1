//! Reloading the state key ring while the gateway serves.
//!
//! A mounted Kubernetes Secret changes by a symlink swap (`..data` is repointed at a new
//! directory), which inotify-style watchers on the file itself miss or report as a deletion.
//! So one task polls: every `state.key_file_poll_ms` it reads the path (following the links,
//! as any open does) and compares the SHA-256 of its bytes with the last content it saw. A
//! SIGHUP, or [`ReloadHandle::reload`], asks the same task to read it at once, so reloads never
//! race each other.
//!
//! New content is derived into a whole new ring and swapped in (see
//! [`crate::mrtr::LiveRing`]): requests already running keep the ring they started with, new
//! ones get the new ring. Content that does not parse, holds no key or repeats a key id is
//! refused with a warning and `state_key_reloads_total{result="refused"}`; the ring in use
//! stays. A refused or unreadable file is logged once per change, not at every poll.

use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::MissedTickBehavior;

use super::keys::{digest, ids, FileContent, FileDigest, KeyFileError, KeySource};
use crate::metrics::Metrics;
use crate::mrtr::LiveRing;

/// How a reload ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReloadOutcome {
    /// The new ring is in use; its key ids, sealing key first.
    Applied { key_ids: Vec<String> },
    /// The file holds what the ring in use was built from.
    Unchanged,
    /// The file was refused (the reason names no key); the ring in use stays.
    Refused(String),
    /// No `state.key_file` is configured: there is nothing to reload.
    NoKeyFile,
    /// The gateway is shutting down.
    Stopped,
}

/// Asks the reload task to read the key file now.
#[derive(Debug, Clone)]
pub struct ReloadHandle {
    requests: Option<mpsc::Sender<oneshot::Sender<ReloadOutcome>>>,
}

/// What the reload task last saw at the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    Content(FileDigest),
    Unreadable,
}

/// Why the file is being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Trigger {
    Poll,
    Request,
}

/// The reload task's state.
pub(crate) struct Watcher {
    source: KeySource,
    path: PathBuf,
    live: Arc<LiveRing>,
    metrics: Arc<Metrics>,
    poll: Duration,
    /// The content the ring in use was built from.
    applied: Option<FileDigest>,
    seen: Option<Seen>,
}

// === impl ReloadHandle ===

impl ReloadHandle {
    /// A handle of a gateway without a key file.
    pub(crate) fn none() -> Self {
        Self { requests: None }
    }

    /// Reads the key file now and swaps the ring if its content is new and valid.
    pub async fn reload(&self) -> ReloadOutcome {
        let Some(requests) = &self.requests else { return ReloadOutcome::NoKeyFile };
        let (tx, rx) = oneshot::channel();
        if requests.send(tx).await.is_err() {
            return ReloadOutcome::Stopped;
        }
        rx.await.unwrap_or(ReloadOutcome::Stopped)
    }
}

// === impl Watcher ===

impl Watcher {
    /// The watcher of `source`'s key file, whose content `applied` the ring in `live` holds;
    /// `None` without a key file.
    pub(crate) fn new(
        source: KeySource,
        live: Arc<LiveRing>,
        metrics: Arc<Metrics>,
        poll: Duration,
        applied: Option<FileDigest>,
    ) -> Option<Self> {
        let path = source.file()?.to_path_buf();
        let seen = applied.map(Seen::Content);
        Some(Self { source, path, live, metrics, poll, applied, seen })
    }

    /// Starts the task; it ends when `stop` completes.
    pub(crate) fn spawn(
        self,
        tasks: &mut tokio::task::JoinSet<()>,
        stop: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> ReloadHandle {
        let (tx, rx) = mpsc::channel(4);
        tasks.spawn(self.run(rx, stop));
        ReloadHandle { requests: Some(tx) }
    }

    async fn run(
        mut self,
        mut requests: mpsc::Receiver<oneshot::Sender<ReloadOutcome>>,
        stop: impl std::future::Future<Output = ()>,
    ) {
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + self.poll, self.poll);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        tokio::pin!(stop);
        loop {
            // Stopping wins over work, and an asked-for reload over a poll.
            tokio::select! {
                biased;
                () = &mut stop => return,
                Some(reply) = requests.recv() => {
                    let _ = reply.send(self.reload(Trigger::Request).await);
                }
                _ = tick.tick() => {
                    self.reload(Trigger::Poll).await;
                }
            }
        }
    }

    async fn reload(&mut self, trigger: Trigger) -> ReloadOutcome {
        let (seen, content) = match tokio::fs::read(&self.path).await {
            Ok(bytes) => (Seen::Content(digest(&bytes)), FileContent::from_bytes(&self.path, bytes)),
            Err(source) => {
                let path = self.path.display().to_string();
                (Seen::Unreadable, Err(KeyFileError::Read { path, source }))
            }
        };
        let again = self.seen.replace(seen) == Some(seen);
        if trigger == Trigger::Poll && again {
            return ReloadOutcome::Unchanged;
        }
        match content {
            Ok(c) if Some(c.digest) == self.applied => self.unchanged(),
            Ok(c) => self.apply(&c),
            Err(e) => self.refuse(&e),
        }
    }

    fn unchanged(&self) -> ReloadOutcome {
        tracing::info!(path = %self.path.display(), "state key file unchanged; the ring in use stays");
        self.metrics.key_reloads.with_label_values(&["unchanged"]).inc();
        ReloadOutcome::Unchanged
    }

    fn apply(&mut self, content: &FileContent) -> ReloadOutcome {
        let ring = match self.source.ring(Some(content)) {
            Ok(ring) => ring,
            Err(e) => return self.refuse(&e),
        };
        let key_ids = ids(&ring);
        self.metrics.state_keys.set(ring.len() as i64);
        self.live.replace(ring);
        self.applied = Some(content.digest);
        self.metrics.key_reloads.with_label_values(&["applied"]).inc();
        tracing::info!(key_ids = ?key_ids, "state key ring reloaded (first key seals)");
        ReloadOutcome::Applied { key_ids }
    }

    fn refuse(&self, e: &KeyFileError) -> ReloadOutcome {
        tracing::warn!(error = %e, "state key file refused; the ring in use stays");
        self.metrics.key_reloads.with_label_values(&["refused"]).inc();
        ReloadOutcome::Refused(e.to_string())
    }
}

/// SIGHUP, caught: each one reloads the key file. Installed before the gateway reports ready,
/// so that a SIGHUP never takes its default action (ending the process).
pub(crate) struct Hangups {
    #[cfg(unix)]
    signal: Option<tokio::signal::unix::Signal>,
}

// === impl Hangups ===

impl Hangups {
    pub(crate) fn install() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let signal = signal(SignalKind::hangup())
                .map_err(|e| tracing::warn!(error = %e, "cannot catch SIGHUP; key reloads only by polling"))
                .ok();
            Self { signal }
        }
        #[cfg(not(unix))]
        Self {}
    }

    /// Reloads the key file at each SIGHUP; never returns.
    pub(crate) async fn reload_each(mut self, keys: &ReloadHandle) -> Infallible {
        while self.next().await {
            match keys.reload().await {
                ReloadOutcome::NoKeyFile => {
                    tracing::info!("SIGHUP: no state.key_file is configured; nothing to reload")
                }
                outcome => tracing::info!(?outcome, "SIGHUP: state key file read"),
            }
        }
        std::future::pending().await
    }

    async fn next(&mut self) -> bool {
        #[cfg(unix)]
        if let Some(signal) = &mut self.signal {
            return signal.recv().await.is_some();
        }
        false
    }
}

#[cfg(test)]
mod tests;
