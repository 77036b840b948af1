//! The stdio pool's bounds against the scripted server: a warm process serves a call without
//! a process start, warm processes are replenished and stopped, and the bound per pool key
//! makes a second call of one key wait (then 503) while another key is served.

use std::path::Path;

use http::StatusCode;
use serde_json::json;

use super::form_only;
use crate::common::harness::metric;
use crate::common::stdio::{open_pipes, python_children, serial, StdioGateway};
use crate::common::{bounded, eventually, Client, TestResult};

/// What the fixture's `--log` file says: the pids started, and the tools each pid ran.
struct Events {
    starts: Vec<u32>,
    calls: Vec<(u32, String)>,
}

fn events(log: &Path) -> Events {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut out = Events { starts: Vec::new(), calls: Vec::new() };
    for line in text.lines() {
        let mut words = line.split_whitespace();
        match (words.next(), words.next().and_then(|p| p.parse().ok()), words.next()) {
            (Some("start"), Some(pid), None) => out.starts.push(pid),
            (Some("call"), Some(pid), Some(tool)) => out.calls.push((pid, tool.to_owned())),
            _ => {}
        }
    }
    out
}

async fn pid_with(client: &Client, caps: serde_json::Value) -> TestResult<u32> {
    let text = client.call_tool("pid", json!({})).caps(caps).send().await?.text()?;
    text.parse().map_err(|_| crate::common::HarnessError::Unexpected(format!("pid {text:?}")))
}

#[tokio::test]
async fn a_warm_process_serves_a_new_key_without_a_process_start_and_is_replenished() -> TestResult {
    let _serial = serial().await;
    let (pipes, children) = (open_pipes(), python_children());
    let dir = tempfile::tempdir()?;
    let log = dir.path().join("events");
    let flags = ["--log", log.to_str().unwrap_or_default()];
    let gw = StdioGateway::start(&flags, &["pool_min_warm = 1"], &[]).await?;
    let warm = |gw: &StdioGateway| metric(&gw.gateway, "mrtr_gateway_upstream_warm_processes");
    // The readiness probe's session (key: no capabilities) is idle, and one process waits.
    eventually("one process warm and the probe's session idle", || {
        warm(&gw) == 1.0 && events(&log).starts.len() == 2
    })
    .await?;
    let before = events(&log).starts;
    let opened =
        |gw: &StdioGateway| metric(&gw.gateway, "mrtr_gateway_upstream_sessions_opened_total{how=\"warm\"}");
    let warm_opens = opened(&gw);
    // A key no session has yet: it must take the warm process, not start one.
    let pid = pid_with(&gw.client, form_only()).await?;
    assert!(before.contains(&pid), "{pid} was started before the call ({before:?})");
    assert_eq!(opened(&gw), warm_opens + 1.0);
    eventually("the warm process to be replenished", || warm(&gw) == 1.0 && events(&log).starts.len() == 3)
        .await?;
    // The same key now reuses its idle session; the replenished process stays warm.
    assert_eq!(pid_with(&gw.client, form_only()).await?, pid);
    assert_eq!(events(&log).starts.len(), 3);
    gw.stop().await?;
    eventually("every child process, warm ones too, to be reaped", || python_children() == children).await?;
    eventually("every pipe to be closed", || open_pipes() == pipes).await
}

#[tokio::test]
async fn a_key_at_its_bound_waits_then_gets_503_while_another_key_is_served() -> TestResult {
    let _serial = serial().await;
    let dir = tempfile::tempdir()?;
    let log = dir.path().join("events");
    let flags = ["--log", log.to_str().unwrap_or_default()];
    let bounds = ["pool_max_sessions = 4", "pool_max_per_key = 1", "pool_acquire_timeout_ms = 300"];
    let gw = StdioGateway::start(&flags, &bounds, &["round_timeout_ms = 15000"]).await?;
    let client = gw.client.clone();
    let hung =
        tokio::spawn(async move { client.call_tool("hang", json!({})).caps(form_only()).send().await });
    eventually("the hanging call to hold its key's one session", || {
        events(&log).calls.iter().any(|(_, tool)| tool == "hang")
    })
    .await?;
    let second = gw.client.call_tool("echo", json!({"message": "same key"})).caps(form_only()).send().await?;
    assert_eq!(second.status, StatusCode::SERVICE_UNAVAILABLE, "{}", second.body);
    assert_eq!(metric(&gw.gateway, "mrtr_gateway_upstream_rejections_total{reason=\"key_exhausted\"}"), 1.0);
    let other = gw.client.call_tool("echo", json!({"message": "other key"})).send().await?;
    assert_eq!(other.text()?, "Echo: other key", "a second key is still served");
    assert!(!hung.is_finished(), "the first call still holds its session");
    // The probe's session served the other key; the refused call started no process.
    assert_eq!(events(&log).starts.len(), 2, "{:?}", events(&log).starts);
    hung.abort();
    let _ = bounded("the aborted call to end", hung).await?;
    gw.stop().await
}
