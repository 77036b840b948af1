//! Streaming an MRTR request's progress and log messages. The response stays plain JSON until
//! the upstream actually sends a notification the request may see, so errors that must carry an
//! HTTP status (-32021 is 400) keep it whenever they come first; after the first notification
//! the response is committed as SSE (200), the notifications follow in the order the upstream
//! sent them, and the final response ends the stream. Dropping the
//! stream (the client closed it, which 2026-07-28 defines as cancellation) aborts the run, and
//! the run's guard cancels the upstream call.

use std::sync::Arc;

use bytes::Bytes;
use http::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use http::{Response, StatusCode};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::Instrument;

use super::outcome::{self, Outcome, OutcomeLabel};
use super::service::{reply_outcome, FrontState};
use crate::body::{sse_event, FrontBody};
use crate::bridge::{MrtrRequest, Notes, Reply};
use crate::defaults;
use crate::error::FrontError;
use crate::protocol::log_level::LogLevel;
use crate::protocol::RequestId;

type Joined = Result<Result<Reply, FrontError>, tokio::task::JoinError>;

/// Aborts the run when the stream is abandoned.
struct AbortOnDrop(JoinHandle<Result<Reply, FrontError>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The run as the SSE pump receives it: still going, or already ended with its result.
enum RunState {
    Running(AbortOnDrop),
    Ended(Joined),
}

/// Runs `req`, answering in JSON unless a notification for the client arrives first.
pub(super) async fn run_streaming(
    state: Arc<FrontState>,
    id: RequestId,
    req: MrtrRequest,
    progress_token: Option<Value>,
    log_level: Option<LogLevel>,
    cache: String,
) -> Outcome {
    let started = Instant::now();
    let method = req.method.name();
    let (tx, mut rx) = mpsc::channel(defaults::NOTES_QUEUE);
    let worker = state.clone();
    let notes = Notes { progress_token, log_level, tx };
    let run = async move { worker.bridge.run(req, Some(notes)).await };
    // The run and the pump log inside the request's span, so their lines carry its id.
    // Its rounds' spans, when the request is traced, are children of the request's.
    let mut run = AbortOnDrop(crate::telemetry::spawn(run.in_current_span()));
    let finish = Finish { state, id, cache, method, started };
    // Progress first: when the run ends with notifications queued, both branches are ready,
    // and the notifications must win (they go out before the result, as SSE).
    let joined = tokio::select! {
        biased;
        Some(first) = rx.recv() => return commit_sse(finish, RunState::Running(run), rx, first),
        joined = &mut run.0 => joined,
    };
    // The run has ended, so all it sent is queued by now, even a note sent just before the end.
    match rx.try_recv() {
        Ok(first) => commit_sse(finish, RunState::Ended(joined), rx, first),
        Err(_) => reply_outcome(&finish.id, flatten(joined), &finish.cache),
    }
}

/// What the stream needs to finish the request once the run ends.
struct Finish {
    state: Arc<FrontState>,
    id: RequestId,
    cache: String,
    method: &'static str,
    started: Instant,
}

impl Finish {
    /// The client closed the stream before its result: recorded now, since nothing else will.
    fn abandoned(&self) {
        outcome::record_abandoned(&self.state.metrics, self.method, self.started);
    }
}

fn commit_sse(finish: Finish, run: RunState, rx: mpsc::Receiver<Value>, first: Value) -> Outcome {
    let (out, body) = mpsc::channel::<Bytes>(defaults::NOTES_QUEUE);
    tokio::spawn(pump(finish, run, rx, first, out).in_current_span());
    sse_response(body)
}

/// A `200 text/event-stream` response whose events are the bytes `body` receives, unbuffered by
/// proxies on the way.
pub(super) fn sse_response(body: mpsc::Receiver<Bytes>) -> Outcome {
    let mut response = Response::new(FrontBody::Stream(body));
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    Outcome::plain(OutcomeLabel::Streamed, response)
}

/// Writes every progress note in the order the run sent it, then the result. Returning early
/// (the client went away) records the request as abandoned and drops the run, which aborts it
/// and cancels the upstream call.
async fn pump(
    finish: Finish,
    run: RunState,
    mut rx: mpsc::Receiver<Value>,
    first: Value,
    out: mpsc::Sender<Bytes>,
) {
    if out.send(frame(&first)).await.is_err() {
        return finish.abandoned();
    }
    let joined = match run {
        RunState::Ended(joined) => joined,
        RunState::Running(mut run) => loop {
            tokio::select! {
                // A client that closed the stream is noticed now, not on the next write.
                biased;
                () = out.closed() => return finish.abandoned(),
                note = rx.recv() => match note {
                    Some(note) => if out.send(frame(&note)).await.is_err() { return finish.abandoned() },
                    // The run dropped its sender: it has ended or is about to.
                    None => break (&mut run.0).await,
                },
                joined = &mut run.0 => break joined,
            }
        },
    };
    // Notes the run queued before it ended still precede the result.
    while let Ok(note) = rx.try_recv() {
        if out.send(frame(&note)).await.is_err() {
            return finish.abandoned();
        }
    }
    let outcome = reply_outcome(&finish.id, flatten(joined), &finish.cache);
    // The handler counted this request as `streamed`; its real outcome is known now.
    finish.state.record(finish.method, &outcome, finish.started);
    let bytes = final_bytes(outcome).await;
    let _ = out.send(sse_event(&bytes)).await;
}

fn frame(message: &Value) -> Bytes {
    sse_event(&serde_json::to_vec(message).unwrap_or_default())
}

/// The JSON body of a response built for the JSON path, reused as the stream's last event.
async fn final_bytes(outcome: Outcome) -> Vec<u8> {
    use http_body_util::BodyExt;
    match outcome.response.into_body().collect().await {
        Ok(c) => c.to_bytes().to_vec(),
        Err(never) => match never {},
    }
}

fn flatten(joined: Joined) -> Result<Reply, FrontError> {
    joined.unwrap_or_else(|e| Err(FrontError::from(e)))
}
