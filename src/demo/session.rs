//! One legacy session: what `initialize` negotiated, the server → client requests waiting for
//! an answer, the calls running, and the standalone GET stream.
//!
//! A legacy server keeps this per `Mcp-Session-Id`; the gateway's whole job is to cope with it.
//! Every collection here is bounded by the limits the server was started with, and closing a
//! session stops its calls, fails its waiting requests and ends its GET stream.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::Instant;

use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::{oneshot, Notify};
use tokio::task::AbortHandle;

use super::sse::{self, SseBody, SseWriter};
use crate::protocol::jsonrpc::ErrorObject;
use crate::protocol::RequestId;

/// Errors of session bookkeeping.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SessionError {
    #[error("a standalone GET stream is already open for this session")]
    StreamBusy,
    #[error("too many server requests waiting for an answer in this session (limit {0})")]
    TooManyOutstanding(usize),
    #[error("too many calls running in this session (limit {0})")]
    TooManyCalls(usize),
    #[error("request id {0} is already in use by a running call")]
    DuplicateCall(RequestId),
    #[error("too many resource subscriptions in this session (limit {0})")]
    TooManySubscriptions(usize),
}

/// Resource subscriptions one session may hold.
const MAX_SUBSCRIPTIONS: usize = 16;

/// Resumable streams a session keeps; the oldest is finished and forgotten past this.
const MAX_RESUMABLE_STREAMS: usize = 16;

/// The first revision whose streams start with a priming event.
const PRIMING_VERSION: &str = "2025-11-25";

/// How the client answered one server → client request.
pub(crate) type Answer = Result<Value, ErrorObject>;

/// The client capabilities that decide which tools a session gets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ClientCaps {
    pub(crate) elicitation: bool,
    pub(crate) elicitation_url: bool,
    pub(crate) sampling: bool,
    pub(crate) roots: bool,
}

/// Per-session bounds, copied from the server options.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SessionLimits {
    pub(crate) max_outstanding: usize,
    pub(crate) max_calls: usize,
}

/// One initialized session.
pub(crate) struct Session {
    id: String,
    version: &'static str,
    caps: ClientCaps,
    limits: SessionLimits,
    last_seen: Mutex<Instant>,
    next_stream: AtomicU64,
    resumable: Mutex<VecDeque<SseWriter>>,
    next_request_id: AtomicI64,
    pending: Mutex<HashMap<i64, oneshot::Sender<Answer>>>,
    calls: Mutex<HashMap<RequestId, (u64, AbortHandle)>>,
    next_call_serial: AtomicU64,
    standalone: Mutex<Option<SseWriter>>,
    standalone_opened: Notify,
    /// A standalone GET of this session has been answered (its response head went out).
    get_answered: AtomicBool,
    /// Resource URIs this session subscribed to (`resources/subscribe`).
    subscriptions: Mutex<HashSet<String>>,
}

// === impl ClientCaps ===

impl ClientCaps {
    /// Reads the `capabilities` object of an `initialize` request. A capability counts as
    /// declared when its key is present, as in the SDKs. URL-mode elicitation needs an explicit
    /// `elicitation.url` (2025-11-25); an empty `elicitation` object means form mode only.
    pub(crate) fn from_initialize(capabilities: Option<&Value>) -> Self {
        let has = |key: &str| capabilities.and_then(|caps| caps.get(key)).is_some();
        let url = capabilities
            .and_then(|caps| caps.get("elicitation"))
            .and_then(|elicitation| elicitation.get("url"))
            .is_some();
        Self {
            elicitation: has("elicitation"),
            elicitation_url: url,
            sampling: has("sampling"),
            roots: has("roots"),
        }
    }
}

// === impl Session ===

impl Session {
    pub(crate) fn new(id: String, version: &'static str, caps: ClientCaps, limits: SessionLimits) -> Self {
        Self {
            id,
            version,
            caps,
            limits,
            last_seen: Mutex::new(Instant::now()),
            next_stream: AtomicU64::new(0),
            resumable: Mutex::new(VecDeque::new()),
            next_request_id: AtomicI64::new(0),
            pending: Mutex::new(HashMap::new()),
            calls: Mutex::new(HashMap::new()),
            next_call_serial: AtomicU64::new(0),
            standalone: Mutex::new(None),
            standalone_opened: Notify::new(),
            get_answered: AtomicBool::new(false),
            subscriptions: Mutex::new(HashSet::new()),
        }
    }

    /// A standalone GET of this session is being answered now.
    pub(crate) fn mark_get_answered(&self) {
        self.get_answered.store(true, Ordering::SeqCst);
    }

