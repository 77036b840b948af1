//! Rotating the state key while conversations are in flight, as docs/src/security.md, "Rotating the
//! state key", describes: the new key is added as a secondary, promoted, and the old one retired.
//! Each step reaches the gateway as a new key file (swapped in atomically, as a Secret volume is),
//! picked up by polling or by SIGHUP. No retry is lost across a step; once the old key is retired,
//! a state it sealed gets the generic refusal.

use std::path::Path;
use std::process::Stdio;

use http::StatusCode;
use serde_json::{json, Map, Value};

use super::form_only;
use crate::common::answers::NAME;
use crate::common::client::{admin_get, Call};
use crate::common::harness::{metric, metric_in, test_key};
use crate::common::process::GatewayProcess;
use crate::common::{answer_all, bounded, eventually, Client, HarnessError, Setup, TestResult};
use mrtr_gateway::app::ReloadOutcome;
use mrtr_gateway::mrtr::{parse_key_lines, KeyRing};

const GENERIC: &str = "Invalid or expired requestState";
/// Conversations in flight across each rotation step.
const CONVERSATIONS: usize = 6;
/// Most ring swaps the concurrent test makes.
const MAX_FLIPS: u32 = 2000;

fn key_a() -> String {
    test_key("key-a", 0xa1)
}

fn key_b() -> String {
    test_key("key-b", 0xb2)
}

/// The hex key id a gateway derives for `line`, as its metrics label it.
fn key_id(line: &str) -> TestResult<String> {
    let ring = parse_key_lines(line).and_then(KeyRing::new);
    let ring = ring.map_err(|e| HarnessError::Unexpected(e.to_string()))?;
    Ok(ring.sealing_id().to_string())
}

/// Replaces the key file atomically (write beside it, rename over it): a poll never reads a
/// half-written file, just as a Secret volume's symlink swap never shows one.
fn write_keys(path: &Path, keys: &[String]) -> TestResult {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, format!("# newest first\n{}\n", keys.join("\n")))?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

fn confirm(client: &Client) -> Call<'_> {
    client.call_tool("confirm_twice", json!({})).caps(form_only())
}

/// The next round of a conversation: its questions and state.
async fn retry(
    client: &Client,
    state: &str,
    q: &Map<String, Value>,
) -> TestResult<(Map<String, Value>, String)> {
    confirm(client).state(state).responses(answer_all(q)).send().await?.input_required()
}

async fn finish(client: &Client, state: &str, q: &Map<String, Value>) -> TestResult {
    let done = confirm(client).state(state).responses(answer_all(q)).send().await?;
    assert_eq!(done.text()?, format!("Confirmed {NAME}: true"));
    Ok(())
}

/// A gateway whose only keys come from the file at `path`, polled every `poll_ms`.
fn key_file_setup(path: &Path, poll_ms: u64) -> Setup {
    Setup::new()
        .set("state", "keys = []")
        .set("state", &format!("key_file = {:?}", path.display().to_string()))
        .set("state", &format!("key_file_poll_ms = {poll_ms}"))
}

fn series(name: &str, key: &str, result: Option<&str>) -> String {
    match result {
        Some(r) => format!("mrtr_gateway_{name}{{key_id=\"{key}\",result=\"{r}\"}}"),
        None => format!("mrtr_gateway_{name}{{key_id=\"{key}\"}}"),
    }
}

#[tokio::test]
async fn a_key_file_change_rotates_mid_conversation_and_loses_no_retry() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("state-keys");
    write_keys(&path, &[key_a()])?;
    let h = key_file_setup(&path, 20).start().await?;
    let applied = |n: f64| {
        let gw = &h.gateway;
        move || metric(gw, "mrtr_gateway_state_key_reloads_total{result=\"applied\"}") == n
    };
    let mut rounds = Vec::new();
    for _ in 0..CONVERSATIONS {
        rounds.push(confirm(&h.client).send().await?.input_required()?);
    }

    // Step 1: the new key as a secondary on every replica. Step 2: promoted.
    write_keys(&path, &[key_a(), key_b()])?;
    eventually("the poll to add key B as a secondary", applied(1.0)).await?;
    write_keys(&path, &[key_b(), key_a()])?;
    eventually("the poll to promote key B", applied(2.0)).await?;
    let mut next = Vec::new();
    for (q, state) in &rounds {
        next.push(retry(&h.client, state, q).await?);
    }

    // Step 3: key A retired. States sealed by B still finish; one sealed by A is refused.
    write_keys(&path, &[key_b()])?;
    eventually("the poll to retire key A", applied(3.0)).await?;
    for (q, state) in &next {
        finish(&h.client, state, q).await?;
    }
    let (q, old) = &rounds[0];
    let refused = confirm(&h.client).state(old).responses(answer_all(q)).send().await?;
    assert_eq!(refused.expect_error(StatusCode::BAD_REQUEST, -32602)?, GENERIC);

    let (a, b) = (key_id(&key_a())?, key_id(&key_b())?);
    let n = CONVERSATIONS as f64;
    assert_eq!(h.metric(&series("state_seals_total", &a, None)), n);
    assert_eq!(h.metric(&series("state_seals_total", &b, None)), n);
    assert_eq!(h.metric(&series("state_opens_total", &a, Some("ok"))), n);
    assert_eq!(h.metric(&series("state_opens_total", &b, Some("ok"))), n);
    assert_eq!(h.metric(&series("state_opens_total", "unknown", Some("unknown_key"))), 1.0);
    assert_eq!(h.metric("mrtr_gateway_state_keys"), 1.0);
    h.stop().await
}

