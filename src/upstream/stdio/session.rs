//! One legacy session over stdio: a child process, initialised, whose stdin carries the
//! gateway's requests, responses and notifications in order, and whose stdout the supervisor
//! routes. [`Spawner`] opens them, one process per session, in two steps: start the process
//! ([`Spawner::prestart`], a [`SpareProcess`]), then initialise it with a client's
//! capabilities ([`Spawner::initialize`]). The pool may take the first step ahead of demand.

use std::sync::Arc;
use std::time::Duration;

/// Longest wait for the answer to the `ping` that follows `notifications/initialized`.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(2);

use serde_json::Value;

use super::process::{self, Input, InputTx};
use super::supervisor::{Supervisor, Watched};
use crate::protocol::jsonrpc::{notification_bytes, request_bytes, ErrorObject, Outgoing};
use crate::protocol::{methods, RequestId};
use crate::upstream::call::Call;
use crate::upstream::event::UpstreamEvent;
use crate::upstream::handshake::{self, InitializeResult, INITIALIZE_ID};
use crate::upstream::state::{self, SessionState};
use crate::upstream::{StdioSettings, UpstreamError, UpstreamSettings};

/// Opens stdio sessions by spawning the configured command.
#[derive(Clone)]
pub(crate) struct Spawner {
    settings: Arc<UpstreamSettings>,
}

/// A handle on one stdio session; clones share it.
#[derive(Clone)]
pub(crate) struct StdioSession {
    link: Arc<Link>,
    init: Arc<InitializeResult>,
}

/// A started process that has not been sent `initialize` yet. Dropping it stops the process.
pub(crate) struct SpareProcess {
    link: Link,
}

/// The running process as its session sees it.
struct Link {
    state: Arc<SessionState>,
    input: InputTx,
    supervisor: Supervisor,
    pid: u32,
    timeout: Duration,
}

// === impl Spawner ===

impl Spawner {
    pub(crate) fn new(settings: Arc<UpstreamSettings>) -> Result<Self, UpstreamError> {
        match &settings.stdio {
            Some(cmd) if !cmd.program.is_empty() => Ok(Self { settings }),
            _ => Err(UpstreamError::Settings("a stdio upstream needs a program to run".to_owned())),
        }
    }

    pub(crate) fn settings(&self) -> &UpstreamSettings {
        &self.settings
    }

    fn command(&self) -> Result<&StdioSettings, UpstreamError> {
        self.settings.stdio.as_ref().ok_or_else(|| UpstreamError::Settings("no command".to_owned()))
    }

    /// Starts a process and initialises it. On failure the process is stopped and reaped in
    /// the background.
    pub(crate) async fn spawn(&self, capabilities: &Value) -> Result<StdioSession, UpstreamError> {
        self.initialize(self.prestart()?, capabilities).await
    }

    /// Starts a process, leaving it waiting for `initialize`.
    pub(crate) fn prestart(&self) -> Result<SpareProcess, UpstreamError> {
        self.start_process().map(|link| SpareProcess { link })
    }

    /// Initialises a started process declaring `capabilities`. On failure the process is
    /// stopped and reaped in the background.
    pub(crate) async fn initialize(
        &self,
        spare: SpareProcess,
        capabilities: &Value,
    ) -> Result<StdioSession, UpstreamError> {
        let link = Arc::new(spare.link);
        let timeout = self.settings.request_timeout;
        let raw = tokio::time::timeout(timeout, handshake(&link, &self.settings, capabilities))
            .await
            .map_err(|_| UpstreamError::Timeout(timeout))??;
        let init = Arc::new(InitializeResult::parse(raw)?);
        link.send(notification_bytes(methods::INITIALIZED, None)).await?;
        link.settle().await;
        tracing::debug!(pid = link.pid, version = %init.protocol_version, "upstream process initialised");
        Ok(StdioSession { link, init })
    }

    fn start_process(&self) -> Result<Link, UpstreamError> {
        let cmd = self.command()?;
        let spawned = process::spawn(cmd)?;
        let pid = spawned.pid;
        tracing::info!(pid, program = %cmd.program, "upstream process started");
        let state = Arc::new(SessionState::new(&self.settings));
        let timeout = self.settings.request_timeout;
        let input = process::spawn_writer(spawned.stdin, state.clone(), pid, timeout);
        process::spawn_stderr_log(spawned.stderr, pid, cmd.stderr_tail.clone());
        let watched = Watched {
            child: spawned.child,
            pid,
            state: state.clone(),
            input: input.clone(),
            max_line: cmd.max_line_bytes,
        };
        let supervisor = Supervisor::start(watched, spawned.stdout);
        Ok(Link { state, input, supervisor, pid, timeout })
    }
}

