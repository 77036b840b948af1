//! Claims of the book (docs/src/operations.md, deployment.md, configuration.md) about operating the
//! gateway, each exercised on a running gateway (the binary where only a process proves it):
//! SIGTERM drains requests in flight, `--check-config` redacts secrets and a bad configuration
//! exits 64, `--log-format json` writes JSON lines, `admin.enabled = false` opens no admin port,
//! `/readyz` waits for the upstream, `/metrics` serves both histograms and `upstream_sessions`,
//! older upstream revisions work end to end, and a session whose call crashed or hung is replaced
//! by a new `initialize`.

use std::process::Stdio;

use http::StatusCode;
use mrtr_gateway::app::Gateway;
use mrtr_gateway::config::Config;
use serde_json::{json, Value};
use tokio::net::TcpStream;

use super::{everything, form_only};
use crate::common::answers::{MODEL, NAME, SUMMARY};
use crate::common::client::admin_get;
use crate::common::faulty::{tools, FaultyLegacy};
use crate::common::harness::{metric_in, test_key};
use crate::common::process::{free_port, GatewayProcess};
use crate::common::{answer_all, bounded, eventually, Client, Harness, HarnessError, Setup, TestResult};

/// A key file holding one test key.
fn key_file(dir: &tempfile::TempDir) -> TestResult<std::path::PathBuf> {
    let path = dir.path().join("state-keys");
    std::fs::write(&path, test_key("k1", 0x21))?;
    Ok(path)
}

fn unexpected(what: impl std::fmt::Display) -> HarnessError {
    HarnessError::Unexpected(what.to_string())
}