#[tokio::test]
async fn a_bad_key_file_is_refused_and_the_ring_in_use_keeps_serving() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("state-keys");
    write_keys(&path, &[key_a()])?;
    let h = key_file_setup(&path, 3_600_000).start().await?;
    let (q, state) = confirm(&h.client).send().await?.input_required()?;
    std::fs::write(&path, "key-b:not-a-key\n")?;
    let outcome = h.gateway.keys.reload().await;
    let ReloadOutcome::Refused(reason) = outcome else {
        return Err(HarnessError::Unexpected(format!("a bad file was not refused: {outcome:?}")));
    };
    assert!(reason.contains("line 1") && !reason.contains("not-a-key"), "{reason}");
    assert_eq!(h.metric("mrtr_gateway_state_key_reloads_total{result=\"refused\"}"), 1.0);
    let (q, state) = retry(&h.client, &state, &q).await?;
    finish(&h.client, &state, &q).await?;
    h.stop().await
}

/// Conversations keep running on three clients while the ring is swapped back and forth
/// between [B, A] and [A, B] under them: whichever ring a request starts with, it finishes.
#[tokio::test]
async fn reloads_under_concurrent_conversations_lose_no_request() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("state-keys");
    write_keys(&path, &[key_a(), key_b()])?;
    let h = key_file_setup(&path, 3_600_000).start().await?;
    let mut conversations = tokio::task::JoinSet::new();
    for _ in 0..3 {
        let client = h.client.clone();
        conversations.spawn(async move {
            for _ in 0..4 {
                let (q1, s1) = confirm(&client).send().await?.input_required()?;
                let (q2, s2) = retry(&client, &s1, &q1).await?;
                finish(&client, &s2, &q2).await?;
            }
            TestResult::Ok(())
        });
    }
    // Bounded: at most MAX_FLIPS swaps, each waited for; the conversations' own calls are
    // bounded by the client.
    let mut flips = 0;
    while !conversations.is_empty() && flips < MAX_FLIPS {
        let order = if flips % 2 == 0 { [key_b(), key_a()] } else { [key_a(), key_b()] };
        write_keys(&path, &order)?;
        let outcome = bounded("a reload", h.gateway.keys.reload()).await?;
        assert!(matches!(outcome, ReloadOutcome::Applied { .. }), "{outcome:?}");
        flips += 1;
        while let Some(done) = conversations.try_join_next() {
            done.map_err(|e| HarnessError::Unexpected(e.to_string()))??;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    while let Some(done) = bounded("the last conversations", conversations.join_next()).await? {
        done.map_err(|e| HarnessError::Unexpected(e.to_string()))??;
    }
    assert_eq!(h.metric("mrtr_gateway_state_rejections_total{reason=\"unknown_key\"}"), 0.0);
    h.stop().await
}

/// The binary: SIGHUP reloads the key file (polling is set far beyond the test's life), and a
/// round sealed before the rotation finishes after it.
#[tokio::test]
async fn sighup_reloads_the_key_file_of_a_gateway_process() -> TestResult {
    let h = crate::common::Harness::start().await?;
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("state-keys");
    write_keys(&path, &[key_a()])?;
    let config = dir.path().join("gateway.toml");
    let toml = format!("[state]\nkey_file = {:?}\nkey_file_poll_ms = 3600000\n", path.display().to_string());
    std::fs::write(&config, toml)?;
    let config = config.display().to_string();
    let args = ["--config", &config, "--upstream", &h.demo.url(), "--log-level", "warn"];
    let process = GatewayProcess::spawn_args(&args, Stdio::null()).await?;
    let applied = "mrtr_gateway_state_key_reloads_total{result=\"applied\"}";

    let (q, state) = confirm(&process.client).send().await?.input_required()?;
    write_keys(&path, &[key_b(), key_a()])?;
    process.send_signal("HUP")?;
    wait_for_metric(&process, applied, 1.0).await?;
    let (q, state) = retry(&process.client, &state, &q).await?;
    write_keys(&path, &[key_b()])?;
    process.send_signal("HUP")?;
    wait_for_metric(&process, applied, 2.0).await?;
    finish(&process.client, &state, &q).await?;

    let text = admin_text(&process).await?;
    let b = key_id(&key_b())?;
    assert_eq!(metric_in(&text, &series("state_opens_total", &key_id(&key_a())?, Some("ok"))), 1.0);
    assert_eq!(metric_in(&text, &series("state_opens_total", &b, Some("ok"))), 1.0);
    assert_eq!(metric_in(&text, &series("state_seals_total", &b, None)), 1.0);
    process.terminate().await?;
    h.stop().await
}

async fn admin_text(process: &GatewayProcess) -> TestResult<String> {
    let (status, body) = admin_get(&process.client, process.admin, "/metrics").await?;
    assert_eq!(status, StatusCode::OK);
    Ok(body)
}

/// Polls the process's `/metrics` until `series` reads `value`, within the suite's bound.
async fn wait_for_metric(process: &GatewayProcess, series: &str, value: f64) -> TestResult {
    bounded(&format!("{series} to reach {value}"), async {
        loop {
            if let Ok(text) = admin_text(process).await {
                if metric_in(&text, series) == value {
                    return;
                }
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
}
