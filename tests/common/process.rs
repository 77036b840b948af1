//! The real `mrtr-gateway` binary as a child process, for what only separate processes prove
//! (two replicas sharing nothing but a key file). The child is killed by its own handle when the
//! guard drops, so a failing assertion never leaves a gateway running.

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use http::StatusCode;

use super::client::admin_get;
use super::{bounded, bounded_for, Client, HarnessError, TestResult, PROCESS_START_WAIT};

/// A running gateway process; killed on drop.
pub(crate) struct GatewayProcess {
    child: Child,
    pub(crate) front: SocketAddr,
    pub(crate) admin: SocketAddr,
    pub(crate) client: Client,
}

/// A loopback address that was free a moment ago: the binary takes fixed ports.
pub(crate) fn free_port() -> TestResult<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?)
}

// === impl GatewayProcess ===

impl GatewayProcess {
    /// Starts the binary in front of `upstream` with the keys of `key_file`, and waits for
    /// `/readyz`.
    pub(crate) async fn spawn(upstream: &str, key_file: &Path) -> TestResult<Self> {
        let key_file = key_file.display().to_string();
        let args = ["--upstream", upstream, "--state-key-file", &key_file, "--log-level", "warn"];
        Self::spawn_args(&args, Stdio::null()).await
    }

    /// Starts the binary with `args` and its two listeners on free loopback ports, its stdout
    /// going to `stdout`, and waits for `/readyz`.
    pub(crate) async fn spawn_args(args: &[&str], stdout: Stdio) -> TestResult<Self> {
        let (front, admin) = (free_port()?, free_port()?);
        let child = Command::new(env!("CARGO_BIN_EXE_mrtr-gateway"))
            .args(args)
            .arg("--listen")
            .arg(front.to_string())
            .arg("--admin-listen")
            .arg(admin.to_string())
            .stdout(stdout)
            .stderr(Stdio::null())
            .spawn()?;
        let client = Client::new(format!("http://{front}/mcp"));
        let process = Self { child, front, admin, client };
        process.wait_ready().await?;
        Ok(process)
    }

    /// Sends SIGTERM, as an orchestrator does, and returns at once.
    pub(crate) fn send_term(&self) -> TestResult {
        self.send_signal("TERM")
    }

    /// Sends the signal named `name` (`TERM`, `HUP`) to this process and returns at once.
    pub(crate) fn send_signal(&self, name: &str) -> TestResult {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").arg(format!("-{name}")).arg(&pid).status()?;
        if !sent.success() {
            return Err(HarnessError::Unexpected(format!("kill -{name} {pid} failed: {sent}")));
        }
        Ok(())
    }

    /// Waits, within the suite's bound, for the process to exit; its status.
    pub(crate) async fn wait_exit(&mut self) -> TestResult<ExitStatus> {
        bounded("a terminated gateway process to exit", async {
            loop {
                match self.child.try_wait() {
                    Ok(Some(status)) => return Ok(status),
                    Ok(None) => tokio::time::sleep(Duration::from_millis(10)).await,
                    Err(e) => return Err(e),
                }
            }
        })
        .await?
        .map_err(Into::into)
    }

    /// Stops the process as an orchestrator does, with SIGTERM, and waits for it to drain and
    /// exit. Its exit status must be a clean one.
    pub(crate) async fn terminate(mut self) -> TestResult {
        self.send_term()?;
        let status = self.wait_exit().await?;
        if !status.success() {
            return Err(HarnessError::Unexpected(format!("gateway exited with {status} after SIGTERM")));
        }
        Ok(())
    }

    /// Polls `/readyz` until it answers 200; connection refusals mean "not listening yet".
    async fn wait_ready(&self) -> TestResult {
        bounded_for(PROCESS_START_WAIT, "a gateway process to report ready", async {
            loop {
                if let Ok((StatusCode::OK, _)) = admin_get(&self.client, self.admin, "/readyz").await {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
    }
}

impl Drop for GatewayProcess {
    fn drop(&mut self) {
        // Kill by this child's own handle, then reap it so no zombie outlives the test.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
