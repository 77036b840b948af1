//! One upstream session that listens for a (principal, capability set), fanned out to every
//! listen stream of that key.
//!
//! Why a session of its own, outside the pool: a pooled session is leased to one call at a time
//! and may be closed whenever it idles, while a listen stream lives for as long as its client
//! keeps it open. So the hub takes an idle session of its key out of the pool (or opens one on
//! the pool's connector when none is idle) and keeps it: its GET
//! stream (or a stdio child's stdout, or an HTTP+SSE stream) carries the list changes and the
//! resource updates, which the session's router sends to the hub whatever stream they came on.
//! Server requests on it go to the call it is lent to (below), and are refused, as on any
//! session, when no call has it.
//!
//! With `subscriptions.share_with_calls` the hub also lends its session back to the pool for
//! its key's calls ([`Lending`]), one at a time: a server that tells a session only of that
//! session's own changes then tells the listen streams of what the principal's calls changed.
//! A call that runs on a pooled session meanwhile taps the list changes it hears into this
//! session's queue, so they reach the listen streams too.
//! Closing the hub withdraws the session first; a call still on it closes it as it ends.
//!
//! Each resource URI is subscribed upstream (`resources/subscribe`) by the first listener that
//! asks for it and unsubscribed when the last one ends; the counts and the upstream requests
//! are serialised by one async lock, so a subscribe and an unsubscribe of one URI never race.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use bytes::Bytes;
use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio::sync::{mpsc, watch};

use super::filter::{self, Filter, Offer};
use super::metrics::ListenMetrics;
use crate::body::sse_event;
use crate::defaults;
use crate::protocol::jsonrpc::Outcome;
use crate::protocol::{methods, RequestId};
use crate::upstream::{Lending, Session, UpstreamError, UpstreamEvent};

/// One listen stream as the hub sees it.
struct Slot {
    id: RequestId,
    filter: Filter,
    queue: mpsc::Sender<Bytes>,
}

/// The upstream session of one key and its listeners.
pub(super) struct Hub {
    session: Session,
    offer: Offer,
    listeners: Mutex<HashMap<u64, Slot>>,
    next: AtomicU64,
    /// Listeners per subscribed URI.
    uris: tokio::sync::Mutex<HashMap<String, usize>>,
    /// True once the upstream session is gone or the hub was closed.
    lost: watch::Sender<bool>,
    closed: AtomicBool,
    /// The session lent to the key's calls, until the hub closes.
    lending: Mutex<Option<Lending>>,
    metrics: ListenMetrics,
}

// === impl Hub ===

impl Hub {
    /// Takes over `session` (opened for this key) and starts fanning its notifications out.
    pub(super) fn start(session: Session, metrics: ListenMetrics) -> Arc<Self> {
        let notes = session.listen(defaults::LISTEN_QUEUE);
        let offer = Offer::from_capabilities(&session.initialize_result().capabilities);
        let hub = Arc::new(Self {
            session,
            offer,
            listeners: Mutex::new(HashMap::new()),
            next: AtomicU64::new(0),
            uris: tokio::sync::Mutex::new(HashMap::new()),
            lost: watch::channel(false).0,
            closed: AtomicBool::new(false),
            lending: Mutex::new(None),
            metrics,
        });
        hub.metrics.sessions.inc();
        tokio::spawn(fan_out(Arc::downgrade(&hub), notes, hub.lost.subscribe()));
        hub
    }

    /// Keeps `lending` (its session lent to the key's calls) until the hub closes.
    pub(super) fn lend(&self, lending: Lending) {
        *self.lending.lock() = Some(lending);
    }

    pub(super) fn offer(&self) -> Offer {
        self.offer
    }

    /// False once the upstream session is gone: a new listener needs a new hub.
    pub(super) fn is_alive(&self) -> bool {
        !*self.lost.borrow() && self.session.is_healthy()
    }

