//! One upstream call as its consumer sees it, whatever the transport: the ordered stream of
//! what the legacy server says during it, ending with its response.
//!
//! A transport opens a call with [`Call::open`], which registers it with the session's router,
//! and feeds the returned queue (the call's own reader for HTTP, the process's stdout reader
//! for stdio). The queue is bounded, so a slow consumer slows the upstream reader instead of
//! growing memory. The whole call is bounded by the request timeout, so a hung upstream shows
//! up as [`UpstreamError::Timeout`], distinct from a dead one ([`UpstreamError::Closed`]).
//!
//! An HTTP call's reader is not a task of its own: it is a future the call polls whenever its
//! consumer waits for the next event ([`Call::with_reader`]), so the upstream's response wakes
//! the consumer's task directly. A spawned reader cost two task hand-offs per call (its start,
//! and each event it queued), which on a plain call were a good part of the gateway's added
//! latency. The reader becomes a task only when nobody will poll the call for a while: when it
//! is parked ([`Call::detach`]), or when it drops with its stream still to drain so that its
//! connection is reused.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::FutureExt;
use tokio::sync::mpsc;
use tokio::task::AbortHandle;
use tokio::time::Instant;

use super::event::{EventTx, UpstreamEvent};
use super::state::SessionState;
use super::UpstreamError;
use crate::protocol::jsonrpc::Outcome;
use crate::protocol::RequestId;
use crate::telemetry::ExchangeTrace;

/// Events buffered per call before the reader waits for the consumer.
const EVENT_QUEUE: usize = 64;

/// A transport's reader of one call, polled by the call itself (see the module doc).
pub(crate) type Reader = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A call in flight. Dropping it detaches it from the session and stops delivering its events:
/// an HTTP call's task then reads the rest of its stream, unparsed and bounded in time, so
/// that its connection is reused; other transports' tasks are aborted. Use
/// [`Session::cancel`](super::Session::cancel) to also tell the server.
pub struct Call {
    id: RequestId,
    raw_id: i64,
    rx: mpsc::Receiver<Result<UpstreamEvent, UpstreamError>>,
    state: Arc<SessionState>,
    deadline: Instant,
    timeout: Duration,
    task: Option<AbortHandle>,
    /// The reader this call polls while its consumer waits; `None` once it ended (or for a
    /// transport whose reader is a task).
    reader: Option<Reader>,
    finished: bool,
    /// The exchange's span, when the call runs in a traced request (ended by its outcome, or
    /// when the call is dropped).
    trace: Option<Box<ExchangeTrace>>,
    /// The response was delivered (not a failure).
    answered: bool,
}

// === impl Call ===

impl Call {
    /// Registers call `raw_id` with the session's router and returns it with the queue its
    /// transport feeds. Server requests reach it only when `surface` is true.
    pub(crate) fn open(
        state: &Arc<SessionState>,
        raw_id: i64,
        surface: bool,
        timeout: Duration,
    ) -> (Self, EventTx) {
        let (tx, rx) = mpsc::channel(EVENT_QUEUE);
        state.router.lock().insert(raw_id, tx.clone(), surface);
        let call = Self {
            id: RequestId::Number(raw_id),
            raw_id,
            rx,
            state: state.clone(),
            deadline: Instant::now() + timeout,
            timeout,
            task: None,
            reader: None,
            finished: false,
            trace: None,
            answered: false,
        };
        (call, tx)
    }

    /// Ties the transport's per-call task to this call: it is aborted when the call drops.
    pub(crate) fn with_task(mut self, task: AbortHandle) -> Self {
        self.task = Some(task);
        self
    }

    /// Gives the call its reader, polled whenever the consumer waits for an event. It must end
    /// by itself soon once the queue is closed: a reader still running when the call drops is
    /// spawned to finish.
    pub(crate) fn with_reader(mut self, reader: Reader) -> Self {
        self.reader = Some(reader);
        self
    }

