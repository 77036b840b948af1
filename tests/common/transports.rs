//! One scripted legacy server per upstream transport, for the tests that must hold on each: the
//! embedded demo over Streamable HTTP, the stdio fixture (`tests/fixtures/stdio_server.py`, one
//! process per session, spawned by the gateway) and the HTTP+SSE fixture ([`super::sse_legacy`]).
//! All three offer the tools park mode is about, with the same texts: `place_order` (a side
//! effect before its question), `confirm_twice` (two rounds), `flaky_question` (a question that
//! changes on every run) and `greet`; and each counts what proves a call ran once or twice:
//! orders placed, tool calls and cancellations.
//!
//! [`on_every_transport!`] turns one `async fn test(Transport) -> TestResult` into a module of
//! three tests, `http`, `stdio` and `sse`. A stdio upstream holds the stdio tests' lock
//! ([`super::stdio::serial`]) for its whole life.

use std::path::PathBuf;

use mrtr_gateway::app::Gateway;
use mrtr_gateway::demo::{self, DemoHandle, DemoOptions};
use tokio::sync::MutexGuard;

use super::sse_legacy::{same_origin, SseLegacy};
use super::stdio::{fixture_command, serial};
use super::{bounded, Client, Setup, TestResult};

/// A legacy upstream transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Transport {
    Http,
    Stdio,
    Sse,
}

/// A running scripted server on one transport.
pub(crate) struct Upstream {
    server: Server,
    _serial: Option<MutexGuard<'static, ()>>,
}

enum Server {
    Demo(DemoHandle),
    /// The gateway spawns the fixture; its processes log what they did to `log`.
    Stdio {
        log: PathBuf,
        _dir: tempfile::TempDir,
    },
    Sse(SseLegacy),
}

/// Turns each `async fn name(Transport) -> TestResult` named into a module `name` of three
/// tests, one per transport.
macro_rules! on_every_transport {
    ($($test:ident),+ $(,)?) => {$(
        mod $test {
            use $crate::common::transports::Transport;
            use $crate::common::TestResult;

            #[tokio::test]
            async fn http() -> TestResult {
                super::$test(Transport::Http).await
            }

            #[tokio::test]
            async fn stdio() -> TestResult {
                super::$test(Transport::Stdio).await
            }

            #[tokio::test]
            async fn sse() -> TestResult {
                super::$test(Transport::Sse).await
            }
        }
    )+};
}
pub(crate) use on_every_transport;

// === impl Upstream ===

impl Upstream {
    /// Starts the scripted server of `transport` (for stdio: prepares its command and log).
    pub(crate) async fn start(transport: Transport) -> TestResult<Self> {
        Ok(match transport {
            Transport::Http => {
                Self { server: Server::Demo(demo::spawn_loopback(DemoOptions::default())?), _serial: None }
            }
            Transport::Stdio => {
                let serial = serial().await;
                let dir = tempfile::tempdir()?;
                let log = dir.path().join("fixture.log");
                Self { server: Server::Stdio { log, _dir: dir }, _serial: Some(serial) }
            }
            // Elicitation came with 2025-06-18; the transport is the 2024-11-05 one.
            Transport::Sse => Self {
                server: Server::Sse(SseLegacy::spawn("2025-06-18", same_origin).await?),
                _serial: None,
            },
        })
    }

    /// `setup` with its upstream set to this server.
    pub(crate) fn configure(&self, setup: Setup) -> Setup {
        match &self.server {
            Server::Demo(demo) => setup.set("upstream", &format!("url = {:?}", demo.url())),
            Server::Stdio { log, .. } => {
                setup.set("upstream", &fixture_command(&["--log", &log.display().to_string()]))
            }
            Server::Sse(sse) => setup.set("upstream", &format!("sse_url = {:?}", sse.url())),
        }
    }

    /// A gateway set up as `setup` in front of this server, ready, and its client.
    pub(crate) async fn gateway(&self, setup: Setup) -> TestResult<(Gateway, Client)> {
        self.configure(setup).launch().await
    }

    /// Orders `place_order` placed, by every run of it.
    pub(crate) fn orders(&self) -> u64 {
        match &self.server {
            Server::Demo(demo) => demo.stats.orders(),
            Server::Stdio { log, .. } => logged(log, |line| line.starts_with("order ")),
            Server::Sse(sse) => sse.orders(),
        }
    }

    /// `tools/call` requests for `tool`.
    pub(crate) fn tool_calls(&self, tool: &str) -> u64 {
        match &self.server {
            Server::Demo(demo) => demo.stats.tool_calls(tool),
            Server::Stdio { log, .. } => {
                logged(log, |line| line.starts_with("call ") && line.split(' ').nth(2) == Some(tool))
            }
            Server::Sse(sse) => sse.tool_calls(tool),
        }
    }

    /// Calls cancelled by the gateway (`notifications/cancelled`); over stdio, those cancelled
    /// while they waited for an answer (the only ones these tools can be cancelled in).
    pub(crate) fn cancellations(&self) -> u64 {
        match &self.server {
            Server::Demo(demo) => demo.stats.cancellations(),
            Server::Stdio { log, .. } => logged(log, |line| line.starts_with("cancelled ")),
            Server::Sse(sse) => sse.cancellations(),
        }
    }

    /// The reason the last cancellation gave ("" before any, or without one).
    pub(crate) fn cancel_reason(&self) -> String {
        match &self.server {
            Server::Demo(demo) => demo.stats.last_cancel_reason(),
            Server::Stdio { log, .. } => {
                let text = std::fs::read_to_string(log).unwrap_or_default();
                let last = text.lines().rfind(|line| line.starts_with("cancelled "));
                last.and_then(|line| line.split_once(": "))
                    .map(|(_, reason)| reason.to_owned())
                    .unwrap_or_default()
            }
            Server::Sse(sse) => sse.cancel_reason(),
        }
    }

    /// Stops the server (the gateways in front of it first).
    pub(crate) async fn stop(self) -> TestResult {
        if let Server::Demo(demo) = self.server {
            bounded("the demo server to stop", demo.shutdown()).await??;
        }
        Ok(())
    }
}

/// Lines of the fixture's log for which `matches` holds (none before the log exists).
fn logged(log: &std::path::Path, matches: impl Fn(&str) -> bool) -> u64 {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines().filter(|line| matches(line)).count() as u64
}