#[tokio::test]
async fn sigterm_stops_accepting_and_lets_the_call_in_flight_finish() -> TestResult {
    let upstream = FaultyLegacy::spawn().await?;
    let dir = tempfile::tempdir()?;
    let mut process = GatewayProcess::spawn(&upstream.url(), &key_file(&dir)?).await?;
    let client = process.client.clone();
    let in_flight = tokio::spawn(async move { client.call_tool(tools::GATED, json!({})).send().await });
    let stats = upstream.stats();
    eventually("the call to be waiting upstream", || stats.gated() == 1).await?;
    process.send_term()?;
    let front = process.front;
    bounded("the front to stop accepting", async {
        while TcpStream::connect(front).await.is_ok() {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await?;
    assert!(!in_flight.is_finished(), "the call in flight is still being served");
    upstream.open_gate();
    let reply = bounded("the drained call", in_flight).await?.map_err(unexpected)??;
    assert_eq!(reply.text()?, "released from s1");
    let status = process.wait_exit().await?;
    assert!(status.success(), "exit status after the drain: {status}");
    assert_eq!(stats.deletes(), 1, "the pooled session was closed on the way out");
    Ok(())
}

/// The binary's `--check-config` (or plain start) on the configuration `toml`: its output,
/// within the suite's bound (a configuration that wrongly starts a gateway is killed).
async fn run_binary(dir: &tempfile::TempDir, toml: &str, check: bool) -> TestResult<std::process::Output> {
    let path = dir.path().join("gateway.toml");
    std::fs::write(&path, toml)?;
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_mrtr-gateway"));
    command.arg("--config").arg(&path).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    if check {
        command.arg("--check-config");
    }
    let child = command.kill_on_drop(true).spawn()?;
    Ok(bounded("the binary to exit", child.wait_with_output()).await??)
}

#[tokio::test]
async fn check_config_prints_no_secret_and_a_bad_configuration_exits_64() -> TestResult {
    let dir = tempfile::tempdir()?;
    let state_key = test_key("k1", 0x5a);
    let file_key = test_key("k2", 0x6b);
    std::fs::write(dir.path().join("keys"), &file_key)?;
    let secrets =
        ["upstream-header-secret-1", "jwt-secret-value-2", "child-env-secret-6", &state_key, &file_key];
    let common = format!(
        "[auth]\nmode = \"jwt\"\njwt_hs256_secret = {:?}\njwt_issuer = \"https://issuer.test\"\n\
         [state]\nkeys = [{state_key:?}]\nkey_file = {:?}\n",
        secrets[1],
        dir.path().join("keys").display().to_string(),
    );
    let http = format!(
        "[upstream]\nurl = \"http://127.0.0.1:9/mcp\"\nheaders = {{ \"x-api-key\" = {:?} }}\n{common}",
        secrets[0]
    );
    let stdio = format!("[upstream]\ncommand = [\"true\"]\nenv = {{ TOKEN = {:?} }}\n{common}", secrets[2]);
    for (toml, shown) in [(http, "x-api-key"), (stdio, "TOKEN")] {
        let out = run_binary(&dir, &toml, true).await?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{:?}: {}", out.status, String::from_utf8_lossy(&out.stderr));
        assert!(stdout.contains(shown) && stdout.contains("https://issuer.test"), "{stdout}");
        for secret in secrets {
            let secret = secret.split_once(':').map_or(secret, |(_, b64)| b64);
            assert!(!stdout.contains(secret), "--check-config printed a secret: {stdout}");
        }
    }

    let bad_key = "k1:this-is-not-a-key-but-secret";
    let refused = [
        ("[front]\nbogus = 1\n", "bogus"),
        ("[front]\npath = \"mcp\"\n", "front.path"),
        (&format!("[state]\nkeys = [{bad_key:?}]\n") as &str, "state.keys[0]"),
    ];
    for (toml, named) in refused {
        for check in [true, false] {
            let out = run_binary(&dir, toml, check).await?;
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(64), "{toml}: {stderr}");
            assert!(stderr.contains(named), "the error names {named}: {stderr}");
            assert!(!stderr.contains("not-a-key-but-secret"), "{stderr}");
        }
    }
    Ok(())
}

#[tokio::test]
async fn log_format_json_writes_the_request_line_as_json() -> TestResult {
    let demo = mrtr_gateway::demo::spawn_loopback(Default::default())?;
    let dir = tempfile::tempdir()?;
    let keys = key_file(&dir)?.display().to_string();
    let log = dir.path().join("stdout.log");
    let stdout = std::fs::File::create(&log)?;
    let args =
        ["--upstream", &demo.url(), "--state-key-file", &keys, "--log-format", "json", "--log-level", "info"];
    let process = GatewayProcess::spawn_args(&args, stdout.into()).await?;
    let reply =
        process.client.call_tool("echo", json!({"message": "logged"})).header("x-request-id", "req-json-1");
    assert_eq!(reply.send().await?.text()?, "Echo: logged");
    process.terminate().await?;
    let text = std::fs::read_to_string(&log)?;
    let lines: Vec<Value> =
        text.lines().filter(|l| !l.trim().is_empty()).map(serde_json::from_str).collect::<Result<_, _>>()?;
    let request =
        lines.iter().find(|l| l["fields"]["message"] == "request" && l["fields"]["method"] == "tools/call");
    let request = request.ok_or_else(|| unexpected(format!("no request line in {text}")))?;
    assert_eq!(request["fields"]["outcome"], "complete", "{request}");
    assert_eq!(request["fields"]["status"], 200, "{request}");
    assert_eq!(request["span"]["request_id"], "req-json-1", "{request}");
    bounded("the demo to stop", demo.shutdown()).await??;
    Ok(())
}

#[tokio::test]
async fn no_secret_and_no_state_content_reaches_the_log_even_at_debug_level() -> TestResult {
    const ANSWER: &str = "Zebulon-Answer-Name";
    let demo = mrtr_gateway::demo::spawn_loopback(Default::default())?;
    let dir = tempfile::tempdir()?;
    let state_key = test_key("k1", 0x3c);
    let secrets = ["upstream-header-secret-3", "client-bearer-secret-4", "cookie-secret-5", &state_key];
    let config = dir.path().join("gateway.toml");
    let toml = format!(
        "[upstream]\nurl = {:?}\nheaders = {{ \"x-api-key\" = {:?} }}\n[state]\nkeys = [{state_key:?}]\n",
        demo.url(),
        secrets[0],
    );
    std::fs::write(&config, toml)?;
    let log = dir.path().join("stdout.log");
    let stdout = std::fs::File::create(&log)?;
    let config = config.display().to_string();
    let args = ["--config", &config, "--log-level", "debug"];
    let process = GatewayProcess::spawn_args(&args, stdout.into()).await?;
    let client = process.client.with_bearer(secrets[1]);
    let call =
        || client.call_tool("greet", json!({})).caps(form_only()).header("cookie", "session=cookie-secret-5");
    let (requests, state) = call().send().await?.input_required()?;
    let key = requests.keys().next().cloned().unwrap_or_default();
    let answer = json!({ key: {"action": "accept", "content": {"name": ANSWER}} });
    let done = call().state(&state).responses(answer).send().await?;
    assert_eq!(done.text()?, format!("Hello, {ANSWER}!"));
    process.terminate().await?;
    let text = std::fs::read_to_string(&log)?;
    // At debug level the request headers are logged, the sensitive ones without their values.
    assert!(text.contains("authorization") && text.contains("cookie"), "the headers were logged: {text}");
    for secret in secrets {
        let secret = secret.split_once(':').map_or(secret, |(_, b64)| b64);
        assert!(!text.contains(secret), "the log holds a secret ({secret})");
    }
    assert!(!text.contains(ANSWER), "the log holds the client's answer, which the state carries");
    bounded("the demo to stop", demo.shutdown()).await??;
    Ok(())
}

#[tokio::test]
async fn admin_enabled_false_opens_no_admin_listener() -> TestResult {
    let port = free_port()?;
    let listen = format!("listen = \"{port}\"");
    let disabled = Setup::new().set("admin", &listen).set("admin", "enabled = false").start().await?;
    assert_eq!(disabled.gateway.admin_addr, None);
    assert!(TcpStream::connect(port).await.is_err(), "nothing listens on {port}");
    assert_eq!(disabled.client.call_tool("echo", json!({"message": "m"})).send().await?.text()?, "Echo: m");
    disabled.stop().await?;
    // The same address with the listener enabled serves the probes: the check above meant it.
    let enabled = Setup::new().set("admin", &listen).start().await?;
    assert_eq!(admin_get(&enabled.client, port, "/healthz").await?.0, StatusCode::OK);
    enabled.stop().await
}

/// `GET path` on the admin listener of `gateway`.
async fn admin(gateway: &Gateway, path: &str) -> TestResult<(StatusCode, String)> {
    let addr = gateway.admin_addr.ok_or_else(|| unexpected("no admin listener"))?;
    admin_get(&Client::new(String::new()), addr, path).await
}

#[tokio::test]
async fn readyz_is_503_until_the_upstream_answers_initialize() -> TestResult {
    let mut upstream = FaultyLegacy::spawn().await?;
    upstream.kill();
    let gateway = Gateway::start(Config::from_toml(&Setup::new().toml(&upstream.url()))?).await?;
    let (status, body) = admin(&gateway, "/readyz").await?;
    assert_eq!(
        (status, body.as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, "upstream has not answered initialize yet\n")
    );
    assert_eq!(admin(&gateway, "/healthz").await?.0, StatusCode::OK, "the process itself serves");
    assert_eq!(upstream.stats().initializes(), 0);
    upstream.revive().await?;
    bounded("/readyz to answer 200", async {
        while !matches!(admin(&gateway, "/readyz").await, Ok((StatusCode::OK, _))) {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await?;
    assert_eq!(upstream.stats().initializes(), 1, "ready once the upstream answered initialize");
    bounded("the gateway to stop", gateway.shutdown()).await
}

#[tokio::test]
async fn metrics_serves_both_histograms_and_the_pooled_sessions() -> TestResult {
    const CALLS: usize = 3;
    let h = Harness::start().await?;
    for i in 0..CALLS {
        assert_eq!(
            h.client.call_tool("echo", json!({"message": i.to_string()})).send().await?.text()?,
            format!("Echo: {i}")
        );
    }
    let (status, text) = admin(&h.gateway, "/metrics").await?;
    assert_eq!(status, StatusCode::OK);
    for histogram in ["request_duration_seconds", "upstream_request_duration_seconds"] {
        let series = |part: &str| format!("mrtr_gateway_{histogram}_{part}");
        let count = metric_in(&text, &format!("{}{{method=\"tools/call\"}}", series("count")));
        assert_eq!(count, CALLS as f64, "{histogram}: {text}");
        let inf = metric_in(&text, &format!("{}{{method=\"tools/call\",le=\"+Inf\"}}", series("bucket")));
        assert_eq!(inf, CALLS as f64, "{histogram}: {text}");
    }
    // Every call reused the session the readiness probe opened.
    assert_eq!(metric_in(&text, "mrtr_gateway_upstream_sessions"), 1.0, "{text}");
    // A client with other capabilities gets a session of its own.
    h.client.call_tool("greet", json!({})).caps(form_only()).send().await?.input_required()?;
    sessions_become(&h.gateway, 2.0).await?;
    assert_eq!(h.demo.stats.initializes(), 2);
    h.stop().await
}

/// Waits until `/metrics` says the pool holds `n` sessions.
async fn sessions_become(gateway: &Gateway, n: f64) -> TestResult {
    bounded(&format!("upstream_sessions to be {n}"), async {
        loop {
            if let Ok((_, text)) = admin(gateway, "/metrics").await {
                if metric_in(&text, "mrtr_gateway_upstream_sessions") == n {
                    return;
                }
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
}

/// The tools an `everything` client is offered through a gateway proposing `version` upstream.
async fn tools_at(h: &Harness) -> TestResult<Vec<String>> {
    let reply = h.client.request("tools/list").caps(everything()).send().await?;
    let tools = reply.result()?["tools"].as_array().cloned().unwrap_or_default();
    Ok(tools.iter().filter_map(|t| t["name"].as_str().map(str::to_owned)).collect())
}

#[tokio::test]
async fn an_upstream_at_2025_06_18_serves_form_elicitation_end_to_end() -> TestResult {
    let h = Setup::new().set("upstream", "protocol_version = \"2025-06-18\"").start().await?;
    let tools = tools_at(&h).await?;
    // 2025-06-18 has form elicitation but not URL elicitation: the gateway declares only that.
    assert!(tools.iter().any(|t| t == "greet") && !tools.iter().any(|t| t == "url_login"), "{tools:?}");
    let call = || h.client.call_tool("greet", json!({})).caps(form_only());
    let (requests, state) = call().send().await?.input_required()?;
    // The demo refuses a request whose MCP-Protocol-Version differs from the session's.
    let done = call().state(&state).responses(answer_all(&requests)).send().await?;
    assert_eq!(done.text()?, format!("Hello, {NAME}!"));
    h.stop().await
}

#[tokio::test]
async fn an_upstream_at_2025_03_26_serves_sampling_end_to_end() -> TestResult {
    let h = Setup::new().set("upstream", "protocol_version = \"2025-03-26\"").start().await?;
    let tools = tools_at(&h).await?;
    // 2025-03-26 has no elicitation at all: no client is asked one on its behalf.
    assert!(tools.iter().any(|t| t == "summarize") && !tools.iter().any(|t| t == "greet"), "{tools:?}");
    let call = || h.client.call_tool("summarize", json!({"text": "old"})).caps(json!({"sampling": {}}));
    let (requests, state) = call().send().await?.input_required()?;
    let done = call().state(&state).responses(answer_all(&requests)).send().await?;
    assert_eq!(done.text()?, format!("Summary: {SUMMARY} (model {MODEL})"));
    h.stop().await
}

/// A round trip and a plain call on `upstream`; then every request after the handshake carried
/// `MCP-Protocol-Version: version`.
async fn spoken_at(upstream: &FaultyLegacy, client: &Client, version: &str) -> TestResult {
    let call = || client.call_tool(tools::ASK, json!({})).caps(form_only());
    let (requests, state) = call().send().await?.input_required()?;
    let done = call().state(&state).responses(answer_all(&requests)).send().await?;
    assert_eq!(done.text()?, format!("Hello, {NAME}"));
    assert!(client.call_tool(tools::OK, json!({})).send().await?.text()?.starts_with("ok from s"));
    let headers = upstream.stats().header_values("mcp-protocol-version");
    assert!(headers.len() >= 4, "{headers:?}");
    assert!(headers.iter().all(|h| h == version), "{headers:?}");
    Ok(())
}

#[tokio::test]
async fn the_configured_protocol_version_is_proposed_and_then_spoken() -> TestResult {
    let upstream = FaultyLegacy::spawn().await?;
    let setup = Setup::new().set("upstream", "protocol_version = \"2025-06-18\"");
    let (gateway, client) = setup.attach_url(&upstream.url()).await?;
    spoken_at(&upstream, &client, "2025-06-18").await?;
    let proposed = upstream.stats().proposed_versions();
    assert!(!proposed.is_empty() && proposed.iter().all(|v| v == "2025-06-18"), "{proposed:?}");
    bounded("the gateway to stop", gateway.shutdown()).await
}

#[tokio::test]
async fn a_server_answering_an_older_version_than_proposed_is_spoken_to_in_it() -> TestResult {
    let upstream = FaultyLegacy::spawn().await?;
    upstream.answer_version("2025-06-18");
    let (gateway, client) = Setup::new().attach_url(&upstream.url()).await?;
    spoken_at(&upstream, &client, "2025-06-18").await?;
    let proposed = upstream.stats().proposed_versions();
    assert!(proposed.iter().all(|v| v == "2025-11-25"), "the default proposal: {proposed:?}");
    bounded("the gateway to stop", gateway.shutdown()).await
}

/// `tool` fails its call with `status`; the broken session is retired (DELETEd, out of the
/// pool) and the next call runs on the session of a new `initialize`.
async fn replaced_after(setup: Setup, tool: &str, status: StatusCode) -> TestResult {
    let h = setup.start().await?;
    assert_eq!(h.demo.stats.initializes(), 1, "the readiness probe's session");
    let reply = h.client.call_tool(tool, json!({})).send().await?;
    reply.expect_error(status, -32603)?;
    let stats = h.demo.stats.clone();
    eventually("the broken session to be deleted upstream", || stats.deletes() == 1).await?;
    sessions_become(&h.gateway, 0.0).await?;
    for _ in 0..2 {
        assert_eq!(h.client.call_tool("echo", json!({"message": "m"})).send().await?.text()?, "Echo: m");
    }
    assert_eq!(stats.initializes(), 2, "the next call initialised one new session, then reused it");
    sessions_become(&h.gateway, 1.0).await?;
    h.stop().await
}

#[tokio::test]
async fn a_session_whose_call_crashed_is_replaced_by_a_new_initialize() -> TestResult {
    replaced_after(Setup::new(), "die", StatusCode::BAD_GATEWAY).await
}

#[tokio::test]
async fn a_session_whose_call_hung_is_replaced_by_a_new_initialize() -> TestResult {
    replaced_after(Setup::new().set("mrtr", "round_timeout_ms = 300"), "hang", StatusCode::GATEWAY_TIMEOUT)
        .await
}