/// Sends `initialize` and waits for its answer (messages before it are routed as usual).
async fn handshake(
    link: &Link,
    settings: &UpstreamSettings,
    capabilities: &Value,
) -> Result<Box<serde_json::value::RawValue>, UpstreamError> {
    let (mut call, _tx) = Call::open(&link.state, INITIALIZE_ID, false, settings.request_timeout);
    link.send(handshake::request(settings, capabilities)).await?;
    loop {
        match call.next_event().await {
            Ok(Some(UpstreamEvent::Response(outcome))) => return handshake::result_of(outcome),
            Ok(Some(_)) => continue,
            Ok(None) => return Err(UpstreamError::Initialize("no answer to initialize".to_owned())),
            Err(e) => return Err(e),
        }
    }
}

// === impl SpareProcess ===

impl SpareProcess {
    /// False once the process exited or broke while waiting.
    pub(crate) fn is_alive(&self) -> bool {
        self.link.state.is_healthy()
    }

    pub(crate) fn pid(&self) -> u32 {
        self.link.pid
    }

    /// Stops the process and waits until it is reaped (bounded by the supervisor's steps).
    pub(crate) async fn stop(self) {
        self.link.supervisor.stop().await;
    }
}

// === impl Link ===

impl Link {
    /// Pings the new process and waits for the answer before the session is handed out. Some
    /// servers send `roots/list` as soon as they are initialised (the reference filesystem
    /// server does); stdout is ordered, so once the ping's answer is read, such a request has
    /// been routed with no call attached, and is not mistaken for the first call's. A server
    /// that does not answer in time is used anyway.
    async fn settle(&self) {
        let (mut call, _tx) = Call::open(&self.state, self.state.next_id(), false, self.timeout);
        let ping = request_bytes(call.id(), methods::PING, None);
        if self.send(ping).await.is_err() {
            return;
        }
        let answered = tokio::time::timeout(SETTLE_TIMEOUT, async {
            while let Ok(Some(event)) = call.next_event().await {
                if matches!(event, UpstreamEvent::Response(_)) {
                    return;
                }
            }
        });
        if answered.await.is_err() {
            tracing::debug!(pid = self.pid, "upstream process did not answer ping after initialize");
        }
    }

    /// Queues one message for stdin, bounded by the request timeout.
    async fn send(&self, bytes: Vec<u8>) -> Result<(), UpstreamError> {
        let sent = tokio::time::timeout(self.timeout, self.input.send(Input::Line(bytes))).await;
        let result = match sent {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(UpstreamError::Closed("the upstream process no longer takes input".to_owned())),
            Err(_) => Err(UpstreamError::Timeout(self.timeout)),
        };
        self.state.note(result)
    }
}

// === impl StdioSession ===

impl StdioSession {
    pub(crate) fn initialize_result(&self) -> &Arc<InitializeResult> {
        &self.init
    }

    pub(crate) fn state(&self) -> &Arc<SessionState> {
        &self.link.state
    }

    /// Writes the request; its events come from the process's stdout reader.
    pub(crate) fn start(&self, method: &str, params: Outgoing<'_>, surface: bool) -> Call {
        let link = &self.link;
        let (call, tx) = Call::open(&link.state, link.state.next_id(), surface, link.timeout);
        let body = params.request_bytes(call.id(), method);
        if link.input.try_send(Input::Line(body)).is_err() {
            let e = UpstreamError::Closed("the upstream process is not taking input".to_owned());
            let _ = tx.try_send(Err(e));
        }
        call
    }

    /// Answers a server request on stdin.
    pub(crate) async fn respond(
        &self,
        id: &RequestId,
        outcome: Result<Value, ErrorObject>,
    ) -> Result<(), UpstreamError> {
        self.link.send(state::response_bytes(id, outcome)?).await
    }

    pub(crate) async fn notify(&self, method: &str, params: Option<Value>) -> Result<(), UpstreamError> {
        self.link.send(notification_bytes(method, params.as_ref())).await
    }

    /// Stops the process (bounded) and waits for it to be reaped.
    pub(crate) async fn close(&self) -> Result<(), UpstreamError> {
        self.link.state.mark_unhealthy();
        self.link.supervisor.stop().await;
        Ok(())
    }
}