    /// Runs the reader as a task of its own from now on, for a call nobody polls for a while (a
    /// parked call) whose stream must still be read: a server's ping answered, its events
    /// queued, a failure noticed.
    pub(crate) fn detach(&mut self) {
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            if let Some(reader) = self.reader.take() {
                rt.spawn(reader);
            }
        }
    }

    /// Ties the exchange's span to this call.
    pub(crate) fn with_trace(mut self, mut trace: Box<ExchangeTrace>) -> Self {
        trace.set_request_id(crate::telemetry::request_id(&self.id));
        self.trace = Some(trace);
        self
    }

    /// Bounds the call by `deadline` instead of the request timeout: a call kept running as a
    /// task lives as long as its task (`src/tasks/long.rs`).
    pub fn set_deadline(&mut self, deadline: Instant) {
        self.timeout = deadline.saturating_duration_since(Instant::now());
        self.deadline = deadline;
    }

    /// The upstream id of this call (the session's own, never the front's).
    pub fn id(&self) -> &RequestId {
        &self.id
    }

    /// The next event, in the order the server sent it. `Ok(None)` once the response has been
    /// delivered. An `Err` is terminal and marks the session unhealthy.
    pub async fn next_event(&mut self) -> Result<Option<UpstreamEvent>, UpstreamError> {
        let deadline = self.deadline;
        self.next_event_within(deadline).await.unwrap_or(Err(UpstreamError::Timeout(self.timeout)))
    }

    /// [`next_event`](Self::next_event), or `None` once `limit` has passed if it comes before
    /// the call's own deadline (at the same instant the call's deadline wins). One timer for
    /// both: a caller with a deadline of its own (a round's) needs no second timer beside it.
    pub async fn next_event_within(
        &mut self,
        limit: Instant,
    ) -> Option<Result<Option<UpstreamEvent>, UpstreamError>> {
        if self.finished {
            return Some(Ok(None));
        }
        let (reader, rx) = (&mut self.reader, &mut self.rx);
        let until = limit.min(self.deadline);
        let next = tokio::time::timeout_at(until, std::future::poll_fn(|cx| recv(reader, rx, cx))).await;
        let result = match next {
            Err(_) if limit < self.deadline => return None,
            Err(_) => Err(UpstreamError::Timeout(self.timeout)),
            Ok(None) => Err(UpstreamError::Closed("call ended without a response".to_owned())),
            Ok(Some(event)) => event,
        };
        self.finished =
            !matches!(result, Ok(UpstreamEvent::Request { .. } | UpstreamEvent::Notification { .. }));
        if let Some(trace) = self.trace.as_mut().filter(|_| self.finished) {
            observe(trace, &result);
        }
        self.answered = matches!(result, Ok(UpstreamEvent::Response(_)));
        Some(self.state.note(result).map(Some))
    }
}

/// Moves the reader on (it queues what it read), then takes the next queued event. Both
/// register with `cx`, so either waking up wakes the consumer. A reader waiting for room in a
/// full queue is not stuck: the event taken here makes the room.
fn recv(
    reader: &mut Option<Reader>,
    rx: &mut mpsc::Receiver<Result<UpstreamEvent, UpstreamError>>,
    cx: &mut Context<'_>,
) -> Poll<Option<Result<UpstreamEvent, UpstreamError>>> {
    if let Some(running) = reader.as_mut() {
        if running.as_mut().poll(cx).is_ready() {
            *reader = None;
        }
    }
    rx.poll_recv(cx)
}

/// Ends an exchange's span with the call's last event.
fn observe(trace: &mut ExchangeTrace, result: &Result<UpstreamEvent, UpstreamError>) {
    match result {
        Ok(UpstreamEvent::Response(Outcome::Error(e))) => trace.answered(Some(e.code)),
        Ok(_) => trace.answered(None),
        Err(e) => trace.failed(e.label()),
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        // Past the response the task only reads the rest of the stream, briefly, so that its
        // connection can be reused: left to finish.
        if let Some(task) = self.task.as_ref().filter(|_| !self.answered) {
            task.abort();
        }
        self.state.router.lock().remove(self.raw_id);
        if let Some(mut reader) = self.reader.take() {
            // Closed, the queue tells the reader its consumer is gone: it stops, or drains
            // its stream (bounded in time). Most have nothing left to do by now.
            self.rx.close();
            if reader.as_mut().now_or_never().is_none() {
                if let Ok(rt) = tokio::runtime::Handle::try_current() {
                    rt.spawn(reader);
                }
            }
        }
    }
}

impl std::fmt::Debug for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call").field("id", &self.id).finish_non_exhaustive()
    }
}
