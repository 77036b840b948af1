//! Streaming an MRTR request's progress. The response stays plain JSON until the upstream
//! actually reports progress, so errors that must carry an HTTP status (-32021 is 400) keep it
//! whenever they come first; after the first progress notification the response is committed as
//! SSE (200), progress events follow, and the final response ends the stream. Dropping the
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

use super::body::{sse_event, FrontBody};
use super::service::{reply_outcome, FrontState, Outcome, STREAMED};
use crate::bridge::{MrtrRequest, Progress, Reply};
use crate::error::FrontError;
use crate::protocol::RequestId;

const PROGRESS_QUEUE: usize = 32;

/// Aborts the run when the stream is abandoned.
struct AbortOnDrop(JoinHandle<Result<Reply, FrontError>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Runs `req`, answering in JSON unless progress arrives first.
pub(super) async fn run_streaming(
    state: Arc<FrontState>,
    id: RequestId,
    req: MrtrRequest,
    token: Value,
    cache: String,
) -> Outcome {
    let started = Instant::now();
    let method = req.method.name();
    let (tx, mut rx) = mpsc::channel(PROGRESS_QUEUE);
    let worker = state.clone();
    let mut run =
        AbortOnDrop(tokio::spawn(async move { worker.bridge.run(req, Some(Progress { token, tx })).await }));
    tokio::select! {
        joined = &mut run.0 => reply_outcome(&id, flatten(joined), &cache),
        Some(first) = rx.recv() => commit_sse(Finish { state, id, cache, method, started }, run, rx, first),
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

fn commit_sse(finish: Finish, run: AbortOnDrop, mut rx: mpsc::Receiver<Value>, first: Value) -> Outcome {
    let (out, body) = mpsc::channel::<Bytes>(PROGRESS_QUEUE);
    tokio::spawn(async move {
        let mut run = run;
        if out.send(frame(&first)).await.is_err() {
            return;
        }
        loop {
            tokio::select! {
                Some(note) = rx.recv() => if out.send(frame(&note)).await.is_err() { return },
                joined = &mut run.0 => {
                    let outcome = reply_outcome(&finish.id, flatten(joined), &finish.cache);
                    // The handler counted this request as `streamed`; its real outcome is known now.
                    finish.state.record(finish.method, &outcome, finish.started);
                    let bytes = final_bytes(outcome).await;
                    let _ = out.send(sse_event(&bytes)).await;
                    return;
                }
            }
        }
    });
    let mut response = Response::new(FrontBody::Stream(body));
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    Outcome { label: STREAMED, round: None, response }
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

fn flatten(joined: Result<Result<Reply, FrontError>, tokio::task::JoinError>) -> Result<Reply, FrontError> {
    joined.unwrap_or_else(|e| Err(FrontError::Internal(format!("request task failed: {e}"))))
}
