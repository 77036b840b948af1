//! A real `redis-server` on loopback for the single-use state tests: started on a free port with
//! no persistence (no RDB snapshot, no append-only file) in a temporary directory, stopped and
//! started again on the same port to test an outage, and killed by its own handle on drop.
//!
//! The binary comes from the Debian package `redis-server` (`tests/run.sh` installs it when
//! missing and run as root, and otherwise stops saying what to install). When it is missing the
//! test fails and says so; nothing is skipped.

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::process::on_free_port;
use super::{bounded, HarnessError, TestResult};

const BINARY: &str = "redis-server";

/// A running (or stopped) Redis server owned by a test.
pub(crate) struct RedisServer {
    child: Option<Child>,
    addr: SocketAddr,
    dir: tempfile::TempDir,
}

/// How a server that ended before it answered is reported (it could not bind, most likely).
const EXITED: &str = "exited with";

fn exited(e: &HarnessError) -> bool {
    e.to_string().contains(EXITED)
}

// === impl RedisServer ===

impl RedisServer {
    /// Starts a server on a free loopback port and waits until it answers `PING`; if the port
    /// was taken meanwhile (the server exits at once: it cannot bind), on another one.
    pub(crate) async fn start() -> TestResult<Self> {
        on_free_port(exited, |port| async move {
            let addr = SocketAddr::from(([127, 0, 0, 1], port));
            let mut server = Self { child: None, addr, dir: tempfile::tempdir()? };
            server.resume().await?;
            Ok(server)
        })
        .await
    }

    /// The URL the gateway is configured with.
    pub(crate) fn url(&self) -> String {
        format!("redis://{}/0", self.addr)
    }

    /// Kills the server and reaps it: from here on its port refuses connections.
    pub(crate) fn stop(&mut self) -> TestResult {
        if let Some(mut child) = self.child.take() {
            child.kill()?;
            child.wait()?;
        }
        Ok(())
    }

    /// Starts the server again on the same port (empty: nothing was persisted).
    pub(crate) async fn resume(&mut self) -> TestResult {
        let port = self.addr.port().to_string();
        let child = Command::new(BINARY)
            .args(["--bind", "127.0.0.1", "--port", &port, "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => HarnessError::Unexpected(format!(
                    "{BINARY} is not installed; install the Debian package: apt-get install -y redis-server"
                )),
                _ => HarnessError::Io(e),
            })?;
        self.child = Some(child);
        let addr = self.addr;
        bounded("redis-server to answer PING", async {
            while !pongs(addr).await {
                if let Some(status) = self.exited()? {
                    return Err(HarnessError::Unexpected(format!("{BINARY} on {addr} {EXITED} {status}")));
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Ok(())
        })
        .await?
    }

    /// How the server ended, if it has (e.g. its port was taken meanwhile).
    fn exited(&mut self) -> TestResult<Option<std::process::ExitStatus>> {
        match self.child.as_mut() {
            Some(child) => Ok(child.try_wait()?),
            None => Ok(None),
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// True when a `PING` on a fresh connection gets `+PONG`.
async fn pongs(addr: SocketAddr) -> bool {
    let Ok(mut conn) = TcpStream::connect(addr).await else { return false };
    if conn.write_all(b"PING\r\n").await.is_err() {
        return false;
    }
    let mut buf = [0u8; 7];
    conn.read_exact(&mut buf).await.is_ok() && &buf == b"+PONG\r\n"
}
