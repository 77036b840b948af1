//! `mrtr-gateway check`, the migration readiness report: against the embedded demo server (in
//! process, every field of the report asserted), against the stdio fixture through the binary
//! (`--` and `--json PATH`, the exit status of a break), and a server that cannot start (the
//! command named, with the tail of its stderr).

use std::process::Output;

use mrtr_gateway::check::{self, Calls, Progress};
use mrtr_gateway::config::Config;
use mrtr_gateway::demo::{self, DemoOptions};
use serde_json::{json, Value};

use crate::common::stdio::serial;
use crate::common::{bounded_for, HarnessError, Setup, TestResult, PROCESS_START_WAIT};

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/stdio_server.py");

/// Runs the binary's `check` with `args`; its exit status, stdout and stderr.
async fn run_binary(args: &[&str]) -> TestResult<Output> {
    run_binary_with(args, &[]).await
}

async fn run_binary_with(args: &[&str], env: &[(&str, &str)]) -> TestResult<Output> {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_mrtr-gateway"));
    command.arg("check").args(args).kill_on_drop(true).env("NO_COLOR", "1");
    command.envs(env.iter().copied());
    Ok(bounded_for(PROCESS_START_WAIT, "the check to finish", command.output()).await??)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn question(summary: &str) -> Value {
    json!({"method": "elicitation/create", "summary": summary})
}

#[tokio::test]
async fn the_report_on_the_demo_server_field_by_field() -> TestResult {
    let demo = demo::spawn_loopback(DemoOptions::default())?;
    let cfg = Config::from_toml(&Setup::new().toml(&demo.url()))?;
    let calls = Calls::parse(
        r#"{"answers": {"form": {"action": "accept", "content": {"name": "Ada"}}},
            "calls": [{"tool": "echo", "arguments": {"message": "hi"}}, {"tool": "greet"},
                      {"tool": "flaky_question"}, {"tool": "die"}]}"#,
    )
    .map_err(HarnessError::Unexpected)?;
    let report = bounded_for(PROCESS_START_WAIT, "the check", check::run(cfg, &calls, Progress::Quiet))
        .await?
        .map_err(|e| HarnessError::Unexpected(e.to_string()))?;
    let r = serde_json::to_value(&report)?;

    assert_eq!(
        (&r["version"], &r["server"], &r["transport"]),
        (&json!(1), &json!(demo.url()), &json!("streamable-http"))
    );
    let counts = json!({"tools": 13, "prompts": 1, "resources": 2, "resource_templates": 0});
    assert_eq!(r["direct"]["protocol_version"], "2025-11-25");
    assert_eq!(r["direct"]["server_info"]["name"], "mrtr-demo-legacy");
    assert_eq!(r["direct"]["counts"], counts);
    assert_eq!(r["direct"]["errors"], json!([]));
    assert_eq!(r["gateway"]["protocol_version"], "2026-07-28");
    assert_eq!(r["gateway"]["server_info"]["name"], "mrtr-demo-legacy");
    assert_eq!(r["gateway"]["counts"], counts);
    assert_eq!(r["gateway"]["errors"], json!([]));
    // Listen flags stay (subscriptions/listen is bridged); logging is not offered.
    assert_eq!(
        r["gateway"]["capabilities"],
        json!({"completions": {}, "prompts": {"listChanged": false}, "tools": {"listChanged": false},
               "resources": {"listChanged": true, "subscribe": true},
               "extensions": {"io.modelcontextprotocol/tasks": {}}})
    );

    // The one thing that breaks: a tool whose question changes every run cannot be replayed.
    let differences: Vec<_> = r["differences"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|d| (d["kind"].clone(), d["name"].clone(), d["change"].clone(), d["breaks"].clone()))
        .collect();
    assert_eq!(
        differences,
        [
            (json!("capability"), json!("logging"), json!("missing"), json!(false)),
            (json!("capability"), json!("extensions"), json!("added"), json!(false)),
            (json!("call"), json!("flaky_question"), json!("failed"), json!(true)),
        ]
    );
    assert!(r["differences"][2]["detail"].as_str().unwrap_or_default().contains("too many input rounds"));
    assert_eq!((&r["ok"], &r["breaks"]), (&json!(false), &json!(1)));
    for empty in ["needs_tasks", "repairs", "refusals", "sensitive", "invalid_schemas"] {
        assert_eq!(r[empty], json!([]), "{empty}");
    }

    let calls = &r["calls"];
    assert_eq!(calls.as_array().map(Vec::len), Some(4));
    let echo = &calls[0];
    assert_eq!(echo["direct"], json!({"outcome": "complete", "questions": [], "error": null}));
    let plain = json!({"outcome": "complete", "rounds": [], "error": null, "task": false});
    assert_eq!(echo["gateway"], json!([plain, plain]));
    assert_eq!(echo["tasks"], Value::Null, "no task ran");
    assert_eq!(
        (&echo["stable"], &echo["verdict"], &echo["park_advised"]),
        (&json!(true), &json!("plain"), &json!(false))
    );

    let greet = &calls[1];
    let name = question("form: What is your name?");
    assert_eq!(greet["direct"], json!({"outcome": "complete", "questions": [name], "error": null}));
    let asked = json!({"outcome": "complete", "rounds": [[name]], "error": null, "task": false});
    assert_eq!(greet["gateway"], json!([asked, asked]));
    assert_eq!((&greet["stable"], &greet["divergences"]), (&json!(true), &json!(0)));
    assert_eq!((&greet["verdict"], &greet["park_advised"]), (&json!("in-band friendly"), &json!(false)));

    let flaky = &calls[2];
    assert_eq!(flaky["direct"]["outcome"], "complete");
    assert_eq!(flaky["direct"]["questions"].as_array().map(Vec::len), Some(1));
    for run in flaky["gateway"].as_array().into_iter().flatten() {
        assert_eq!(run["outcome"], "error");
        assert_eq!(run["rounds"].as_array().map(Vec::len), Some(8), "the gateway's round cap");
    }
    assert_eq!((&flaky["stable"], &flaky["divergences"]), (&json!(false), &json!(16)));
    assert_eq!((&flaky["verdict"], &flaky["park_advised"]), (&json!("diverges"), &json!(true)));

    // A call that fails both ways is no difference.
    let die = &calls[3];
    assert_eq!(die["direct"]["outcome"], "error");
    assert!(die["gateway"].as_array().into_iter().flatten().all(|run| run["outcome"] == "error"));
    assert_eq!(die["verdict"], Value::Null);
    demo.shutdown().await?;
    Ok(())
}

