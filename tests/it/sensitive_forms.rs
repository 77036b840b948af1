//! Questions that ask for secrets, under `elicitation.sensitive = "warn"` (the default) and
//! `"refuse"`: the scripted stdio server (`--schema`) asks for a password (`format:
//! "password"`), a card number (by title), a non-https URL and a `javascript:` URL, and one
//! look-alike (`tokenizer_mode`) that is no secret. Each is counted per tool, reason and action
//! in `/admin/tools` and `/metrics`; a refused one is declined upstream, which the server's log
//! shows.

use std::path::Path;

use mrtr_gateway::app::Gateway;
use serde_json::{json, Map, Value};

use super::schema::{entry, report};
use crate::common::harness::metric;
use crate::common::stdio::{serial, StdioGateway};
use crate::common::{answer_all, eventually, Reply, TestResult};

fn with_url() -> Value {
    json!({"elicitation": {"form": {}, "url": {}}})
}

async fn call(gw: &StdioGateway, tool: &str) -> TestResult<Reply> {
    gw.client.call_tool(tool, json!({})).caps(with_url()).send().await
}

/// The one question of a round.
fn question(requests: &Map<String, Value>) -> Value {
    requests.values().next().cloned().unwrap_or_default()
}

/// Questions of `tool` counted for `reason` with `action` (`warned`, `refused`).
pub(super) fn sensitive_count(gateway: &Gateway, tool: &str, reason: &str, action: &str) -> f64 {
    let series = format!(
        r#"mrtr_gateway_sensitive_questions_total{{action="{action}",reason="{reason}",tool="{tool}"}}"#
    );
    metric(gateway, &series)
}

#[tokio::test]
async fn under_warn_secrets_are_relayed_counted_and_marked() -> TestResult {
    let _serial = serial().await;
    let gw = StdioGateway::start(&["--schema"], &[], &[]).await?;
    let (requests, state) = call(&gw, "login_password").await?.input_required()?;
    let asked = question(&requests);
    assert_eq!(asked["params"]["requestedSchema"]["properties"]["password"]["format"], "password");
    let done = gw.client.call_tool("login_password", json!({})).caps(with_url()).state(&state);
    let reply = done.responses(answer_all(&requests)).send().await?;
    assert!(reply.text()?.starts_with("answer: accept"), "{:?}", reply.body);
    let (requests, _) = call(&gw, "pay").await?.input_required()?;
    assert_eq!(
        question(&requests)["params"]["requestedSchema"]["properties"]["card_number"]["title"],
        "Card number"
    );
    let (requests, _) = call(&gw, "open_http").await?.input_required()?;
    assert_eq!(question(&requests)["params"]["url"], "http://login.example.com/start");
    call(&gw, "tokenizer").await?.input_required()?;
    // A javascript: URL is refused whatever the policy.
    let script = call(&gw, "open_script").await?;
    assert_eq!(script.result()?["isError"], true);
    assert!(script.text()?.contains("script_url"), "{}", script.text()?);

    let report = report(&gw).await?;
    assert_eq!(entry(&report, "login_password")["sensitive"], json!({"password_format": 1}));
    assert_eq!(entry(&report, "pay")["sensitive"], json!({"payment_field": 1}));
    assert_eq!(entry(&report, "open_http")["sensitive"], json!({"insecure_url": 1}));
    assert_eq!(entry(&report, "open_script")["sensitive"], json!({"script_url": 1}));
    assert_eq!(entry(&report, "tokenizer")["sensitive"], json!({}));
    assert_eq!(sensitive_count(&gw.gateway, "login_password", "password_format", "warned"), 1.0);
    assert_eq!(sensitive_count(&gw.gateway, "pay", "payment_field", "warned"), 1.0);
    assert_eq!(sensitive_count(&gw.gateway, "open_http", "insecure_url", "warned"), 1.0);
    assert_eq!(sensitive_count(&gw.gateway, "open_script", "script_url", "refused"), 1.0);
    gw.stop().await
}

