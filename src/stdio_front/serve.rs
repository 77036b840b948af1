//! The serve loop: read lines, start one task per message, reap tasks, cancel on request; at
//! the end of input (or on the shutdown signal) stop reading and drain within a bound.
//!
//! At `max_in_flight` requests the loop keeps reading: a request past the bound is answered at
//! once with the HTTP front's overload error (`-32603`, "gateway overloaded"), written
//! straight to the output queue without a task, while cancellations still reach the requests
//! they name. Not reading instead would have stalled the client's `notifications/cancelled`
//! behind the requests it wants to cancel. Only when the output queue is full too (the client
//! is not reading what it is sent) does the loop stop reading stdin until there is room, so
//! memory stays bounded either way.

use std::convert::Infallible;
use std::fmt::Display;
use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body::Body;
use http_body_util::Full;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tower::{Service, ServiceExt};

use super::inflight::InFlight;
use super::output::{self, one_line};
use super::reply;
use super::synth::{incoming, Incoming};
use super::StdioFrontError;
use crate::error::FrontError;
use crate::protocol::jsonrpc::error_bytes;
use crate::protocol::{headers, methods};
use crate::upstream::stdio::lines::{Line, LineReader};

/// How the stdio front serves.
#[derive(Debug, Clone)]
pub struct StdioOptions {
    /// The front's path, which synthesised requests are posted to.
    pub path: String,
    /// The longest line read; a longer one is refused like an oversized HTTP body.
    pub max_line_bytes: usize,
    /// Requests served at once; past it a request is refused at once (overloaded).
    pub max_in_flight: usize,
    /// How long in-flight requests may take to finish once input has ended.
    pub drain: Duration,
}

/// Serves `service` on `input`/`output` until `input` ends or `shutdown` completes, then
/// drains. A closed `output` (the client went away) ends it too, cancelling what is in flight.
pub async fn serve<S, B>(
    service: S,
    input: impl AsyncRead + Unpin,
    output: impl AsyncWrite + Unpin + Send + 'static,
    opts: StdioOptions,
    shutdown: impl Future<Output = ()>,
) -> Result<(), StdioFrontError>
where
    S: Service<Request<Full<Bytes>>, Response = Response<B>, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Display + Send,
{
    serve_then_stop(service, input, output, opts, shutdown, || {}).await
}

/// [`serve`], calling `stop` once reading has ended and before the drain: requests that never
/// end by themselves (listen streams) are ended there, so the drain does not wait for them.
pub async fn serve_then_stop<S, B>(
    service: S,
    input: impl AsyncRead + Unpin,
    output: impl AsyncWrite + Unpin + Send + 'static,
    opts: StdioOptions,
    shutdown: impl Future<Output = ()>,
    stop: impl FnOnce(),
) -> Result<(), StdioFrontError>
where
    S: Service<Request<Full<Bytes>>, Response = Response<B>, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Display + Send,
{
    let (lines, queued) = mpsc::channel(output::QUEUE);
    let mut writer = tokio::spawn(output::write_lines(output, queued));
    let mut reader = LineReader::new(input, opts.max_line_bytes);
    let mut inflight = InFlight::default();
    tokio::pin!(shutdown);
    let (mut signalled, mut written) = (false, None);
    let ended = loop {
        // Room for a task, or for a refusal line on the output queue.
        let room = inflight.len() < opts.max_in_flight || lines.capacity() > 0;
        tokio::select! {
            // Stop conditions first, then finished tasks (their ids leave the table before a
            // new line may reuse one), then input.
            biased;
            () = &mut shutdown => { signalled = true; break Ok(()) }
            done = &mut writer => { written = Some(writer_result(done)); break Ok(()) }
            Some(()) = inflight.reap() => {}
            line = reader.next(), if room => match line {
                Ok(Some(line)) => dispatch(line, &service, &opts, &lines, &mut inflight),
                Ok(None) => break Ok(()),
                Err(e) => break Err(StdioFrontError::Read(e)),
            },
        }
    };
    stop();
    drain(&mut inflight, opts.drain, signalled, shutdown).await;
    drop(lines);
    let flushed = match written {
        Some(done) => done,
        None => flush(writer, opts.drain).await,
    };
    ended.and(flushed)
}

