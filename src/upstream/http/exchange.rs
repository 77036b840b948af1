//! The HTTP side of one call: POST the request, read its response (JSON or SSE), routing every
//! message through the session, and resume the stream when a 2025-11-25 server closes it
//! before the response (priming event, `retry`, close) with GET + `Last-Event-ID`, honouring
//! `retry` within bounds.
//!
//! A 404 to the first POST of a call means the server forgot the session before anything of
//! the call happened: the session renews itself ([`Inner::renew`]) and the POST is sent once
//! more, on the new session. A second 404 in a row, or a 404 to a resumption (the call has
//! already run on the forgotten session), fails the call as expired.

use std::sync::Arc;
use std::time::Duration;

use super::slots::SlotBody;
use bytes::Bytes;
use http::Response;

use super::inner::Inner;
use super::messages::{Cursor, MessageStream};
use super::session::TraceHeaders;
use crate::upstream::event::{EventTx, Origin};
use crate::upstream::UpstreamError;

/// Most reconnections of one call's response stream.
const MAX_RESUMES: usize = 32;
/// Delay before resuming when the server sent no `retry`, and the most we honour.
const DEFAULT_RETRY: Duration = Duration::from_millis(500);
const MAX_RETRY: Duration = Duration::from_secs(10);
/// Longest a call's stream is read past its response so that its connection can be reused.
const DRAIN_AFTER_RESPONSE: Duration = Duration::from_millis(50);
/// Longest a call's stream is read, unparsed, once its consumer is gone (a round that ended in
/// replay mode cancels its call; a server may then end the stream). Read to its end, the
/// connection is reused; cut, it is closed and the next POST opens a new one, which costs a
/// legacy server far more than reading a few bytes. An upstream whose cancelled streams keep
/// running past this has them cut at once (see `drain.rs`).
const DRAIN_AFTER_DROP: Duration = Duration::from_millis(250);

/// The call's reader, polled by the [`Call`](crate::upstream::Call) itself: any failure
/// becomes the call's terminal event. It ends by itself once the call is dropped: at once if
/// the response has not started, else after draining the stream for at most
/// [`DRAIN_AFTER_DROP`] (or at once, on an upstream that keeps such streams open: see
/// `drain.rs`).
pub(super) async fn drive(inner: Arc<Inner>, id: i64, body: Vec<u8>, tx: EventTx, trace: TraceHeaders) {
    if let Err(e) = post_and_read(&inner, id, body.into(), &trace, &tx).await {
        let _ = tx.send(Err(e)).await;
    }
}

async fn post_and_read(
    inner: &Arc<Inner>,
    id: i64,
    body: Bytes,
    trace: &TraceHeaders,
    tx: &EventTx,
) -> Result<(), UpstreamError> {
    // Biased: a consumer that is gone wins over anything the stream still has queued.
    let resp = tokio::select! {
        biased;
        () = tx.closed() => return Ok(()),
        resp = post_renewing(inner, body, trace) => resp?,
    };
    let max = inner.transport.settings().max_event_bytes;
    let mut stream = MessageStream::new(resp, max)?;
    let answered = tokio::select! {
        biased;
        () = tx.closed() => None,
        answered = read_until_response(inner, &mut stream, id) => Some(answered?),
    };
    match answered {
        Some(true) => {
            stream.drain(DRAIN_AFTER_RESPONSE).await;
        }
        None => {
            let drains = inner.transport.cancel_drain();
            if drains.should_drain() {
                drains.record(stream.drain(DRAIN_AFTER_DROP).await);
            }
        }
        Some(false) if tx.is_closed() => {}
        Some(false) => {
            tokio::select! {
                biased;
                () = tx.closed() => {}
                resumed = resume(inner, id, stream.cursor().clone()) => resumed?,
            }
        }
    }
    Ok(())
}

/// POSTs the call (with its trace context); on a 404 renews the session and POSTs it once more.
async fn post_renewing(
    inner: &Arc<Inner>,
    body: Bytes,
    trace: &TraceHeaders,
) -> Result<Response<SlotBody>, UpstreamError> {
    let current = inner.current();
    match inner.transport.post_call(&current.headers.traced(trace), body.clone()).await {
        Err(UpstreamError::SessionExpired) => {
            inner.renew(current.generation).await?;
            inner.transport.post_call(&inner.headers().traced(trace), body).await
        }
        result => result,
    }
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
    Ok(!inner.state.router.lock().is_pending(id))
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
        let Some(resp) = inner.transport.get(&inner.headers(), Some(&last)).await? else {
            return Err(UpstreamError::Closed(
                "response stream ended early and the server does not allow resuming it (405)".to_owned(),
            ));
        };
        let mut stream = MessageStream::new(resp, max)?.with_cursor(cursor);
        if read_until_response(inner, &mut stream, id).await? {
            stream.drain(DRAIN_AFTER_RESPONSE).await;
            return Ok(());
        }
        cursor = stream.cursor().clone();
    }
    Err(UpstreamError::Closed(format!("no response after resuming the stream {MAX_RESUMES} times")))
}