    /// Subscribes upstream the URIs no listener holds yet (concurrently, so the whole takes
    /// one bounded request time); returns those now held for this listener (the honoured
    /// ones), each counted once more.
    pub(super) async fn hold(&self, uris: &[String]) -> Vec<String> {
        if !self.offer.subscribe || uris.is_empty() {
            return Vec::new();
        }
        let mut held = self.uris.lock().await;
        let fresh: Vec<&String> = uris.iter().filter(|u| !held.contains_key(*u)).collect();
        let sent = fresh.iter().map(|uri| self.send(methods::RESOURCES_SUBSCRIBE, uri));
        let accepted = futures_util::future::join_all(sent).await;
        for (uri, _) in fresh.iter().zip(&accepted).filter(|(_, ok)| **ok) {
            held.insert((*uri).clone(), 0);
        }
        let mut honoured = Vec::with_capacity(uris.len());
        for uri in uris {
            if let Some(count) = held.get_mut(uri) {
                *count += 1;
                honoured.push(uri.clone());
            }
        }
        honoured
    }

    /// Counts `uris` one listener fewer, and unsubscribes upstream those no listener holds.
    pub(super) async fn release(&self, uris: &[String]) {
        let mut held = self.uris.lock().await;
        for uri in uris {
            let Some(count) = held.get_mut(uri) else { continue };
            *count -= 1;
            if *count == 0 {
                held.remove(uri);
                if self.is_alive() {
                    self.send(methods::RESOURCES_UNSUBSCRIBE, uri).await;
                }
            }
        }
    }

    /// Sends `resources/subscribe` or `resources/unsubscribe`; true when the server accepted.
    /// Its refusal is logged, never shown to the client: the URI is only left out of the
    /// acknowledgement.
    async fn send(&self, method: &'static str, uri: &str) -> bool {
        let request = self.session.request(method, Some(json!({ "uri": uri })));
        match tokio::time::timeout(defaults::LISTEN_UPSTREAM_TIMEOUT, request).await {
            Ok(Ok(Outcome::Result(_))) => true,
            Ok(Ok(Outcome::Error(e))) => {
                tracing::info!(method, uri, code = e.code, error = %e.message, "upstream refused a resource subscription change");
                false
            }
            Ok(Err(e)) => {
                tracing::warn!(method, uri, error = %e, "upstream resource subscription change failed");
                false
            }
            Err(_) => {
                tracing::warn!(method, uri, "upstream resource subscription change timed out");
                false
            }
        }
    }

    /// A `ping`, so that a server which ends sessions that send nothing keeps this one (its
    /// failure marks the session unhealthy, which the health check then sees).
    pub(super) async fn ping(&self) {
        let ping = self.session.request(methods::PING, None);
        if tokio::time::timeout(defaults::LISTEN_UPSTREAM_TIMEOUT, ping).await.is_err() {
            tracing::debug!("a listen session's keep-alive ping timed out");
        }
    }

    /// Adds a listener with its honoured `filter`; its notifications go to `queue`.
    pub(super) fn add(&self, id: RequestId, filter: Filter, queue: mpsc::Sender<Bytes>) -> u64 {
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        self.listeners.lock().insert(key, Slot { id, filter, queue });
        key
    }

    pub(super) fn remove(&self, key: u64) {
        self.listeners.lock().remove(&key);
    }

    /// Writes one upstream notification to every listener that asked for its kind. A listener
    /// whose queue is full is too slow: it is dropped, which ends its stream.
    fn deliver(&self, method: &str, params: Option<&Value>) {
        let uri = params.and_then(|p| p.get("uri")).and_then(Value::as_str);
        let mut listeners = self.listeners.lock();
        let mut slow = Vec::new();
        for (key, slot) in listeners.iter().filter(|(_, s)| s.filter.wants(method, uri)) {
            let frame = sse_event(&filter::tagged(&slot.id, method, uri));
            match slot.queue.try_send(frame) {
                Ok(()) => self.metrics.delivered.with_label_values(&[method]).inc(),
                Err(mpsc::error::TrySendError::Full(_)) => slow.push(*key),
                // The stream has ended; its guard removes it.
                Err(mpsc::error::TrySendError::Closed(_)) => {}
            }
        }
        for key in slow {
            listeners.remove(&key);
            self.metrics.ended.with_label_values(&["slow_client"]).inc();
            tracing::warn!("a subscriptions/listen client did not keep up: its stream is ended");
        }
    }