#[tokio::test]
async fn under_refuse_secrets_are_declined_upstream_and_the_client_told_why() -> TestResult {
    let _serial = serial().await;
    let dir = tempfile::tempdir()?;
    let log = dir.path().join("upstream.log");
    let log_arg = log.display().to_string();
    let refuse = "[elicitation]\nsensitive = \"refuse\"";
    let gw = StdioGateway::start_with(&["--schema", "--log", &log_arg], &[], &[], refuse).await?;
    for (tool, reason) in [
        ("login_password", "password_format"),
        ("pay", "payment_field"),
        ("open_http", "insecure_url"),
        ("open_script", "script_url"),
    ] {
        let reply = call(&gw, tool).await?;
        assert_eq!(reply.result()?["isError"], true, "{tool}: {:?}", reply.body);
        let text = reply.text()?;
        assert!(text.contains(&format!("\"{tool}\"")) && text.contains(reason), "{text}");
        assert!(text.contains("declined"), "{text}");
        assert_eq!(sensitive_count(&gw.gateway, tool, reason, "refused"), 1.0, "{tool}");
        let declined = format!("answer {tool} decline");
        eventually("the upstream to log the decline", || upstream_log(&log).contains(&declined)).await?;
    }
    // Not every question is a secret.
    call(&gw, "tokenizer").await?.input_required()?;
    let report = report(&gw).await?;
    assert_eq!(entry(&report, "pay")["sensitive"], json!({"payment_field": 1}));
    assert_eq!(sensitive_count(&gw.gateway, "pay", "payment_field", "warned"), 0.0);
    gw.stop().await
}

#[tokio::test]
async fn park_mode_applies_the_same_policy() -> TestResult {
    let _serial = serial().await;
    let park = ["mode = \"park\""];
    let gw = StdioGateway::start_with(&["--schema"], &[], &park, "").await?;
    let (requests, state) = call(&gw, "pay").await?.input_required()?;
    let retry = gw.client.call_tool("pay", json!({})).caps(with_url()).state(&state);
    let done = retry.responses(answer_all(&requests)).send().await?;
    assert!(done.text()?.starts_with("answer: accept"), "{:?}", done.body);
    assert_eq!(metric(&gw.gateway, r#"mrtr_gateway_park_outcomes_total{outcome="resumed"}"#), 1.0);
    assert_eq!(sensitive_count(&gw.gateway, "pay", "payment_field", "warned"), 1.0);
    gw.stop().await?;

    let refuse = "[elicitation]\nsensitive = \"refuse\"";
    let gw = StdioGateway::start_with(&["--schema"], &[], &park, refuse).await?;
    let reply = call(&gw, "pay").await?;
    assert_eq!(reply.result()?["isError"], true, "{:?}", reply.body);
    assert_eq!(sensitive_count(&gw.gateway, "pay", "payment_field", "refused"), 1.0);
    assert_eq!(metric(&gw.gateway, r#"mrtr_gateway_park_outcomes_total{outcome="parked"}"#), 0.0);
    gw.stop().await
}

#[tokio::test]
async fn a_refused_question_of_a_prompt_is_a_json_rpc_error_naming_it() -> TestResult {
    let _serial = serial().await;
    let refuse = "[elicitation]\nsensitive = \"refuse\"";
    let gw = StdioGateway::start_with(&["--schema"], &[], &[], refuse).await?;
    let reply = gw.client.get_prompt("secret_prompt", json!({})).caps(with_url()).send().await?;
    let message = reply.expect_error(http::StatusCode::OK, -32603)?;
    assert!(message.contains("\"secret_prompt\"") && message.contains("credential_field"), "{message}");
    assert_eq!(sensitive_count(&gw.gateway, "secret_prompt", "credential_field", "refused"), 1.0);
    let requests =
        metric(&gw.gateway, r#"mrtr_gateway_requests_total{method="prompts/get",outcome="refused"}"#);
    assert_eq!(requests, 1.0);
    gw.stop().await
}

fn upstream_log(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}
