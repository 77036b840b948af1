//! `subscriptions/listen`, bridged onto legacy upstream sessions.
//!
//! A 2026-07-28 client opens a listen stream with a filter of the notification kinds it wants;
//! a legacy server offers them as list-change notifications and `resources/subscribe`, on its
//! sessions' GET streams. This module owns the bridge between the two:
//! - [`filter`]: the filter, the honoured subset and the messages a listener gets;
//! - [`hub`]: one upstream session per (principal, capability set), fanned out to all its
//!   listeners, with `resources/subscribe` once per URI and `resources/unsubscribe` after the
//!   last listener of a URI, and lent to the key's calls when no other call has it;
//! - this file: the registry of hubs, the bounds on listeners (per principal and in total),
//!   and each listener's stream, which ends when its client closes it (noticed at once), when
//!   the gateway shuts down (after the graceful `subscriptions/listen` response), or when the
//!   upstream session is lost (without it, so the client listens again).
//!
//! It knows nothing of HTTP beyond the SSE frame: the front turns a [`Listening`] into a
//! response.

mod error;
mod filter;
mod hub;
mod metrics;

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot, watch, OnceCell};

pub use error::ListenError;
pub use filter::{Filter, Offer};
pub use metrics::ListenMetrics;

use crate::auth::Grants;
use crate::body::sse_event;
use crate::config::SubscriptionsConfig;
use crate::defaults;
use crate::protocol::{methods, RequestId};
use crate::upstream::{Pool, PoolKey};
use hub::Hub;

/// How a listen stream ended, for the front's record of the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The client closed it.
    ClientClosed,
    /// The gateway shut down and sent the graceful response.
    Shutdown,
    /// The upstream session was lost, or the client did not keep up.
    Dropped,
}

/// A listen request, validated by the front.
pub struct ListenRequest<'a> {
    pub id: RequestId,
    pub key: PoolKey,
    /// The `initialize` capabilities to declare if a session must be opened.
    pub capabilities: &'a Value,
    pub params: Option<&'a Value>,
    /// Resource URIs the principal may not read are not subscribed.
    pub grants: &'a Grants,
}

/// An open listen stream: its SSE frames (the acknowledgement first), and how it ended.
pub struct Listening {
    pub body: mpsc::Receiver<Bytes>,
    pub ended: oneshot::Receiver<Ended>,
}

/// The bridge: every hub of this replica and the listener counts that bound them.
pub struct Subscriptions {
    pool: Arc<Pool>,
    cfg: SubscriptionsConfig,
    metrics: ListenMetrics,
    state: Arc<Mutex<Registry>>,
    stopping: watch::Sender<bool>,
}

#[derive(Default)]
struct Registry {
    hubs: HashMap<PoolKey, Arc<Entry>>,
    per_principal: HashMap<Arc<str>, usize>,
    total: usize,
    /// Entries whose upstream session may be open: from the entry's first listener until its
    /// last one is gone and the session closed (a lost hub's entry leaves `hubs` earlier, while
    /// its session still closes). Bounded by `subscriptions.max_sessions`.
    sessions: usize,
}

/// One key's hub, opened once by whichever listener comes first.
#[derive(Default)]
struct Entry {
    hub: OnceCell<Arc<Hub>>,
    /// Listeners counted on this entry (under the registry lock).
    listeners: Mutex<usize>,
}

/// A listener's place: counted in the registry and (once added) in its hub; dropping it gives
/// both back, unsubscribes its URIs and closes the hub after its last listener.
struct Guard {
    state: Arc<Mutex<Registry>>,
    key: PoolKey,
    entry: Arc<Entry>,
    slot: Option<u64>,
    uris: Vec<String>,
    listeners: prometheus::IntGauge,
}

// === impl Subscriptions ===

impl Subscriptions {
    pub fn new(pool: Arc<Pool>, cfg: SubscriptionsConfig, metrics: ListenMetrics) -> Self {
        let state = Arc::new(Mutex::new(Registry::default()));
        Self { pool, cfg, metrics, state, stopping: watch::channel(false).0 }
    }

