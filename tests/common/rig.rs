//! The fault rig: a gateway with short timeouts in front of a [`FaultyLegacy`] server, a client
//! that keeps no idle connection, and the checks that a fault left nothing behind.
//!
//! "Nothing behind" is measured where it cannot be confused with another test's traffic: the
//! tasks alive on this test's own Tokio runtime (the gateway, the faulty server and the client all
//! run on it, and `cargo test` gives each test a runtime of its own), and the connections and
//! responses the faulty server has open (it closes every connection after its response, so at rest
//! there are none). Open file descriptors of the process would also count every other test running
//! in parallel in the same binary, so they are not used.

use std::time::Duration;

use mrtr_gateway::app::Gateway;

use super::client::admin_get;
use super::faulty::{tools, FaultyLegacy};
use super::harness::metric_in;
use super::{bounded, Client, HarnessError, Setup, TestResult};

/// Consecutive equal task counts, 10 ms apart, that make a resting count.
const STEADY_POLLS: usize = 5;

/// A gateway in front of a faulty server.
pub(crate) struct Rig {
    pub(crate) upstream: FaultyLegacy,
    pub(crate) gateway: Gateway,
    pub(crate) client: Client,
    /// Tasks alive on this runtime once everything settled after the first call.
    rest_tasks: usize,
}

// === impl Setup ===

impl Setup {
    /// Timeouts short enough that every fault ends in well under a second or two.
    pub(crate) fn faulty() -> Self {
        Self::new()
            .set("upstream", "connect_timeout_ms = 500")
            .set("upstream", "request_timeout_ms = 3000")
            .set("mrtr", "round_timeout_ms = 1500")
            .set("mrtr", "total_timeout_ms = 4000")
    }
}

// === impl Rig ===

impl Rig {
    /// [`Setup::faulty`] in front of a new faulty server.
    pub(crate) async fn start() -> TestResult<Self> {
        Self::with(Setup::faulty()).await
    }

    /// `setup` in front of a new faulty server; one healthy call, then the resting counts.
    pub(crate) async fn with(setup: Setup) -> TestResult<Self> {
        let upstream = FaultyLegacy::spawn().await?;
        let (gateway, _) = setup.attach_url(&upstream.url()).await?;
        let client = Client::unpooled(gateway.url("/mcp"));
        let mut rig = Self { upstream, gateway, client, rest_tasks: 0 };
        // The readiness probe opened s1 for the anonymous principal with no capabilities.
        rig.expect_ok("s1").await?;
        rig.rest_tasks = rig.settle().await?;
        Ok(rig)
    }

    /// Calls the healthy tool and checks which upstream session served it.
    pub(crate) async fn expect_ok(&self, session: &str) -> TestResult {
        let reply = self.client.call_tool(tools::OK, serde_json::json!({})).send().await?;
        assert_eq!(reply.text()?, format!("ok from {session}"), "{reply:?}");
        Ok(())
    }

    /// Tasks alive on the current runtime.
    pub(crate) fn tasks() -> usize {
        tokio::runtime::Handle::current().metrics().num_alive_tasks()
    }

    /// Waits until the upstream has nothing open and the task count holds still; returns it.
    async fn settle(&self) -> TestResult<usize> {
        bounded("the rig to settle", async {
            let mut last = (usize::MAX, 0);
            loop {
                let stats = self.upstream.stats();
                let idle = stats.open_connections() == 0 && stats.open_streams() == 0;
                let tasks = Self::tasks();
                last = if idle && tasks == last.0 { (tasks, last.1 + 1) } else { (tasks, 0) };
                if last.1 >= STEADY_POLLS {
                    return tasks;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
    }

    /// Fails unless, within the suite's bound, the upstream has no connection or response open
    /// and this runtime has no more tasks than at rest before the fault.
    pub(crate) async fn assert_at_rest(&self) -> TestResult {
        let counts = || {
            let stats = self.upstream.stats();
            (Self::tasks(), stats.open_connections(), stats.open_streams())
        };
        let rest = bounded("", async {
            loop {
                let (tasks, connections, streams) = counts();
                if tasks <= self.rest_tasks && connections == 0 && streams == 0 {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
        rest.map_err(|_| {
            let (tasks, connections, streams) = counts();
            HarnessError::Unexpected(format!(
                "still busy after the fault: {tasks} tasks (at rest {}), {connections} upstream \
                 connections and {streams} upstream responses open",
                self.rest_tasks
            ))
        })
    }

    /// Upstream sessions in the gateway's pool (idle, leased or starting), as `/metrics` says.
    pub(crate) async fn pool_size(&self) -> TestResult<f64> {
        let admin = self.gateway.admin_addr.ok_or_else(|| HarnessError::Unexpected("no admin".into()))?;
        let (_, text) = admin_get(&self.client, admin, "/metrics").await?;
        Ok(metric_in(&text, "mrtr_gateway_upstream_sessions"))
    }

    /// Stops the gateway, then the faulty server.
    pub(crate) async fn stop(self) -> TestResult {
        bounded("the gateway to drain", self.gateway.shutdown()).await?;
        drop(self.upstream);
        Ok(())
    }
}
