//! The test harness: start a demo legacy server and a gateway in front of it, talk to the
//! gateway like a 2026-07-28 client, answer its questions, read its metrics.
//!
//! Tests should read like the protocol: `client.call_tool("greet", json!({})).send()`, then
//! `reply.input_required()`, then a retry with `.state(s).responses(answer_all(&requests))`.
//! Every wait here is bounded by [`WAIT`]; nothing sleeps to wait for readiness, it polls.

pub(crate) mod answers;
pub(crate) mod client;
pub(crate) mod fakebin;
pub(crate) mod faulty;
pub(crate) mod harness;
pub(crate) mod legacy;
pub(crate) mod legacy_client;
pub(crate) mod otlp;
pub(crate) mod plaintext;
pub(crate) mod process;
pub(crate) mod redis;
pub(crate) mod reply;
pub(crate) mod rig;
pub(crate) mod sse_legacy;
pub(crate) mod stdio;
pub(crate) mod stdio_front;
pub(crate) mod transports;

use std::time::Duration;

pub(crate) use answers::answer_all;
pub(crate) use client::Client;
pub(crate) use harness::{Harness, Setup};
pub(crate) use reply::Reply;

/// The longest any single step of a test may take before it fails as hung.
pub(crate) const WAIT: Duration = Duration::from_secs(10);

/// The longest a gateway *process* may take to start and report ready: it loads a debug binary
/// and opens its first upstream session, which on a loaded 2-core machine took over [`WAIT`].
/// Only a safety net against a hang; nothing is measured against it.
pub(crate) const PROCESS_START_WAIT: Duration = Duration::from_secs(60);

/// Why a harness step failed. Tests return `Result<(), HarnessError>` and use `?`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HarnessError {
    #[error("HTTP request to the gateway failed: {0}")]
    Http(#[from] hyper_util::client::legacy::Error),
    #[error("reading a response body failed: {0}")]
    Body(#[from] hyper::Error),
    #[error("building a request failed: {0}")]
    Request(#[from] http::Error),
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
    #[error("gateway configuration refused: {0}")]
    Config(#[from] mrtr_gateway::config::ConfigError),
    #[error("gateway failed to start: {0}")]
    Start(#[from] mrtr_gateway::app::AppError),
    #[error("minting a JWT failed: {0}")]
    Jwt(#[from] jsonwebtoken::errors::Error),
    #[error("a test task panicked or was cancelled: {0}")]
    Task(#[from] tokio::task::JoinError),
    #[error("timed out after {WAIT:?} waiting for {0}")]
    Timeout(String),
    #[error("unexpected reply: {0}")]
    Unexpected(String),
}

/// What every test returns.
pub(crate) type TestResult<T = ()> = Result<T, HarnessError>;

/// Runs `fut` with the suite's bound, naming what was awaited if it does not finish.
pub(crate) async fn bounded<T>(what: &str, fut: impl std::future::Future<Output = T>) -> TestResult<T> {
    bounded_for(WAIT, what, fut).await
}

/// [`bounded`] with a bound of its own.
pub(crate) async fn bounded_for<T>(
    limit: Duration,
    what: &str,
    fut: impl std::future::Future<Output = T>,
) -> TestResult<T> {
    tokio::time::timeout(limit, fut).await.map_err(|_| HarnessError::Timeout(what.to_owned()))
}

/// Polls `check` every 10 ms until it holds, for at most [`WAIT`].
pub(crate) async fn eventually(what: &str, mut check: impl FnMut() -> bool) -> TestResult {
    bounded(what, async {
        while !check() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
}