    pub(crate) fn get_answered(&self) -> bool {
        self.get_answered.load(Ordering::SeqCst)
    }

    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    /// The negotiated protocol version.
    pub(crate) fn version(&self) -> &'static str {
        self.version
    }

    /// Streams start with a priming event from 2025-11-25 on (SEP-1699).
    pub(crate) fn primes_streams(&self) -> bool {
        self.version >= PRIMING_VERSION
    }

    pub(crate) fn caps(&self) -> ClientCaps {
        self.caps
    }

    pub(crate) fn touch(&self) {
        *self.last_seen.lock() = Instant::now();
    }

    /// Idle means no request since `since` and no call running (a long tool is not idleness).
    pub(crate) fn idle_since(&self, since: Instant) -> bool {
        *self.last_seen.lock() < since && self.calls.lock().is_empty()
    }

    pub(crate) fn last_seen(&self) -> Instant {
        *self.last_seen.lock()
    }

    /// A new event stream, numbered uniquely within the session.
    pub(crate) fn stream(&self) -> (SseWriter, SseBody) {
        sse::channel(self.next_stream.fetch_add(1, Ordering::Relaxed), false)
    }

    /// A new event stream that logs its events so that a client can resume it with
    /// `Last-Event-ID`; the session keeps the most recent few.
    pub(crate) fn resumable_stream(&self) -> (SseWriter, SseBody) {
        let number = self.next_stream.fetch_add(1, Ordering::Relaxed);
        let (writer, body) = sse::channel(number, true);
        let mut kept = self.resumable.lock();
        if kept.len() >= MAX_RESUMABLE_STREAMS {
            kept.pop_front().inspect(SseWriter::finish);
        }
        kept.push_back(writer.clone());
        (writer, body)
    }

    /// The resumable stream with this number, if the session still keeps it.
    pub(crate) fn resumable_by_number(&self, number: u64) -> Option<SseWriter> {
        let kept = self.resumable.lock();
        kept.iter().find(|writer| writer.number() == number).cloned()
    }

    /// Opens the standalone GET stream; one at a time, but a stream whose client went away
    /// no longer counts.
    pub(crate) fn open_standalone(&self) -> Result<SseBody, SessionError> {
        let mut slot = self.standalone.lock();
        if slot.as_ref().is_some_and(|writer| !writer.is_closed()) {
            return Err(SessionError::StreamBusy);
        }
        let (writer, body) = self.stream();
        if self.primes_streams() {
            // A fresh channel has room, so this cannot fail while `body` is alive.
            let _ = writer.prime_fresh();
        }
        *slot = Some(writer);
        drop(slot);
        self.standalone_opened.notify_waiters();
        Ok(body)
    }

    /// Waits until a live standalone stream exists and returns its writer. The caller bounds
    /// the wait with its own deadline.
    pub(crate) async fn standalone_writer(&self) -> SseWriter {
        loop {
            let opened = self.standalone_opened.notified();
            tokio::pin!(opened);
            opened.as_mut().enable();
            if let Some(writer) = self.live_standalone() {
                return writer;
            }
            opened.await;
        }
    }

    /// The standalone GET stream, if one is open and its client still reads it.
    pub(crate) fn live_standalone(&self) -> Option<SseWriter> {
        self.standalone.lock().as_ref().filter(|writer| !writer.is_closed()).cloned()
    }

    /// Subscribes to `uri` (again is fine), within the session's bound.
    pub(crate) fn subscribe(&self, uri: &str) -> Result<(), SessionError> {
        let mut held = self.subscriptions.lock();
        if !held.contains(uri) && held.len() >= MAX_SUBSCRIPTIONS {
            return Err(SessionError::TooManySubscriptions(MAX_SUBSCRIPTIONS));
        }
        held.insert(uri.to_owned());
        Ok(())
    }

    /// Unsubscribes from `uri`; false if it was not subscribed.
    pub(crate) fn unsubscribe(&self, uri: &str) -> bool {
        self.subscriptions.lock().remove(uri)
    }

    pub(crate) fn is_subscribed(&self, uri: &str) -> bool {
        self.subscriptions.lock().contains(uri)
    }

    /// Allocates the next server → client request id (integers from 0, per session) and the
    /// channel its answer will arrive on.
    pub(crate) fn register_request(&self) -> Result<(i64, oneshot::Receiver<Answer>), SessionError> {
        let mut pending = self.pending.lock();
        if pending.len() >= self.limits.max_outstanding {
            return Err(SessionError::TooManyOutstanding(self.limits.max_outstanding));
        }
        let id = self.next_request_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        pending.insert(id, tx);
        Ok((id, rx))
    }

    /// Drops a request that will not be waited for any more (answered, timed out, stopped).
    pub(crate) fn forget_request(&self, id: i64) {
        self.pending.lock().remove(&id);
    }

    /// Hands a POSTed answer to the request waiting for it; false if none is.
    pub(crate) fn deliver(&self, id: &RequestId, answer: Answer) -> bool {
        let RequestId::Number(id) = id else {
            return false;
        };
        let waiter = self.pending.lock().remove(id);
        waiter.is_some_and(|tx| tx.send(answer).is_ok())
    }

    /// Records a running call so that `notifications/cancelled` can stop it. The returned
    /// serial lets the call untrack itself without removing a later call that reused its id.
    pub(crate) fn track_call(&self, id: RequestId, task: AbortHandle) -> Result<u64, SessionError> {
        let mut calls = self.calls.lock();
        if calls.contains_key(&id) {
            return Err(SessionError::DuplicateCall(id));
        }
        if calls.len() >= self.limits.max_calls {
            return Err(SessionError::TooManyCalls(self.limits.max_calls));
        }
        let serial = self.next_call_serial.fetch_add(1, Ordering::Relaxed);
        calls.insert(id, (serial, task));
        Ok(serial)
    }

    /// Called by a call's task when it ends, however it ends.
    pub(crate) fn untrack_call(&self, id: &RequestId, serial: u64) {
        let mut calls = self.calls.lock();
        if calls.get(id).is_some_and(|(current, _)| *current == serial) {
            calls.remove(id);
        }
    }

    /// Stops the call with this request id; false if no such call is running.
    pub(crate) fn cancel_call(&self, id: &RequestId) -> bool {
        let task = self.calls.lock().remove(id);
        task.map(|(_, task)| task.abort()).is_some()
    }

    /// Ends the session: stops its calls, fails its waiting requests, ends its GET stream.
    pub(crate) fn close(&self) {
        let calls: Vec<AbortHandle> = self.calls.lock().drain().map(|(_, (_, t))| t).collect();
        calls.iter().for_each(AbortHandle::abort);
        self.pending.lock().clear();
        self.subscriptions.lock().clear();
        if let Some(standalone) = self.standalone.lock().take() {
            standalone.finish();
        }
        self.resumable.lock().drain(..).for_each(|writer| writer.finish());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn session(max_outstanding: usize, max_calls: usize) -> Session {
        let limits = SessionLimits { max_outstanding, max_calls };
        Session::new("s".into(), "2025-11-25", ClientCaps::default(), limits)
    }

    #[test]
    fn capabilities_follow_the_declared_keys() {
        let caps = json!({"elicitation": {}, "roots": {"listChanged": true}});
        let parsed = ClientCaps::from_initialize(Some(&caps));
        assert!(parsed.elicitation && parsed.roots);
        assert!(!parsed.elicitation_url && !parsed.sampling);
        let url = json!({"elicitation": {"form": {}, "url": {}}, "sampling": {}});
        let parsed = ClientCaps::from_initialize(Some(&url));
        assert!(parsed.elicitation_url && parsed.sampling);
        assert_eq!(ClientCaps::from_initialize(None), ClientCaps::default());
    }

    #[tokio::test]
    async fn request_ids_count_from_zero_and_answers_reach_their_waiter() {
        let session = session(2, 1);
        let (first, _rx0) = session.register_request().unwrap();
        let (second, rx1) = session.register_request().unwrap();
        assert_eq!((first, second), (0, 1));
        assert!(matches!(session.register_request(), Err(SessionError::TooManyOutstanding(2))));
        assert!(session.deliver(&RequestId::Number(1), Ok(json!({"x": 1}))));
        assert_eq!(rx1.await.unwrap().unwrap(), json!({"x": 1}));
        assert!(!session.deliver(&RequestId::Number(1), Ok(json!({}))));
        assert!(!session.deliver(&RequestId::String("0".into()), Ok(json!({}))));
    }

    #[tokio::test]
    async fn second_live_standalone_stream_is_refused() {
        let session = session(1, 1);
        let body = session.open_standalone().unwrap();
        assert!(matches!(session.open_standalone(), Err(SessionError::StreamBusy)));
        drop(body);
        assert!(session.open_standalone().is_ok());
    }

    #[tokio::test]
    async fn calls_are_bounded_unique_and_cancellable() {
        let session = session(1, 1);
        let task = tokio::spawn(std::future::pending::<()>());
        let id = RequestId::Number(3);
        session.track_call(id.clone(), task.abort_handle()).unwrap();
        let other = tokio::spawn(std::future::pending::<()>());
        assert!(matches!(
            session.track_call(id.clone(), other.abort_handle()),
            Err(SessionError::DuplicateCall(_))
        ));
        assert!(matches!(
            session.track_call(RequestId::Number(4), other.abort_handle()),
            Err(SessionError::TooManyCalls(1))
        ));
        assert!(session.cancel_call(&id));
        assert!(task.await.unwrap_err().is_cancelled());
        assert!(!session.cancel_call(&id));
        other.abort();
    }
}
