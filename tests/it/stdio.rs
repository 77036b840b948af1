//! The stdio upstream against a scripted legacy server: plain calls, an elicitation round trip,
//! a process killed mid-call, a hung process, junk on stdout, server requests outside any call,
//! a clean child environment, and no leaked pipes or processes afterwards.

use std::path::Path;

use http::StatusCode;
use rustix::process::{kill_process, Pid, Signal};
use serde_json::{json, Value};

use super::form_only;
use crate::common::stdio::{alive, open_pipes, python_children, serial, StdioGateway};
use crate::common::{bounded, eventually, Client, TestResult};

async fn pid_of_upstream(client: &Client) -> TestResult<u32> {
    let text = client.call_tool("pid", json!({})).send().await?.text()?;
    text.parse().map_err(|_| crate::common::HarnessError::Unexpected(format!("pid {text:?}")))
}

/// True once the fixture's `--log` file holds the line `line`.
fn logged(log: &Path, line: &str) -> bool {
    std::fs::read_to_string(log).is_ok_and(|text| text.lines().any(|l| l == line))
}

fn sigkill(pid: u32) {
    let pid = i32::try_from(pid).ok().and_then(Pid::from_raw).expect("a real pid");
    kill_process(pid, Signal::KILL).expect("the upstream process can be killed");
}

#[tokio::test]
async fn a_plain_tool_call_and_a_list() -> TestResult {
    let _serial = serial().await;
    let gw = StdioGateway::start(&[], &[], &[]).await?;
    let reply = gw.client.call_tool("echo", json!({"message": "over stdio"})).send().await?;
    assert_eq!(reply.text()?, "Echo: over stdio");
    let list = gw.client.request("tools/list").send().await?;
    let tools = list.result()?["tools"].as_array().map(Vec::len).unwrap_or_default();
    assert!(tools >= 5, "{}", list.body);
    gw.stop().await
}

#[tokio::test]
async fn elicitation_round_trip_over_stdio() -> TestResult {
    let _serial = serial().await;
    let gw = StdioGateway::start(&[], &[], &[]).await?;
    let call = || gw.client.call_tool("greet", json!({})).caps(form_only());
    let (requests, state) = call().send().await?.input_required()?;
    let (key, question) = requests.iter().next().map(|(k, q)| (k.clone(), q.clone())).unwrap_or_default();
    assert_eq!(question["params"]["message"], "What is your name?");
    let answers = json!({ key: {"action": "accept", "content": {"name": "Ada"}} });
    let done = call().state(&state).responses(answers).send().await?;
    assert_eq!(done.text()?, "Hello, Ada!");
    gw.stop().await
}

#[tokio::test]
async fn answers_without_a_state_fill_only_the_questions_the_server_names() -> TestResult {
    let _serial = serial().await;
    let gw = StdioGateway::start(&[], &[], &[]).await?;
    let alice = json!({"action": "accept", "content": {"name": "Alice"}});
    // A fresh call that already carries the answer under the server's own key, with keys no
    // question has beside it (SEP-2322: ignored), completes in one round.
    let extra = json!({"user_name": alice, "unknown_extra_key": {"action": "accept", "content": {"foo": "bar"}},
        "another_unexpected": {"action": "decline"}});
    let named = || gw.client.call_tool("greet_named", json!({})).caps(form_only());
    assert_eq!(named().responses(extra).send().await?.text()?, "Hello, Alice!");
    // Under a key the gateway mints there is no question to answer without a state: asked.
    let (asked, _) =
        gw.client.call_tool("greet", json!({})).caps(form_only()).send().await?.input_required()?;
    let minted = asked.keys().next().cloned().unwrap_or_default();
    let unsolicited =
        gw.client.call_tool("greet", json!({})).caps(form_only()).responses(json!({ minted: alice }));
    let (again, _) = unsolicited.send().await?.input_required()?;
    assert_eq!(again, asked, "the unsolicited answer was not used");
    // An answer in the server's slot is validated like any answer.
    let invalid = named().responses(json!({"user_name": 12345})).send().await?;
    let message = invalid.expect_error(StatusCode::BAD_REQUEST, -32602)?;
    assert!(message.contains("inputResponses[\"user_name\"]"), "{message}");
    // And the named question without an answer is asked under the server's key.
    let (named_asked, _) = named().responses(json!({"wrong_key": alice})).send().await?.input_required()?;
    assert_eq!(named_asked.keys().collect::<Vec<_>>(), ["user_name"]);
    gw.stop().await
}

#[tokio::test]
async fn a_process_killed_mid_call_is_a_clear_error_and_is_replaced() -> TestResult {
    let _serial = serial().await;
    let dir = tempfile::tempdir()?;
    let log = dir.path().join("calls.log");
    let gw = StdioGateway::start(&["--log", log.to_str().unwrap_or_default()], &[], &[]).await?;
    let first = pid_of_upstream(&gw.client).await?;
    let client = gw.client.clone();
    let hung = tokio::spawn(async move { client.call_tool("hang", json!({})).send().await });
    // The fixture logs each call as it starts it: the kill lands while `hang` runs in `first`.
    let started = format!("call {first} hang");
    eventually("the idle process to start the hung call", || logged(&log, &started)).await?;
    sigkill(first);
    let reply = bounded("the killed call to fail", hung).await?.expect("the call task")?;
    let message = reply.expect_error(StatusCode::BAD_GATEWAY, -32603)?;
    assert!(message.contains("killed by signal 9 (SIGKILL)"), "{message}");
    eventually("the killed process to be reaped", || !alive(first)).await?;
    let second = pid_of_upstream(&gw.client).await?;
    assert_ne!(first, second, "a fresh process serves the next call");
    assert_eq!(gw.client.call_tool("echo", json!({"message": "again"})).send().await?.text()?, "Echo: again");
    gw.stop().await
}