/// Starts the work for one line.
fn dispatch<S, B>(
    line: Line,
    service: &S,
    opts: &StdioOptions,
    lines: &mpsc::Sender<Bytes>,
    inflight: &mut InFlight,
) where
    S: Service<Request<Full<Bytes>>, Response = Response<B>, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Display + Send,
{
    let full = inflight.len() >= opts.max_in_flight;
    let text = match line {
        Line::Text(text) => text,
        Line::TooLong => {
            let e = FrontError::PayloadTooLarge { limit: opts.max_line_bytes };
            let bytes = error_bytes(None, &e.to_object());
            return if full { refuse(lines, bytes) } else { answer(lines, bytes, inflight) };
        }
    };
    match incoming(text, &opts.path) {
        Incoming::Forward { id: Some(id), .. } if full => {
            tracing::warn!(max_in_flight = opts.max_in_flight, %id, "stdio request refused: too many in flight");
            refuse(lines, error_bytes(Some(&id), &FrontError::Overloaded.to_object()));
        }
        // A notification (or a line the front would refuse unparsed) past the bound: nothing
        // may answer a notification, so it is dropped.
        Incoming::Forward { id: None, .. } if full => {
            tracing::warn!(
                max_in_flight = opts.max_in_flight,
                "stdio message without an id dropped: too many in flight"
            );
        }
        Incoming::Answer(bytes) if full => refuse(lines, bytes),
        Incoming::Forward { request, id } => {
            let (service, out) = (service.clone(), lines.clone());
            let listen =
                request.headers().get(headers::METHOD).is_some_and(|m| m == methods::SUBSCRIPTIONS_LISTEN);
            inflight.spawn(id.clone(), async move {
                let Ok(response) = service.oneshot(*request).await;
                if let (Ok(false), Some(id)) = (reply::relay(response, &out).await, &id) {
                    reply::unanswered(id, listen, &out).await;
                }
            });
        }
        Incoming::Cancel(id) => {
            let found = inflight.cancel(&id);
            tracing::debug!(%id, found, "notifications/cancelled");
        }
        Incoming::Answer(bytes) => answer(lines, bytes, inflight),
        Incoming::Ignore => {}
    }
}

/// Queues `bytes` as a line without a task (the loop is at its bound of tasks). The loop reads
/// only while the queue has room, so this fails only if tasks filled it meanwhile: then the
/// client is not reading its output, and the line is dropped with a log line.
fn refuse(lines: &mpsc::Sender<Bytes>, bytes: Vec<u8>) {
    if lines.try_send(one_line(bytes)).is_err() {
        tracing::warn!("stdio output queue full: an error line for the client was dropped");
    }
}

/// Queues `bytes` as a line from a task, so a full queue never stalls the loop.
fn answer(lines: &mpsc::Sender<Bytes>, bytes: Vec<u8>, inflight: &mut InFlight) {
    let out = lines.clone();
    inflight.spawn(None, async move {
        let _ = out.send(one_line(bytes)).await;
    });
}

/// Lets in-flight requests finish within `budget`; a signal (a second one, when input ended
/// first) cuts the wait short. What is left is aborted.
async fn drain(
    inflight: &mut InFlight,
    budget: Duration,
    signalled: bool,
    shutdown: std::pin::Pin<&mut impl Future<Output = ()>>,
) {
    if inflight.len() > 0 {
        tracing::info!(in_flight = inflight.len(), ?budget, "input ended: draining in-flight requests");
    }
    let all = async { while inflight.reap().await.is_some() {} };
    let interrupted = async {
        if signalled {
            std::future::pending::<()>().await;
        }
        shutdown.await;
    };
    let finished = tokio::select! {
        biased;
        () = interrupted => false,
        done = tokio::time::timeout(budget, all) => done.is_ok(),
    };
    if !finished {
        tracing::warn!(left = inflight.len(), "drain cut short: cancelling the requests left");
    }
    inflight.abort_all().await;
}

/// Lets the writer write what is queued, within `budget` (a client that stopped reading
/// stdout must not keep the process alive).
async fn flush(
    mut writer: tokio::task::JoinHandle<std::io::Result<()>>,
    budget: Duration,
) -> Result<(), StdioFrontError> {
    match tokio::time::timeout_at(Instant::now() + budget, &mut writer).await {
        Ok(done) => writer_result(done),
        Err(_) => {
            writer.abort();
            Ok(())
        }
    }
}

/// The writer's end: a client that closed its side of stdout is an end, not a failure.
fn writer_result(
    written: Result<std::io::Result<()>, tokio::task::JoinError>,
) -> Result<(), StdioFrontError> {
    match written {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Ok(Err(e)) => Err(StdioFrontError::Write(e)),
        Err(e) => Err(StdioFrontError::Write(std::io::Error::other(e))),
    }
}

#[cfg(test)]
mod tests;
