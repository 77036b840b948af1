//! One upstream call and the ordered stream of what the legacy server says during it.
//!
//! A background task POSTs the request and reads its response (JSON or SSE), routing every
//! message through the session's [`Router`](super::dispatch::Router); the call's events queue
//! is bounded, so a slow consumer slows the upstream reader instead of growing memory. When a
//! 2025-11-25 server closes the POST stream before the response (priming event, `retry`, close),
//! the task resumes it with GET + `Last-Event-ID`, honouring `retry` within bounds.
//!
//! The whole call is bounded by the request timeout, so a hung upstream shows up as
//! [`UpstreamError::Timeout`], distinct from a dead one ([`UpstreamError::Closed`]).

use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::AbortHandle;
use tokio::time::Instant;

use super::dispatch::{EventTx, Origin};
use super::messages::{Cursor, MessageStream};
use super::session::{Inner, Session};
use super::UpstreamError;
use crate::protocol::jsonrpc::{request_bytes, Outcome};
use crate::protocol::RequestId;

/// Events buffered per call before the reader waits for the consumer.
const EVENT_QUEUE: usize = 64;
/// Most reconnections of one call's response stream.
const MAX_RESUMES: usize = 32;
/// Delay before resuming when the server sent no `retry`, and the most we honour.
const DEFAULT_RETRY: Duration = Duration::from_millis(500);
const MAX_RETRY: Duration = Duration::from_secs(10);

/// Something the legacy server said during a call.
#[derive(Debug)]
pub enum UpstreamEvent {
    /// A server request to answer with [`Session::respond`].
    Request { id: RequestId, method: String, params: Option<Value> },
    /// A notification (progress, log message, list change, …).
    Notification { method: String, params: Option<Value> },
    /// The call's response; no event follows it.
    Response(Outcome),
}

/// A call in flight. Dropping it stops reading its stream and detaches it from the session;
/// use [`Session::cancel`] to also tell the server.
pub struct Call {
    id: RequestId,
    raw_id: i64,
    rx: mpsc::Receiver<Result<UpstreamEvent, UpstreamError>>,
    session: Session,
    deadline: Instant,
    timeout: Duration,
    task: AbortHandle,
    finished: bool,
}

// === impl Session (calls) ===

impl Session {
    /// Starts `method(params)` upstream. Server requests on its stream, and on the GET stream
    /// while it is the session's attached call, are surfaced as [`UpstreamEvent::Request`].
    pub fn call(&self, method: &str, params: Option<Value>) -> Call {
        self.start(method, params.as_ref(), true)
    }

    /// [`Session::call`] with borrowed params: they are only serialised, so a caller that keeps
    /// them (to replay the call in a later round) need not clone them.
    pub fn call_with(&self, method: &str, params: Option<&Value>) -> Call {
        self.start(method, params, true)
    }

    pub(crate) fn start(&self, method: &str, params: Option<&Value>, surface: bool) -> Call {
        let raw_id = self.next_id();
        let id = RequestId::Number(raw_id);
        let (tx, rx) = mpsc::channel(EVENT_QUEUE);
        self.inner.router.lock().insert(raw_id, tx.clone(), surface);
        let body = request_bytes(&id, method, params);
        let task = tokio::spawn(drive(self.inner.clone(), raw_id, body, tx));
        let timeout = self.inner.transport.settings().request_timeout;
        Call {
            id,
            raw_id,
            rx,
            session: self.clone(),
            deadline: Instant::now() + timeout,
            timeout,
            task: task.abort_handle(),
            finished: false,
        }
    }
}

// === impl Call ===

impl Call {
    /// The upstream id of this call (the session's own, never the front's).
    pub fn id(&self) -> &RequestId {
        &self.id
    }

    /// The next event, in the order the server sent it. `Ok(None)` once the response has been
    /// delivered. An `Err` is terminal and marks the session unhealthy.
    pub async fn next_event(&mut self) -> Result<Option<UpstreamEvent>, UpstreamError> {
        if self.finished {
            return Ok(None);
        }
        let next = tokio::time::timeout_at(self.deadline, self.rx.recv()).await;
        let result = match next {
            Err(_) => Err(UpstreamError::Timeout(self.timeout)),
            Ok(None) => Err(UpstreamError::Closed("call ended without a response".to_owned())),
            Ok(Some(event)) => event,
        };
        self.finished =
            !matches!(result, Ok(UpstreamEvent::Request { .. } | UpstreamEvent::Notification { .. }));
        self.session.inner.note(result).map(Some)
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        self.task.abort();
        self.session.inner.router.lock().remove(self.raw_id);
    }
}

impl std::fmt::Debug for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call").field("id", &self.id).finish_non_exhaustive()
    }
}

/// The call's reader task: any failure becomes the call's terminal event.
async fn drive(inner: std::sync::Arc<Inner>, id: i64, body: Vec<u8>, tx: EventTx) {
    if let Err(e) = post_and_read(&inner, id, body).await {
        let _ = tx.send(Err(e)).await;
    }
}

async fn post_and_read(inner: &Inner, id: i64, body: Vec<u8>) -> Result<(), UpstreamError> {
    let resp = inner.transport.post(&inner.headers, body).await?;
    let max = inner.transport.settings().max_event_bytes;
    let mut stream = MessageStream::new(resp, max)?;
    if read_until_response(inner, &mut stream, id).await? {
        return Ok(());
    }
    resume(inner, id, stream.cursor().clone()).await
}

/// Dispatches the stream's messages; true once the call has its response.
async fn read_until_response(
    inner: &Inner,
    stream: &mut MessageStream,
    id: i64,
) -> Result<bool, UpstreamError> {
    while let Some(text) = stream.next().await? {
        if inner.dispatch(&text, Origin::Post(id)).await? {
            return Ok(true);
        }
    }
    // The response may have come on another stream; the router then forgot the call.
    Ok(!inner.router.lock().is_pending(id))
}

/// Resumes a response stream the server closed early (2025-11-25 polling).
async fn resume(inner: &Inner, id: i64, mut cursor: Cursor) -> Result<(), UpstreamError> {
    let max = inner.transport.settings().max_event_bytes;
    for _ in 0..MAX_RESUMES {
        let Some(last) = cursor.last_event_id.clone() else {
            return Err(UpstreamError::Closed(
                "response stream ended before the response, with no event id to resume from".to_owned(),
            ));
        };
        tokio::time::sleep(cursor.retry.unwrap_or(DEFAULT_RETRY).min(MAX_RETRY)).await;
        let Some(resp) = inner.transport.get(&inner.headers, Some(&last)).await? else {
            return Err(UpstreamError::Closed(
                "response stream ended early and the server does not allow resuming it (405)".to_owned(),
            ));
        };
        let mut stream = MessageStream::new(resp, max)?.with_cursor(cursor);
        if read_until_response(inner, &mut stream, id).await? {
            return Ok(());
        }
        cursor = stream.cursor().clone();
    }
    Err(UpstreamError::Closed(format!("no response after resuming the stream {MAX_RESUMES} times")))
}
