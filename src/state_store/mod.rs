//! Single-use `requestState` (`state.single_use`): each token that opens is recorded in Redis
//! with `SET key 1 NX PX ttl` until the token's expiry, so it is accepted once across every
//! replica sharing the server; a second opening finds the key and is refused as a replay.
//!
//! What is stored is a short id derived from the token (the first 16 bytes of its SHA-256, in
//! hex), never the token, which carries the journal of the client's answers. A token has one
//! spelling only (the codec refuses padding and stray low bits in the base64url), so another
//! spelling of the same sealed bytes cannot earn a second id. The sealed core
//! (`src/mrtr`) stays free of I/O: the bridge calls [`StateStore::consume`] after the token has
//! passed its AEAD, expiry and binding checks.
//!
//! The client is the `redis` crate's [`ConnectionManager`] (a multiplexed connection that
//! reconnects after a failure), created lazily so the gateway starts while Redis is down, with
//! every command bounded by [`crate::defaults::STATE_STORE_TIMEOUT`]. Single use fails closed: a
//! store that cannot answer refuses the state ("state store unavailable", 503), and the
//! background [`watch`] withdraws `/readyz` until a ping succeeds again.
//!
//! The same server keeps finished tasks for every replica ([`tasks`], the task bridge's
//! `ResultStore`) whenever `state.redis_url` is set, single use on or not.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use sha2::{Digest, Sha256};

use crate::config::Secret;
use crate::defaults;
use crate::metrics::Metrics;
use crate::readiness::Readiness;

pub mod tasks;

pub use tasks::TaskResults;

/// Why a token could not be consumed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The token was consumed before (on this replica or another).
    #[error("requestState already used (single use)")]
    Replayed,
    #[error("state store unavailable")]
    Unavailable(#[source] redis::RedisError),
    #[error("state store did not answer within {0:?}")]
    Timeout(Duration),
}

/// The shared record of consumed tokens.
pub struct StateStore {
    conn: ConnectionManager,
    timeout: Duration,
    /// Added to a token's remaining life, as the codec tolerates that much clock skew.
    skew: Duration,
}

// === impl StoreError ===

impl StoreError {
    /// A fixed metric label.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Replayed => "replayed",
            Self::Unavailable(_) => "unavailable",
            Self::Timeout(_) => "timeout",
        }
    }
}

// === impl StateStore ===

impl StateStore {
    /// A store on `redis_url` (`state.redis_url`); connects on first use. Must run inside a
    /// Tokio runtime.
    pub fn new(redis_url: &Secret, skew: Duration) -> Result<Self, StoreError> {
        let timeout = defaults::STATE_STORE_TIMEOUT;
        let client = redis::Client::open(redis_url.expose()).map_err(StoreError::Unavailable)?;
        // One quick reconnect attempt per failure: the command timeout bounds the rest, and the
        // next command (or the watch's next ping) tries again.
        let settings = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout))
            .set_number_of_retries(1)
            .set_max_delay(timeout / 4);
        let conn =
            ConnectionManager::new_lazy_with_config(client, settings).map_err(StoreError::Unavailable)?;
        Ok(Self { conn, timeout, skew })
    }

    /// Consumes `token`, which expires at `expires_at` (unix seconds; `now` is the same clock's
    /// time): `Ok` the first time across every replica, [`StoreError::Replayed`] after.
    pub async fn consume(&self, token: &str, expires_at: u64, now: u64) -> Result<(), StoreError> {
        let ttl_ms = remaining_ms(expires_at, now, self.skew);
        let mut cmd = redis::cmd("SET");
        cmd.arg(key(token)).arg(1).arg("NX").arg("PX").arg(ttl_ms);
        let mut conn = self.conn.clone();
        match self.bounded(cmd.query_async::<Option<String>>(&mut conn)).await? {
            Some(_) => Ok(()),
            None => Err(StoreError::Replayed),
        }
    }

    /// One `PING`, for readiness.
    pub async fn ping(&self) -> Result<(), StoreError> {
        let mut conn = self.conn.clone();
        self.bounded(redis::cmd("PING").query_async::<String>(&mut conn)).await.map(drop)
    }

    async fn bounded<T>(&self, f: impl Future<Output = redis::RedisResult<T>>) -> Result<T, StoreError> {
        match tokio::time::timeout(self.timeout, f).await {
            Ok(r) => r.map_err(StoreError::Unavailable),
            Err(_) => Err(StoreError::Timeout(self.timeout)),
        }
    }
}

/// Pings the store every [`crate::defaults::STATE_STORE_PING`] until `stop` completes, and holds
/// `/readyz` down while it does not answer. Readiness starts down: nothing is known yet.
pub async fn watch(
    store: Arc<StateStore>,
    ready: Readiness,
    metrics: Arc<Metrics>,
    stop: impl Future<Output = ()>,
) {
    ready.set_state_store(false);
    let pings = async {
        let mut tick = tokio::time::interval(defaults::STATE_STORE_PING);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut was_up = None;
        loop {
            tick.tick().await;
            let result = store.ping().await;
            let up = result.is_ok();
            ready.set_state_store(up);
            metrics.state_store_up.set(i64::from(up));
            match result {
                Ok(()) if was_up != Some(true) => {
                    tracing::info!("state store answered: single use available")
                }
                Err(e) => {
                    metrics.state_store_errors.with_label_values(&["ping", e.label()]).inc();
                    if was_up != Some(false) {
                        let error = crate::logging::chain(&e);
                        tracing::warn!(error, "state store unreachable: single-use states are refused");
                    }
                }
                Ok(()) => {}
            }
            was_up = Some(up);
        }
    };
    tokio::select! { biased; _ = stop => {}, _ = pings => {} }
}

/// The Redis key of a token: a prefix and the hex of the first 16 bytes of its SHA-256.
fn key(token: &str) -> String {
    let digest = Sha256::digest(token.as_bytes());
    let mut out = String::with_capacity(defaults::STATE_STORE_KEY_PREFIX.len() + 32);
    out.push_str(defaults::STATE_STORE_KEY_PREFIX);
    for b in &digest[..16] {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// Milliseconds until a token expiring at `expires_at` stops opening (skew included), at
/// least one second, so the mark always outlives the token.
fn remaining_ms(expires_at: u64, now: u64, skew: Duration) -> u64 {
    let secs = expires_at.saturating_add(skew.as_secs()).saturating_sub(now).saturating_add(1);
    secs.saturating_mul(1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_a_short_digest_never_the_token() {
        let token = "v1.AAAAsecretjournalbytes";
        let k = key(token);
        assert!(k.starts_with(defaults::STATE_STORE_KEY_PREFIX));
        assert_eq!(k.len(), defaults::STATE_STORE_KEY_PREFIX.len() + 32);
        assert!(!k.contains("secret"));
        assert_eq!(k, key(token));
        assert_ne!(k, key("v1.AAAAsecretjournalbytez"));
    }

    #[test]
    fn the_mark_outlives_the_token() {
        let skew = Duration::from_secs(30);
        assert_eq!(remaining_ms(1_000, 400, skew), (600 + 30 + 1) * 1000);
        // Past its expiry but within the skew the codec tolerates: still marked.
        assert_eq!(remaining_ms(1_000, 1_020, skew), 11_000);
        assert_eq!(remaining_ms(1_000, 5_000, skew), 1_000, "never zero, which Redis refuses");
    }
}
