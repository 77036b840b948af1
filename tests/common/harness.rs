//! Starting the system under test in-process: a demo legacy server on `127.0.0.1:0` and one or
//! more gateways in front of it, each configured from a TOML string exactly as an operator
//! would write it (listeners on port 0, a fixed test state key), and torn down at the end.

use std::collections::BTreeMap;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use mrtr_gateway::app::Gateway;
use mrtr_gateway::bridge::Clock;
use mrtr_gateway::config::Config;
use mrtr_gateway::demo::{self, DemoHandle, DemoOptions};

use super::{eventually, Client, TestResult};

/// The gather window of test gateways: long enough that the demo's concurrent questions, sent
/// on two streams of a busy machine, land in one round.
const GATHER_WINDOW_MS: u64 = 200;

/// A state key line `label:base64` whose 32 bytes are all `byte`.
pub(crate) fn test_key(label: &str, byte: u8) -> String {
    format!("{label}:{}", STANDARD.encode([byte; 32]))
}

/// A gateway configuration, as TOML sections, plus how to start it.
#[derive(Debug, Clone)]
pub(crate) struct Setup {
    sections: BTreeMap<&'static str, Vec<String>>,
}

/// A demo server, a gateway in front of it and a client of that gateway.
pub(crate) struct Harness {
    pub(crate) demo: DemoHandle,
    pub(crate) gateway: Gateway,
    pub(crate) client: Client,
}

// === impl Setup ===

impl Default for Setup {
    fn default() -> Self {
        Self::new()
    }
}

impl Setup {
    /// Loopback listeners on port 0, one fixed state key, a generous gather window.
    pub(crate) fn new() -> Self {
        let setup = Self { sections: BTreeMap::new() }
            .set("front", "listen = \"127.0.0.1:0\"")
            .set("admin", "listen = \"127.0.0.1:0\"")
            .set("mrtr", &format!("gather_window_ms = {GATHER_WINDOW_MS}"))
            .set("log", "level = \"warn\"");
        setup.keys(&[&test_key("k1", 0x11)])
    }

    /// Sets `line` (`key = value`) in `[section]`, replacing an earlier value of that key.
    pub(crate) fn set(mut self, section: &'static str, line: &str) -> Self {
        let key = |l: &str| l.split('=').next().unwrap_or_default().trim().to_owned();
        let lines = self.sections.entry(section).or_default();
        lines.retain(|l| key(l) != key(line));
        lines.push(line.to_owned());
        self
    }

    /// Replaces the state key ring (first key seals, all open).
    pub(crate) fn keys(mut self, keys: &[&str]) -> Self {
        let state = self.sections.entry("state").or_default();
        state.retain(|line| !line.starts_with("keys"));
        state.push(format!("keys = {keys:?}"));
        self
    }

    /// The TOML document for a gateway in front of `upstream`.
    pub(crate) fn toml(&self, upstream: &str) -> String {
        self.toml_with("url", upstream)
    }

    /// The TOML document for a gateway whose upstream is `key = upstream` (`url`, `sse_url`).
    pub(crate) fn toml_with(&self, key: &str, upstream: &str) -> String {
        self.clone().set("upstream", &format!("{key} = {upstream:?}")).render()
    }

    /// The TOML document as set, its upstream among the `[upstream]` lines.
    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        for (section, lines) in &self.sections {
            out.push_str(&format!("[{section}]\n{}\n\n", lines.join("\n")));
        }
        out
    }

    /// Starts a gateway configured exactly as set (its upstream included) and waits until it
    /// is ready.
    pub(crate) async fn launch(&self) -> TestResult<(Gateway, Client)> {
        let gateway = Gateway::start(Config::from_toml(&self.render())?).await?;
        eventually("the gateway's upstream to answer initialize", || gateway.ready.is_ready()).await?;
        let client = Client::new(gateway.url("/mcp"));
        Ok((gateway, client))
    }

    /// Starts a demo server and a gateway in front of it, and waits until the gateway is ready.
    pub(crate) async fn start(self) -> TestResult<Harness> {
        let demo = demo::spawn_loopback(DemoOptions::default())?;
        let (gateway, client) = self.attach(&demo).await?;
        Ok(Harness { demo, gateway, client })
    }

    /// [`Setup::start`], with the gateway's rounds timed by `clock` (a manual one in tests that
    /// decide when a gather deadline passes).
    pub(crate) async fn start_with_clock(self, clock: Clock) -> TestResult<Harness> {
        let demo = demo::spawn_loopback(DemoOptions::default())?;
        let config = Config::from_toml(&self.toml(&demo.url()))?;
        let gateway = Gateway::start_with_clock(config, clock).await?;
        eventually("the gateway's upstream to answer initialize", || gateway.ready.is_ready()).await?;
        let client = Client::new(gateway.url("/mcp"));
        Ok(Harness { demo, gateway, client })
    }

    /// Starts another gateway in front of an existing demo server.
    pub(crate) async fn attach(&self, demo: &DemoHandle) -> TestResult<(Gateway, Client)> {
        self.attach_url(&demo.url()).await
    }

    /// Starts a gateway in front of the legacy server at `upstream`.
    pub(crate) async fn attach_url(&self, upstream: &str) -> TestResult<(Gateway, Client)> {
        let config = Config::from_toml(&self.toml(upstream))?;
        let gateway = Gateway::start(config).await?;
        eventually("the gateway's upstream to answer initialize", || gateway.ready.is_ready()).await?;
        let client = Client::new(gateway.url("/mcp"));
        Ok((gateway, client))
    }
}

// === impl Harness ===

impl Harness {
    /// The default setup.
    pub(crate) async fn start() -> TestResult<Self> {
        Setup::new().start().await
    }

    /// The value of one metric series of the gateway, e.g.
    /// `mrtr_gateway_state_rejections_total{reason="expired"}`; 0 when it was never touched.
    pub(crate) fn metric(&self, series: &str) -> f64 {
        metric(&self.gateway, series)
    }

    /// Stops the gateway (draining it) and the demo server.
    pub(crate) async fn stop(self) -> TestResult {
        super::bounded("the gateway to drain", self.gateway.shutdown()).await?;
        super::bounded("the demo server to stop", self.demo.shutdown()).await??;
        Ok(())
    }
}

/// Reads one series from a gateway's Prometheus exposition.
pub(crate) fn metric(gateway: &Gateway, series: &str) -> f64 {
    let text = String::from_utf8_lossy(&gateway.metrics.render()).into_owned();
    metric_in(&text, series)
}

/// Reads one series from Prometheus text.
pub(crate) fn metric_in(text: &str, series: &str) -> f64 {
    text.lines()
        .filter_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .find_map(|value| value.trim().parse().ok())
        .unwrap_or(0.0)
}