#[tokio::test]
async fn a_task_tool_is_served_as_a_task_and_a_missing_type_repaired() -> TestResult {
    let _serial = serial().await;
    let dir = tempfile::tempdir()?;
    let json_path = dir.path().join("report.json");
    let json_arg = json_path.display().to_string();
    let out = run_binary(&["--json", &json_arg, "--", "python3", FIXTURE, "--tasks"]).await?;
    assert_eq!(out.status.code(), Some(check::exit::OK), "stderr: {}", text(&out.stderr));
    let r: Value = serde_json::from_slice(&std::fs::read(&json_path)?)?;
    let counts = json!({"tools": 18, "prompts": null, "resources": null, "resource_templates": null});
    assert_eq!((&r["direct"]["counts"], &r["gateway"]["counts"]), (&counts, &counts));
    assert_eq!(
        r["differences"],
        json!([{"kind": "tool", "name": "loose", "change": "changed", "detail": "inputSchema changed", "breaks": false},
               {"kind": "capability", "name": "extensions", "change": "added",
                "detail": "offered through the gateway only", "breaks": false}])
    );
    assert_eq!((&r["ok"], &r["breaks"]), (&json!(true), &json!(0)));
    assert_eq!(
        r["needs_tasks"],
        json!([{"tool": "research", "task_support": "required", "through_gateway": true}])
    );
    assert_eq!(r["repairs"], json!([{"tool": "loose", "reason": "input_type_added", "count": 1}]));
    assert_eq!(r["refusals"], json!([]));
    Ok(())
}

