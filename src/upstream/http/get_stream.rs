//! The session's standalone GET stream, kept open in the background.
//!
//! Legacy servers send some requests (the TypeScript SDK's `roots/list`, for instance) only on
//! this stream; a client that never opens it leaves them unanswered and the server stalls until
//! its own timeout. The task reconnects with `Last-Event-ID` when the stream drops, with a
//! bounded exponential backoff; it holds the session only weakly, so dropping the last handle
//! ends it. A server without a GET stream (405) is tolerated.
//!
//! A new session is handed out only once its first GET has been answered (or has failed, or a
//! bound has passed): a server such as the Python SDK's drops a request meant for this stream
//! while no stream is connected, so a call POSTed before the GET was answered could wait for
//! ever on a question that was never delivered.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::oneshot;

use super::inner::Inner;
use super::messages::{Cursor, MessageStream};
use crate::upstream::event::Origin;
use crate::upstream::UpstreamError;

/// Consecutive failed reconnections before the session is declared unhealthy.
const MAX_FAILURES: u32 = 6;
const BASE_DELAY: Duration = Duration::from_millis(200);
const MAX_DELAY: Duration = Duration::from_secs(10);

/// How one connection of the GET stream ended.
enum End {
    /// 405: the server offers no GET stream.
    Unsupported,
    /// The stream closed; true if it delivered at least one message.
    Dropped(bool),
    /// The session is gone.
    SessionGone,
}

/// Starts the GET-stream task of a freshly initialised session, and waits (at most `bound`)
/// until its first GET has been answered or has failed.
pub(crate) async fn spawn(inner: &Arc<Inner>, bound: Duration) {
    let (opened, answered) = oneshot::channel();
    let task = tokio::spawn(run(Arc::downgrade(inner), opened));
    inner.set_get_task(task.abort_handle());
    // Either outcome (a signal, or the sender dropped on failure) means "go on"; so does the bound.
    let _ = tokio::time::timeout(bound, answered).await;
}

async fn run(session: Weak<Inner>, opened: oneshot::Sender<()>) {
    let mut cursor = Cursor::default();
    let mut failures = 0u32;
    let mut opened = Some(opened);
    loop {
        match connect_and_read(&session, &mut cursor, &mut opened).await {
            Ok(End::Unsupported | End::SessionGone) => return,
            Ok(End::Dropped(true)) => failures = 0,
            Ok(End::Dropped(false)) => failures += 1,
            Err(UpstreamError::SessionExpired) => failures = MAX_FAILURES + 1,
            Err(e) => {
                tracing::debug!(error = %e, "upstream GET stream failed");
                failures += 1;
            }
        }
        if gives_up(failures) {
            // Without this stream, GET-stream requests would go unanswered: retire the session.
            if let Some(inner) = session.upgrade() {
                inner.state.mark_unhealthy();
            }
            return;
        }
        tokio::time::sleep(backoff(failures, cursor.retry)).await;
    }
}

/// Whether `failures` reconnections in a row retire the session: [`MAX_FAILURES`] are
/// tolerated.
fn gives_up(failures: u32) -> bool {
    failures > MAX_FAILURES
}

/// The server's `retry` (bounded) or an exponential delay after repeated failures.
fn backoff(failures: u32, retry: Option<Duration>) -> Duration {
    let exp = BASE_DELAY.saturating_mul(1 << failures.min(8));
    retry.unwrap_or(BASE_DELAY).max(exp).min(MAX_DELAY)
}

async fn connect_and_read(
    session: &Weak<Inner>,
    cursor: &mut Cursor,
    opened: &mut Option<oneshot::Sender<()>>,
) -> Result<End, UpstreamError> {
    let (transport, headers) = match session.upgrade() {
        Some(inner) => (inner.transport.clone(), inner.headers()),
        None => return Ok(End::SessionGone),
    };
    let answer = transport.get(&headers, cursor.last_event_id.as_deref()).await;
    if let Some(opened) = opened.take() {
        let _ = opened.send(());
    }
    let Some(resp) = answer? else {
        return Ok(End::Unsupported);
    };
    let max = transport.settings().max_event_bytes;
    let mut stream = MessageStream::new(resp, max)?.with_cursor(cursor.clone());
    let mut delivered = false;
    let result = loop {
        match stream.next().await {
            Ok(Some(text)) => {
                let Some(inner) = session.upgrade() else {
                    break Ok(End::SessionGone);
                };
                if let Err(e) = inner.dispatch(&text, Origin::Unattributed).await {
                    tracing::warn!(error = %e, "bad message on the upstream GET stream");
                }
                delivered = true;
            }
            Ok(None) => break Ok(End::Dropped(delivered)),
            Err(e) => break Err(e),
        }
    };
    *cursor = stream.cursor().clone();
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn six_failures_in_a_row_are_tolerated_and_a_seventh_is_not() {
        assert!(!gives_up(0));
        assert!(!gives_up(MAX_FAILURES));
        assert!(gives_up(MAX_FAILURES + 1));
        assert_eq!(MAX_FAILURES, 6);
    }

    #[test]
    fn backoff_grows_and_stays_bounded() {
        assert_eq!(backoff(0, None), BASE_DELAY);
        assert!(backoff(3, None) > backoff(1, None));
        assert_eq!(backoff(30, None), MAX_DELAY);
        assert_eq!(backoff(0, Some(Duration::from_secs(3600))), MAX_DELAY);
        assert_eq!(backoff(0, Some(Duration::from_secs(1))), Duration::from_secs(1));
    }
}
