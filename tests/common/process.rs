//! The real `mrtr-gateway` binary as a child process, for what only separate processes prove
//! (two replicas sharing nothing but a key file). The child is killed by its own handle when the
//! guard drops, so a failing assertion never leaves a gateway running.
//!
//! The child binds port 0 for both listeners and prints the addresses it bound on stderr; the
//! harness reads them there. Picking a free port here, releasing it and passing it on left a
//! moment in which a parallel test's listener or connection could take it, and then the child
//! could not bind, or a test spoke to another test's gateway.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Child, ChildStderr, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;
use mrtr_gateway::app::Bound;
use parking_lot::Mutex;
use tokio::sync::oneshot;

use super::client::admin_get;
use super::{bounded, bounded_for, Client, HarnessError, TestResult, PROCESS_START_WAIT};

/// A running gateway process; killed on drop.
pub(crate) struct GatewayProcess {
    child: Killed,
    pub(crate) front: SocketAddr,
    pub(crate) admin: SocketAddr,
    pub(crate) client: Client,
    /// Everything the child wrote on stderr so far, for the message of a failed start.
    stderr: Arc<Mutex<String>>,
}

/// A child process killed and reaped when dropped.
struct Killed(Child);

/// A loopback address that was free a moment ago, for a server that can only take a fixed port
/// (`redis-server`) or a test about a fixed address: another process may take it meanwhile,
/// so a start on it goes through [`on_free_port`].
pub(crate) fn free_port() -> TestResult<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?)
}

/// Starts on a port that was free a moment ago, and on another one if a parallel test took it
/// meanwhile: `start` failing with an error for which `taken` is true (the bind found the
/// address in use) is tried again, at most [`PORT_TRIES`] times. Any other error is returned.
pub(crate) async fn on_free_port<T, F, Fut>(taken: fn(&HarnessError) -> bool, mut start: F) -> TestResult<T>
where
    F: FnMut(u16) -> Fut,
    Fut: std::future::Future<Output = TestResult<T>>,
{
    let mut tries = 0;
    loop {
        tries += 1;
        match start(free_port()?.port()).await {
            Err(e) if tries < PORT_TRIES && taken(&e) => {
                eprintln!("port taken before the start could bind it, trying another: {e}");
            }
            result => return result,
        }
    }
}

/// The error of a listener that found its address in use.
pub(crate) fn address_in_use(e: &HarnessError) -> bool {
    e.to_string().to_ascii_lowercase().contains("address already in use")
}

/// Starts of one server tried on fresh ports before giving up.
const PORT_TRIES: usize = 4;

// === impl GatewayProcess ===

impl GatewayProcess {
    /// Starts the binary in front of `upstream` with the keys of `key_file`, and waits for
    /// `/readyz`.
    pub(crate) async fn spawn(upstream: &str, key_file: &Path) -> TestResult<Self> {
        let key_file = key_file.display().to_string();
        let args = ["--upstream", upstream, "--state-key-file", &key_file, "--log-level", "warn"];
        Self::spawn_args(&args, Stdio::null()).await
    }

    /// Starts the binary with `args` and its two listeners on ports the system picks, its
    /// stdout going to `stdout`, and waits for `/readyz`.
    pub(crate) async fn spawn_args(args: &[&str], stdout: Stdio) -> TestResult<Self> {
        let mut child = Command::new(env!("CARGO_BIN_EXE_mrtr-gateway"))
            .args(args)
            .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
            .stdout(stdout)
            .stderr(Stdio::piped())
            .spawn()?;
        let pipe = child.stderr.take();
        let child = Killed(child);
        let pipe = pipe.ok_or_else(|| HarnessError::Unexpected("the child's stderr is not piped".into()))?;
        let stderr = Arc::new(Mutex::new(String::new()));
        let (bound, announced) = oneshot::channel();
        let log = stderr.clone();
        std::thread::spawn(move || read_stderr(pipe, bound, &log));
        let announced =
            bounded_for(PROCESS_START_WAIT, "a gateway process to print its addresses", announced);
        let Ok((front, admin)) = announced.await? else {
            return Err(not_started(child, &stderr));
        };
        let client = Client::new(format!("http://{front}/mcp"));
        let process = Self { child, front, admin, client, stderr };
        if let Err(e) = process.wait_ready().await {
            return Err(HarnessError::Unexpected(format!("{e}; its stderr: {}", process.stderr.lock())));
        }
        Ok(process)
    }

    /// Sends SIGTERM, as an orchestrator does, and returns at once.
    pub(crate) fn send_term(&self) -> TestResult {
        self.send_signal("TERM")
    }

    /// Sends the signal named `name` (`TERM`, `HUP`) to this process and returns at once.
    pub(crate) fn send_signal(&self, name: &str) -> TestResult {
        let pid = self.child.0.id().to_string();
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
                match self.child.0.try_wait() {
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

impl Drop for Killed {
    fn drop(&mut self) {
        // Kill by this child's own handle, then reap it so no zombie outlives the test.
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Reads the child's stderr to its end: the line of bound addresses goes to `bound`, every line
/// to `log`.
fn read_stderr(pipe: ChildStderr, bound: oneshot::Sender<(SocketAddr, SocketAddr)>, log: &Mutex<String>) {
    let mut bound = Some(bound);
    for line in BufReader::new(pipe).lines() {
        let Ok(line) = line else { return };
        if let Some(Bound { front, admin: Some(admin) }) = Bound::parse(&line) {
            if let Some(tx) = bound.take() {
                let _ = tx.send((front, admin));
            }
        }
        let mut log = log.lock();
        log.push_str(&line);
        log.push('\n');
    }
}

/// The error for a child whose stderr ended before it printed its addresses: how it exited, and
/// what it said.
fn not_started(mut child: Killed, stderr: &Mutex<String>) -> HarnessError {
    // Its stderr ended, so it has exited or is about to: the kill only ends a straggler.
    let _ = child.0.kill();
    let status = child.0.wait().map_or_else(|e| e.to_string(), |s| s.to_string());
    HarnessError::Unexpected(format!(
        "the gateway process ended ({status}) before it bound: {}",
        stderr.lock()
    ))
}

#[tokio::test]
async fn a_start_that_found_its_port_taken_is_tried_on_another() -> TestResult {
    let mut ports = Vec::new();
    let started = on_free_port(address_in_use, |port| {
        ports.push(port);
        let taken = ports.len() == 1;
        async move {
            if taken {
                return Err(HarnessError::Unexpected(format!(
                    "cannot listen on 127.0.0.1:{port} for the MCP front: Address already in use"
                )));
            }
            Ok(port)
        }
    })
    .await?;
    assert_eq!(ports.len(), 2, "one retry after the port was taken");
    assert_eq!(started, ports[1]);
    let mut tries = 0;
    let other = on_free_port(address_in_use, |_| {
        tries += 1;
        async { Err::<(), _>(HarnessError::Unexpected("refused".into())) }
    })
    .await;
    assert!(other.is_err() && tries == 1, "any other failure is returned at once ({tries} tries)");
    Ok(())
}