#[tokio::test]
async fn a_hung_process_times_out_and_is_stopped_and_replaced() -> TestResult {
    let _serial = serial().await;
    let gw = StdioGateway::start(&[], &[], &["round_timeout_ms = 500"]).await?;
    let first = pid_of_upstream(&gw.client).await?;
    let reply = gw.client.call_tool("hang", json!({})).send().await?;
    reply.expect_error(StatusCode::GATEWAY_TIMEOUT, -32603)?;
    // It ignores its closed stdin; SIGTERM ends it.
    eventually("the hung process to be stopped and reaped", || !alive(first)).await?;
    let second = pid_of_upstream(&gw.client).await?;
    assert_ne!(first, second);
    gw.stop().await
}

#[tokio::test]
async fn non_json_stdout_lines_are_skipped() -> TestResult {
    let _serial = serial().await;
    let gw = StdioGateway::start(&["--banner"], &[], &[]).await?;
    let reply = gw.client.call_tool("noise", json!({"message": "through the junk"})).send().await?;
    assert_eq!(reply.text()?, "Echo: through the junk");
    gw.stop().await
}

#[tokio::test]
async fn an_overlong_line_stops_the_process_with_a_clear_error() -> TestResult {
    let _serial = serial().await;
    let gw = StdioGateway::start(&[], &["max_line_bytes = 4096"], &[]).await?;
    let reply = gw.client.call_tool("huge", json!({"bytes": 10000})).send().await?;
    let message = reply.expect_error(StatusCode::BAD_GATEWAY, -32603)?;
    assert!(message.contains("over 4096 bytes"), "{message}");
    assert!(!message.contains("xxxx"), "no child output in the client's error: {message}");
    assert_eq!(gw.client.call_tool("echo", json!({"message": "ok"})).send().await?.text()?, "Echo: ok");
    gw.stop().await
}

#[tokio::test]
async fn upstream_ping_is_answered_by_the_gateway() -> TestResult {
    let _serial = serial().await;
    let gw = StdioGateway::start(&[], &[], &[]).await?;
    assert_eq!(gw.client.call_tool("ping_client", json!({})).send().await?.text()?, "pong");
    gw.stop().await
}

#[tokio::test]
async fn roots_asked_outside_any_call_get_the_configured_roots_or_an_error() -> TestResult {
    let _serial = serial().await;
    let roots = ["roots = [\"file:///srv/data\"]"];
    let gw = StdioGateway::start(&["--roots-on-init"], &roots, &[]).await?;
    let seen: Value =
        serde_json::from_str(&gw.client.call_tool("roots_seen", json!({})).send().await?.text()?)?;
    assert_eq!(seen, json!({"roots": [{"uri": "file:///srv/data"}]}));
    gw.stop().await?;

    let gw = StdioGateway::start(&["--roots-on-init"], &[], &[]).await?;
    let seen = gw.client.call_tool("roots_seen", json!({})).send().await?.text()?;
    assert!(seen.contains("roots are not known yet"), "{seen}");
    gw.stop().await
}

#[tokio::test]
async fn the_child_gets_only_the_configured_environment() -> TestResult {
    let _serial = serial().await;
    let env = ["[upstream.env]", "FIXTURE_TOKEN = \"t-1\""];
    let gw = StdioGateway::start(&[], &env, &[]).await?;
    let names = gw.client.call_tool("env", json!({})).send().await?.text()?;
    let names: Vec<&str> = names.split(',').collect();
    assert!(names.contains(&"FIXTURE_TOKEN") && names.contains(&"PATH"), "{names:?}");
    // A `python3` launcher script may add its own variables; none of the gateway's may pass.
    let launcher = |n: &str| ["PWD", "SHLVL", "_", "LC_CTYPE"].contains(&n) || n.contains("PYENV");
    let leaked: Vec<String> = std::env::vars_os()
        .filter_map(|(name, _)| name.into_string().ok())
        .filter(|n| n != "PATH" && n != "HOME" && !launcher(n) && names.contains(&n.as_str()))
        .collect();
    assert!(leaked.is_empty(), "the child saw the gateway's {leaked:?}");
    gw.stop().await
}

#[tokio::test]
async fn pipes_and_child_processes_return_to_where_they_started() -> TestResult {
    let _serial = serial().await;
    let (pipes, children) = (open_pipes(), python_children());
    let gw = StdioGateway::start(&[], &[], &[]).await?;
    let first = pid_of_upstream(&gw.client).await?;
    assert!(python_children() > children, "the gateway runs the fixture as its child");
    sigkill(first);
    eventually("the killed process to be reaped", || !alive(first)).await?;
    let _ = gw.client.call_tool("echo", json!({"message": "x"})).send().await?;
    let _ = gw.client.call_tool("greet", json!({})).caps(form_only()).send().await?;
    gw.stop().await?;
    eventually("every child process to be reaped", || python_children() == children).await?;
    eventually("every pipe to be closed", || open_pipes() == pipes).await
}