    /// Opens a listen stream: checks the bounds, opens (or joins) the key's upstream session,
    /// subscribes its URIs, and queues the acknowledgement with the honoured subset.
    pub async fn listen(&self, req: ListenRequest<'_>) -> Result<Listening, ListenError> {
        let result = self.open(req).await;
        if let Err(e) = &result {
            self.metrics.refused.with_label_values(&[e.label()]).inc();
        }
        result
    }

    async fn open(&self, req: ListenRequest<'_>) -> Result<Listening, ListenError> {
        let asked = Filter::parse(req.params, self.cfg.max_uris)?;
        let mut guard = self.reserve(&req.key)?;
        let hub = guard
            .entry
            .hub
            .get_or_try_init(|| async {
                let taken = self.pool.take_unpooled(&req.key, req.capabilities).await;
                let session = taken.map_err(ListenError::Upstream)?;
                let hub = Hub::start(session.clone(), self.metrics.clone());
                if self.cfg.share_with_calls {
                    hub.lend(self.pool.lend(&req.key, session));
                }
                Ok::<_, ListenError>(hub)
            })
            .await?
            .clone();
        let readable: Vec<String> =
            asked.resources.iter().filter(|u| may_read(req.grants, u)).cloned().collect();
        guard.uris = hub.hold(&readable).await;
        let mut honoured = asked.honoured_lists(hub.offer());
        honoured.resources = guard.uris.clone();
        let (queue, notes) = mpsc::channel(defaults::LISTEN_QUEUE);
        let ack = sse_event(&filter::acknowledgement(&req.id, &honoured));
        // A fresh queue has room: the acknowledgement is its first frame, before any notification.
        let _ = queue.try_send(ack);
        guard.slot = Some(hub.add(req.id.clone(), honoured, queue));
        let (out, body) = mpsc::channel(defaults::LISTEN_QUEUE);
        let (done, ended) = oneshot::channel();
        self.metrics.listeners.inc();
        let stream = Stream {
            id: req.id,
            notes,
            out,
            stopping: self.stopping.subscribe(),
            metrics: self.metrics.clone(),
        };
        tokio::spawn(async move {
            let how = stream.run().await;
            drop(guard);
            let _ = done.send(how);
        });
        Ok(Listening { body, ended })
    }

    /// Counts a new listener of `key`, within the bounds.
    fn reserve(&self, key: &PoolKey) -> Result<Guard, ListenError> {
        if *self.stopping.borrow() {
            return Err(ListenError::ShuttingDown);
        }
        let mut reg = self.state.lock();
        if reg.total >= self.cfg.max_listeners {
            return Err(ListenError::Total { limit: self.cfg.max_listeners });
        }
        let mine = reg.per_principal.get(&key.0).copied().unwrap_or(0);
        if mine >= self.cfg.max_per_principal {
            return Err(ListenError::PerPrincipal { limit: self.cfg.max_per_principal });
        }
        // A hub whose session was lost takes no new listener: the key gets a fresh entry.
        let stale = reg.hubs.get(key).is_some_and(|e| e.hub.get().is_some_and(|h| !h.is_alive()));
        if stale {
            reg.hubs.remove(key);
        }
        // A key without an entry needs an upstream session of its own.
        if !reg.hubs.contains_key(key) {
            if reg.sessions >= self.cfg.max_sessions {
                return Err(ListenError::Sessions { limit: self.cfg.max_sessions });
            }
            reg.sessions += 1;
        }
        let entry = reg.hubs.entry(key.clone()).or_default().clone();
        *entry.listeners.lock() += 1;
        *reg.per_principal.entry(key.0.clone()).or_default() += 1;
        reg.total += 1;
        let listeners = self.metrics.listeners.clone();
        Ok(Guard {
            state: self.state.clone(),
            key: key.clone(),
            entry,
            slot: None,
            uris: Vec::new(),
            listeners,
        })
    }

    /// Listen streams open now.
    pub fn listeners(&self) -> usize {
        self.state.lock().total
    }

