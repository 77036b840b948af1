//! The real binary as a 2026-07-28 stdio server: `mrtr-gateway stdio --upstream <url>`, driven
//! over its pipes the way a client that launches servers drives it. Every line read from its
//! stdout must be a JSON-RPC message; anything else fails the test. The child is killed by its
//! own handle if the test ends without closing it.

use std::process::{ExitStatus, Stdio};

use mrtr_gateway::protocol::{meta, MODERN_VERSION};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use super::{bounded, HarnessError, TestResult};

/// A running `mrtr-gateway stdio`.
pub(crate) struct StdioFront {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Lines<BufReader<ChildStdout>>,
}

/// A 2026-07-28 request: `params` plus the `_meta` every request carries, declaring `caps`.
pub(crate) fn request(id: Value, method: &str, mut params: Value, caps: Value) -> Value {
    params["_meta"] = json!({ meta::PROTOCOL_VERSION: MODERN_VERSION, meta::CLIENT_CAPABILITIES: caps });
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

// === impl StdioFront ===

impl StdioFront {
    /// Launches the binary in stdio mode in front of the legacy server at `upstream`.
    pub(crate) fn spawn(upstream: &str) -> TestResult<Self> {
        Self::spawn_with(&["--upstream", upstream], &[])
    }

    /// Launches `mrtr-gateway stdio` with `args` (its upstream among them) and the extra
    /// environment `env` (`MRTR_GATEWAY__…` settings).
    pub(crate) fn spawn_with(args: &[&str], env: &[(&str, &str)]) -> TestResult<Self> {
        let mut child = Command::new(env!("CARGO_BIN_EXE_mrtr-gateway"))
            .arg("stdio")
            .args(args)
            .args(["--log-level", "warn"])
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().ok_or_else(|| unexpected("no stdout pipe"))?;
        Ok(Self { child, stdin, stdout: BufReader::new(stdout).lines() })
    }

    /// Writes one message as one line.
    pub(crate) async fn send(&mut self, message: &Value) -> TestResult {
        self.send_line(&message.to_string()).await
    }

    /// Writes `line` exactly, then a newline.
    pub(crate) async fn send_line(&mut self, line: &str) -> TestResult {
        let stdin = self.stdin.as_mut().ok_or_else(|| unexpected("stdin already closed"))?;
        stdin.write_all(format!("{line}\n").as_bytes()).await?;
        Ok(stdin.flush().await?)
    }

    /// The next message on stdout; a line that is not a JSON-RPC message is an error.
    pub(crate) async fn next(&mut self) -> TestResult<Value> {
        let line = bounded("a line on the gateway's stdout", self.stdout.next_line()).await??;
        parse(&line.ok_or_else(|| unexpected("stdout ended"))?)
    }

    /// Reads until the response with `id`; returns it and the messages before it.
    pub(crate) async fn response(&mut self, id: &Value) -> TestResult<(Value, Vec<Value>)> {
        let mut before = Vec::new();
        loop {
            let message = self.next().await?;
            if message.get("id") == Some(id) && message.get("method").is_none() {
                return Ok((message, before));
            }
            before.push(message);
        }
    }

    /// Closes stdin, reads stdout to its end and waits for the exit: the messages written after
    /// the close, and the exit status.
    pub(crate) async fn close(mut self) -> TestResult<(Vec<Value>, ExitStatus)> {
        drop(self.stdin.take());
        let mut rest = Vec::new();
        while let Some(line) = bounded("stdout to end after stdin closed", self.stdout.next_line()).await?? {
            rest.push(parse(&line)?);
        }
        let status = bounded("the gateway to exit after stdin closed", self.child.wait()).await??;
        Ok((rest, status))
    }
}

fn parse(line: &str) -> TestResult<Value> {
    let message: Value = serde_json::from_str(line)
        .map_err(|e| unexpected(&format!("stdout line is not JSON ({e}): {line:?}")))?;
    if message["jsonrpc"] != "2.0" {
        return Err(unexpected(&format!("stdout line is not JSON-RPC: {line}")));
    }
    Ok(message)
}

fn unexpected(what: &str) -> HarnessError {
    HarnessError::Unexpected(what.to_owned())
}