#[tokio::test]
async fn a_stdio_server_whose_tool_needs_tasks_breaks_and_the_exit_status_says_so() -> TestResult {
    let _serial = serial().await;
    let dir = tempfile::tempdir()?;
    let json_path = dir.path().join("report.json");
    let json_arg = json_path.display().to_string();
    // With the task bridge off, a tool that can only run as a legacy task cannot be offered.
    let args = ["--json", &json_arg, "--", "python3", FIXTURE, "--tasks"];
    let out = run_binary_with(&args, &[("MRTR_GATEWAY__TASKS__ENABLED", "false")]).await?;
    assert_eq!(out.status.code(), Some(check::exit::BREAKS), "stderr: {}", text(&out.stderr));
    let r: Value = serde_json::from_slice(&std::fs::read(&json_path)?)?;
    assert_eq!(
        (&r["server"], &r["transport"]),
        (&json!(format!("python3 {FIXTURE} --tasks")), &json!("stdio"))
    );
    let counts = |tools: usize| json!({"tools": tools, "prompts": null, "resources": null, "resource_templates": null});
    assert_eq!(r["direct"]["counts"], counts(18));
    assert_eq!(r["gateway"]["counts"], counts(17));
    assert_eq!(r["direct"]["server_info"], json!({"name": "stdio-fixture", "version": "1.0.0"}));
    assert_eq!(
        r["differences"],
        json!([{"kind": "tool", "name": "research", "change": "missing", "breaks": true,
                "detail": "missing through the gateway: it needs tasks (taskSupport \"required\")"},
               {"kind": "tool", "name": "loose", "change": "changed", "detail": "inputSchema changed", "breaks": false},
               {"kind": "refusal", "name": "research", "change": "refused", "breaks": true,
                "detail": "the gateway refused it 1 time(s): task_required"}])
    );
    assert_eq!((&r["ok"], &r["breaks"]), (&json!(false), &json!(2)));
    assert_eq!(r["refusals"], json!([{"tool": "research", "reason": "task_required", "count": 1}]));
    assert_eq!(
        r["needs_tasks"],
        json!([{"tool": "research", "task_support": "required", "through_gateway": false}])
    );
    assert_eq!(
        r["invalid_schemas"],
        json!([{"tool": "loose", "problem": "inputSchema has no \"type\": \"object\""}])
    );
    assert_eq!(r["calls"], json!([]));
    // The readable report goes to stdout beside the JSON file; progress to stderr, as plain
    // lines when stderr is not a terminal.
    let stdout = text(&out.stdout);
    assert!(stdout.contains("BREAKS tool research missing"), "{stdout}");
    assert!(stdout.contains("Result: 2 thing(s) break for a 2026-07-28 client (exit status 1)."), "{stdout}");
    let stderr = text(&out.stderr);
    assert!(stderr.lines().any(|l| l == "check: starting the server…"), "{stderr}");
    assert!(!stderr.contains('\r'), "no redraws outside a terminal: {stderr:?}");
    Ok(())
}

#[tokio::test]
async fn a_server_that_cannot_start_is_named_with_the_tail_of_its_stderr() -> TestResult {
    let _serial = serial().await;
    let script = r#"import sys; sys.stderr.write("loading\n"); sys.exit("ModuleNotFoundError: mcp")"#;
    let out = run_binary(&["--", "python3", "-c", script]).await?;
    assert_eq!(out.status.code(), Some(check::exit::UNAVAILABLE));
    assert!(out.stdout.is_empty(), "no report: {}", text(&out.stdout));
    let stderr = text(&out.stderr);
    let expected = format!(
        "mrtr-gateway check: cannot start the server python3 -c '{script}': the upstream process exited with \
         status 1\nthe last lines it wrote on stderr:\n  | loading\n  | ModuleNotFoundError: mcp\n"
    );
    assert!(stderr.ends_with(&expected), "{stderr}\nwanted the end:\n{expected}");

    let missing = run_binary(&["--", "/no/such/server", "--stdio"]).await?;
    assert_eq!(missing.status.code(), Some(check::exit::UNAVAILABLE));
    assert!(
        text(&missing.stderr).contains(
            "cannot start the server /no/such/server --stdio: cannot start the upstream command: No such file or directory"
        ),
        "{}",
        text(&missing.stderr)
    );
    Ok(())
}

#[tokio::test]
async fn a_broken_calls_file_is_a_usage_error_naming_it() -> TestResult {
    // The binary's pipes count among this process's: the stdio tests' counts must not see them.
    let _serial = serial().await;
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("calls.json");
    std::fs::write(&path, r#"{"calls": [{"tool": "echo", "argument": {}}]}"#)?;
    let out = run_binary(&["--calls", &path.display().to_string()]).await?;
    assert_eq!(out.status.code(), Some(check::exit::USAGE));
    let stderr = text(&out.stderr);
    assert!(stderr.contains(&format!("calls file {}: unknown field `argument`", path.display())), "{stderr}");
    Ok(())
}