    /// Upstream sessions held for listen streams now.
    pub fn sessions(&self) -> usize {
        self.state.lock().hubs.values().filter(|e| e.hub.initialized()).count()
    }

    /// At shutdown: refuses new listen requests and ends every stream with the graceful
    /// response; their upstream sessions close as their last listener goes.
    pub fn stop(&self) {
        self.stopping.send_replace(true);
    }

    /// Closes the upstream sessions still held (after [`Subscriptions::stop`]), bounded.
    pub async fn close_sessions(&self) {
        let hubs: Vec<Arc<Hub>> = {
            let mut reg = self.state.lock();
            reg.hubs.drain().filter_map(|(_, e)| e.hub.get().cloned()).collect()
        };
        futures_util::future::join_all(hubs.iter().map(|h| h.close())).await;
    }
}

/// Whether the principal may read `uri` (so may hear of its changes).
fn may_read(grants: &Grants, uri: &str) -> bool {
    grants.check(methods::RESOURCES_READ, Some(&json!({ "uri": uri }))).is_ok()
}

// === impl Guard ===

impl Drop for Guard {
    fn drop(&mut self) {
        let hub = self.entry.hub.get().cloned();
        if let (Some(hub), Some(slot)) = (&hub, self.slot) {
            hub.remove(slot);
            self.listeners.dec();
        }
        let last = {
            let mut reg = self.state.lock();
            reg.total -= 1;
            if let Some(n) = reg.per_principal.get_mut(&self.key.0) {
                *n -= 1;
                if *n == 0 {
                    reg.per_principal.remove(&self.key.0);
                }
            }
            let mut count = self.entry.listeners.lock();
            *count -= 1;
            let last = *count == 0;
            if last && reg.hubs.get(&self.key).is_some_and(|e| Arc::ptr_eq(e, &self.entry)) {
                reg.hubs.remove(&self.key);
            }
            last
        };
        let uris = std::mem::take(&mut self.uris);
        let handle = tokio::runtime::Handle::try_current().ok();
        match (hub, handle) {
            (Some(hub), Some(handle)) => {
                let state = self.state.clone();
                handle.spawn(async move {
                    hub.release(&uris).await;
                    if last {
                        hub.close().await;
                        state.lock().sessions -= 1;
                    }
                });
            }
            // No session was opened (or none can be closed here): nothing holds it any more.
            _ if last => self.state.lock().sessions -= 1,
            _ => {}
        }
    }
}

/// One listener's stream: moves its notifications to the response body until it ends.
struct Stream {
    id: RequestId,
    notes: mpsc::Receiver<Bytes>,
    out: mpsc::Sender<Bytes>,
    stopping: watch::Receiver<bool>,
    metrics: ListenMetrics,
}

impl Stream {
    async fn run(mut self) -> Ended {
        let how = loop {
            tokio::select! {
                // A closed stream and a shutdown are noticed before any queued notification.
                biased;
                () = self.out.closed() => break Ended::ClientClosed,
                _ = self.stopping.wait_for(|s| *s) => {
                    let _ = self.out.try_send(sse_event(&filter::closing(&self.id)));
                    break Ended::Shutdown;
                }
                note = self.notes.recv() => match note {
                    Some(frame) => match self.out.try_send(frame) {
                        Ok(()) => {}
                        Err(mpsc::error::TrySendError::Closed(_)) => break Ended::ClientClosed,
                        Err(mpsc::error::TrySendError::Full(_)) => {
                            self.metrics.ended.with_label_values(&["slow_client"]).inc();
                            tracing::warn!("a subscriptions/listen client did not keep up: its stream is ended");
                            break Ended::Dropped;
                        }
                    },
                    // The hub dropped this listener (and counted why).
                    None => break Ended::Dropped,
                },
            }
        };
        match how {
            Ended::ClientClosed => self.metrics.ended.with_label_values(&["client_closed"]).inc(),
            Ended::Shutdown => self.metrics.ended.with_label_values(&["shutdown"]).inc(),
            Ended::Dropped => {}
        }
        how
    }
}

#[cfg(test)]
mod tests;