    /// The upstream session is gone: every listener's stream ends (without the graceful
    /// response, so clients know to listen again).
    fn lose(&self, why: &str) {
        if self.lost.send_replace(true) {
            return;
        }
        let dropped = std::mem::take(&mut *self.listeners.lock());
        if !self.closed.load(Ordering::Relaxed) {
            tracing::warn!(
                why,
                listeners = dropped.len(),
                "the upstream session of subscriptions/listen streams was lost"
            );
            self.metrics.ended.with_label_values(&["upstream_lost"]).inc_by(dropped.len() as u64);
        }
    }

    /// Ends the hub: its fan-out stops and its session is closed upstream (bounded), or by the
    /// call it is lent to as that call ends. Runs once.
    pub(super) async fn close(&self) {
        if self.closed.swap(true, Ordering::Relaxed) {
            return;
        }
        self.lose("closed");
        self.metrics.sessions.dec();
        let lending = self.lending.lock().take();
        if lending.is_some_and(|l| !l.withdraw()) {
            tracing::debug!("a listen session is closed by the call it is lent to, as that call ends");
            return;
        }
        match tokio::time::timeout(defaults::SHUTDOWN_CLOSE, self.session.close()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::debug!(error = %e, "closing a listen session failed"),
            Err(_) => tracing::debug!("closing a listen session timed out"),
        }
    }
}

#[cfg(test)]
impl Hub {
    /// Listeners the hub writes to now.
    pub(super) fn listener_count(&self) -> usize {
        self.listeners.lock().len()
    }

    /// Listeners holding `uri` now; `None` when it is not subscribed, or while the count is
    /// being changed.
    pub(super) fn holders(&self, uri: &str) -> Option<usize> {
        self.uris.try_lock().ok().and_then(|held| held.get(uri).copied())
    }

    /// The upstream session's own health, whatever the hub's.
    pub(super) fn session_is_healthy(&self) -> bool {
        self.session.is_healthy()
    }

    /// What the fan-out does when the session's notification stream fails.
    pub(super) fn lose_notifications(&self) {
        self.lose("the notification stream failed");
    }
}

/// Reads the session's listenable notifications until it dies or the hub ends; checks the
/// session's health between them, since some transports only mark a dead session unhealthy.
async fn fan_out(
    hub: Weak<Hub>,
    mut notes: mpsc::Receiver<Result<UpstreamEvent, UpstreamError>>,
    mut lost: watch::Receiver<bool>,
) {
    let mut health = tokio::time::interval(defaults::LISTEN_HEALTH_CHECK);
    let mut keepalive = tokio::time::interval(defaults::LISTEN_KEEPALIVE);
    keepalive.tick().await;
    loop {
        let event = tokio::select! {
            biased;
            _ = lost.wait_for(|l| *l) => return,
            event = notes.recv() => event,
            _ = keepalive.tick() => {
                if let Some(h) = hub.upgrade() {
                    tokio::spawn(async move { h.ping().await });
                }
                continue;
            }
            _ = health.tick() => match hub.upgrade() {
                Some(h) if !h.session.is_healthy() => None,
                Some(_) => continue,
                None => return,
            },
        };
        let Some(hub) = hub.upgrade() else { return };
        match event {
            Some(Ok(UpstreamEvent::Notification { method, params })) => hub.deliver(&method, params.as_ref()),
            Some(Ok(_)) => {}
            Some(Err(e)) => return hub.lose(&e.to_string()),
            None => return hub.lose("the upstream session ended"),
        }
    }
}
