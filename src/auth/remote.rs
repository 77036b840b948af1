//! Remote keys (a JWKS, directly or through discovery): cached, refreshed in the background,
//! refreshed early when a token names an unknown `kid` (at most once per `min_refresh`, one
//! fetch in flight however many requests ask), and served stale for at most `max_stale` after
//! the last good fetch while the issuer is down. Fetches run in their own task, never on a
//! request's future: a request that caused one waits for it at most `wait`, and a request that
//! gives up does not cancel it.

use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use tokio::sync::watch;
use tokio::task::AbortHandle;
use tokio::time::Instant;

use super::fetch::Fetcher;
use super::keys::Key;
use super::metrics::AuthMetrics;
use crate::config::RemoteKeys;

/// The remote key cache of one source.
pub(crate) struct Remote {
    fetcher: Fetcher,
    settings: RemoteKeys,
    cache: RwLock<Option<Cached>>,
    refresh: Mutex<RefreshState>,
    /// Bumped when a fetch ends (either way), waking the requests that wait for it.
    done: watch::Sender<u64>,
    metrics: AuthMetrics,
}

struct Cached {
    keys: Arc<[Key]>,
    fetched: Instant,
}

#[derive(Default)]
struct RefreshState {
    in_flight: bool,
    last_attempt: Option<Instant>,
}

/// What asking for a fetch did.
#[derive(Debug, PartialEq, Eq)]
enum Begun {
    /// The caller runs the fetch.
    Started,
    /// Another fetch is running.
    InFlight,
    /// The last attempt is too recent.
    RateLimited,
}

/// Aborts the background refresh when the authenticator is dropped.
pub(crate) struct Background(AbortHandle);

impl Drop for Background {
    fn drop(&mut self) {
        self.0.abort();
    }
}

// === impl Remote ===

impl Remote {
    pub(crate) fn new(fetcher: Fetcher, settings: RemoteKeys, metrics: AuthMetrics) -> Arc<Self> {
        Arc::new(Self {
            fetcher,
            settings,
            cache: RwLock::new(None),
            refresh: Mutex::new(RefreshState::default()),
            done: watch::channel(0).0,
            metrics,
        })
    }

    /// The keys held now; `None` before the first good fetch and once they are too stale.
    pub(crate) fn keys(&self) -> Option<Arc<[Key]>> {
        let cache = self.cache.read();
        let cached = cache.as_ref()?;
        if cached.fetched.elapsed() > self.settings.max_stale {
            return None;
        }
        Some(cached.keys.clone())
    }

    /// Whether usable keys are held now (`/readyz`).
    pub(crate) fn is_loaded(&self) -> bool {
        self.keys().is_some()
    }

    /// Fetches now (the first fetch at start), unless a fetch is already running.
    pub(crate) async fn fetch_now(&self) {
        if self.begin(false) == Begun::Started {
            self.run().await;
        }
    }

    /// A token named a `kid` the cache does not hold: fetch (if the rate limit allows) and
    /// wait for the running fetch, at most `wait`.
    pub(crate) async fn refresh_for_unknown_kid(self: &Arc<Self>) {
        let mut finished = self.done.subscribe();
        match self.begin(true) {
            Begun::RateLimited => return,
            Begun::InFlight => {}
            Begun::Started => {
                let me = self.clone();
                tokio::spawn(async move { me.run().await });
            }
        }
        // A refresh that outlasts the wait still lands in the cache for later requests.
        let _ = tokio::time::timeout(self.settings.wait, finished.changed()).await;
    }

    /// Starts the periodic refresh: every `refresh` while keys are held, every `min_refresh`
    /// while none are.
    pub(crate) fn spawn_background(self: &Arc<Self>) -> Background {
        let weak = Arc::downgrade(self);
        Background(tokio::spawn(background(weak)).abort_handle())
    }

    fn begin(&self, rate_limited: bool) -> Begun {
        let mut state = self.refresh.lock();
        if state.in_flight {
            return Begun::InFlight;
        }
        let recent = state.last_attempt.is_some_and(|t| t.elapsed() < self.settings.min_refresh);
        if rate_limited && recent {
            return Begun::RateLimited;
        }
        state.in_flight = true;
        state.last_attempt = Some(Instant::now());
        Begun::Started
    }

    async fn run(&self) {
        match self.fetcher.fetch().await {
            Ok(keys) => {
                tracing::debug!(keys = keys.len(), "token keys fetched");
                *self.cache.write() = Some(Cached { keys: keys.into(), fetched: Instant::now() });
                self.metrics.key_fetches.with_label_values(&["ok"]).inc();
            }
            Err(e) => {
                let held = self.keys().is_some();
                tracing::warn!(error = %e, serving_stale = held, "fetching token keys failed");
                self.metrics.key_fetches.with_label_values(&[e.label()]).inc();
            }
        }
        self.refresh.lock().in_flight = false;
        self.done.send_modify(|n| *n += 1);
    }

    fn next_refresh(&self) -> Duration {
        if self.is_loaded() {
            self.settings.refresh
        } else {
            self.settings.min_refresh
        }
    }
}

async fn background(weak: Weak<Remote>) {
    loop {
        let Some(pause) = weak.upgrade().map(|r| r.next_refresh()) else { return };
        tokio::time::sleep(pause).await;
        let Some(remote) = weak.upgrade() else { return };
        remote.fetch_now().await;
    }
}

#[cfg(test)]
mod tests;
