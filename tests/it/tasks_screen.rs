//! A question a legacy server asks inside a task meets the checks every question meets
//! (`src/tasks/screen.rs`), against the scripted task server (`tests/fixtures/task_server.py`,
//! whose `screen_job` asks one question and ends with the answer it got):
//! - a question the client declared no capability for is never shown: the upstream gets an
//!   error naming the capability, and the denial is counted;
//! - an invalid question is refused upstream as the bridge refuses it, a repaired one is shown
//!   repaired; both counted in the migration report;
//! - under `elicitation.sensitive = "refuse"` a password form is declined upstream and never
//!   shown; under `warn` it is shown, and counted; a `javascript:` URL is declined either way;
//! - a long call's question (`screen_plain`, asked on the call's own stream) meets the same checks;
//! - a task's result meets the check an ordinary call's result meets: `structuredContent` that
//!   breaks the tool's `outputSchema` (`typed_job`, `typed_plain`) becomes an error result naming
//!   the tool and the reason, whether `tasks/get` shows it, the tool answered at once, or a long
//!   call finished as a task.

use serde_json::{json, Value};

use super::tasks::{with_extension, TaskGateway};
use crate::common::harness::metric;
use crate::common::stdio::serial;
use crate::common::{bounded, HarnessError, TestResult};
use mrtr_gateway::tasks::EXTENSION;

/// Polls `tasks/get` until the task ends; returns its last state and whether any poll showed
/// it waiting on a question.
async fn to_the_end(gw: &TaskGateway, task_id: &str) -> TestResult<(Value, bool)> {
    bounded("the task to end", async {
        let mut asked = false;
        loop {
            let result = gw.task("tasks/get", task_id, None).await?.result()?.clone();
            asked |= result["status"] == "input_required" || result.get("inputRequests").is_some();
            if ["completed", "failed", "cancelled"].contains(&result["status"].as_str().unwrap_or_default()) {
                return Ok::<_, HarnessError>((result, asked));
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
    .await?
}

/// What the upstream got for its question: `screen_job` ends with "answer <json>".
fn upstream_got(done: &Value) -> Value {
    let text = done["result"]["content"][0]["text"].as_str().unwrap_or_default();
    serde_json::from_str(text.strip_prefix("answer ").unwrap_or_default()).unwrap_or(Value::Null)
}

fn sensitive(gw: &TaskGateway, reason: &str, action: &str) -> f64 {
    let series =
        format!("mrtr_gateway_sensitive_questions_total{{action=\"{action}\",reason=\"{reason}\",tool=\"screen_job\"}}");
    metric(&gw.gateway, &series)
}

#[tokio::test]
async fn a_question_the_client_cannot_serve_is_never_shown_inside_a_task() -> TestResult {
    let _serial = serial().await;
    let gw = TaskGateway::start(&[]).await?;
    let no_forms = json!({"extensions": {EXTENSION: {}}});
    let task_id = gw.start_task_as("screen_job", json!({"ask": "form"}), no_forms).await?;
    let (done, asked) = to_the_end(&gw, &task_id).await?;
    assert!(!asked, "the question was never shown: {done}");
    let error = &upstream_got(&done)["error"];
    assert!(error["message"].as_str().is_some_and(|m| m.contains("elicitation capability")), "{done}");
    assert!(done["statusMessage"].as_str().is_some_and(|m| m.contains("elicitation capability")), "{done}");
    assert_eq!(metric(&gw.gateway, "mrtr_gateway_capability_denials_total{capability=\"elicitation\"}"), 1.0);
    // A client that serves forms but not sampling is not asked to sample either.
    let task_id = gw.start_task("screen_job", json!({"ask": "sampling"})).await?;
    let (done, asked) = to_the_end(&gw, &task_id).await?;
    assert!(!asked && upstream_got(&done)["error"].is_object(), "{done}");
    assert_eq!(metric(&gw.gateway, "mrtr_gateway_capability_denials_total{capability=\"sampling\"}"), 1.0);
    gw.stop().await
}

#[tokio::test]
async fn an_invalid_question_inside_a_task_is_refused_and_a_repaired_one_shown_repaired() -> TestResult {
    let _serial = serial().await;
    let gw = TaskGateway::start(&[]).await?;
    let task_id = gw.start_task("screen_job", json!({"ask": "invalid"})).await?;
    let (done, asked) = to_the_end(&gw, &task_id).await?;
    assert!(!asked, "{done}");
    let error = &upstream_got(&done)["error"];
    assert_eq!(error["code"], -32602, "{done}");
    assert_eq!(
        error["message"],
        "mrtr-gateway refused this request: it is not a valid MCP 2026-07-28 question"
    );
    let refusals = "mrtr_gateway_schema_refusals_total{reason=\"question_invalid\",tool=\"screen_job\"}";
    assert_eq!(metric(&gw.gateway, refusals), 1.0);

    let task_id = gw.start_task("screen_job", json!({"ask": "untyped"})).await?;
    let waiting = gw.until(&task_id, "input_required").await?;
    let requests = waiting["inputRequests"].as_object().cloned().unwrap_or_default();
    let (key, request) = requests.iter().next().ok_or(HarnessError::Unexpected(waiting.to_string()))?;
    assert_eq!(request["params"]["requestedSchema"]["type"], "object", "shown repaired: {waiting}");
    let repairs = "mrtr_gateway_schema_repairs_total{reason=\"question_type_added\",tool=\"screen_job\"}";
    assert_eq!(metric(&gw.gateway, repairs), 1.0);
    let answer = json!({key.as_str(): {"action": "accept", "content": {"name": "Ada"}}});
    gw.task("tasks/update", &task_id, Some(("inputResponses", answer))).await?.result()?;
    let (done, _) = to_the_end(&gw, &task_id).await?;
    assert_eq!(upstream_got(&done)["content"]["name"], "Ada", "{done}");
    gw.stop().await
}

#[tokio::test]
async fn under_refuse_a_password_form_inside_a_task_is_declined_upstream() -> TestResult {
    let _serial = serial().await;
    let gw = TaskGateway::start_with(&[], "[elicitation]\nsensitive = \"refuse\"").await?;
    let task_id = gw.start_task("screen_job", json!({"ask": "password"})).await?;
    let (done, asked) = to_the_end(&gw, &task_id).await?;
    assert!(!asked, "the form was never shown: {done}");
    assert_eq!(upstream_got(&done), json!({"action": "decline"}), "{done}");
    assert!(done["statusMessage"].as_str().is_some_and(|m| m.contains("password_format")), "{done}");
    assert_eq!(sensitive(&gw, "password_format", "refused"), 1.0);
    gw.stop().await
}

#[tokio::test]
async fn under_warn_a_password_form_inside_a_task_is_shown_and_a_script_url_is_not() -> TestResult {
    let _serial = serial().await;
    let gw = TaskGateway::start(&[]).await?;
    let task_id = gw.start_task("screen_job", json!({"ask": "password"})).await?;
    let waiting = gw.until(&task_id, "input_required").await?;
    let requests = waiting["inputRequests"].as_object().cloned().unwrap_or_default();
    let (key, request) = requests.iter().next().ok_or(HarnessError::Unexpected(waiting.to_string()))?;
    assert_eq!(request["params"]["message"], "Log in", "{waiting}");
    assert_eq!(sensitive(&gw, "password_format", "warned"), 1.0);
    let answer = json!({key.as_str(): {"action": "cancel"}});
    gw.task("tasks/update", &task_id, Some(("inputResponses", answer))).await?.result()?;
    assert_eq!(upstream_got(&to_the_end(&gw, &task_id).await?.0), json!({"action": "cancel"}));

    let urls = json!({"elicitation": {"form": {}, "url": {}}, "extensions": {EXTENSION: {}}});
    let task_id = gw.start_task_as("screen_job", json!({"ask": "script"}), urls).await?;
    let (done, asked) = to_the_end(&gw, &task_id).await?;
    assert!(!asked, "{done}");
    assert_eq!(upstream_got(&done), json!({"action": "decline"}), "{done}");
    assert_eq!(sensitive(&gw, "script_url", "refused"), 1.0);
    gw.stop().await
}

#[tokio::test]
async fn a_long_calls_password_form_is_declined_under_refuse_too() -> TestResult {
    let _serial = serial().await;
    let config = "[elicitation]\nsensitive = \"refuse\"";
    let gw = TaskGateway::start_with(&["long_tools = [\"screen_plain\"]"], config).await?;
    let task_id = gw.start_task("screen_plain", json!({"ask": "password"})).await?;
    let (done, asked) = to_the_end(&gw, &task_id).await?;
    assert!(!asked, "the form was never shown: {done}");
    assert_eq!(upstream_got(&done), json!({"action": "decline"}), "{done}");
    let series = "mrtr_gateway_sensitive_questions_total{action=\"refused\",reason=\"password_format\",tool=\"screen_plain\"}";
    assert_eq!(metric(&gw.gateway, series), 1.0);
    gw.stop().await
}

/// The error result that replaced a result breaking its tool's `outputSchema`, else `None`.
fn refused_text(result: &Value) -> Option<String> {
    let text = result["content"][0]["text"].as_str()?;
    (result["isError"] == true && text.contains("structured_content_invalid")).then(|| text.to_owned())
}

#[tokio::test]
async fn a_tasks_result_that_breaks_its_output_schema_becomes_an_error_result() -> TestResult {
    let _serial = serial().await;
    let gw = TaskGateway::start_with(&["long_tools = [\"typed_plain\"]"], "").await?;
    let refusals = |tool: &str| {
        let series = format!(
            "mrtr_gateway_schema_refusals_total{{reason=\"structured_content_invalid\",tool=\"{tool}\"}}"
        );
        metric(&gw.gateway, &series)
    };
    // A result that keeps the schema is shown as the upstream sent it.
    let task_id = gw.start_task("typed_job", json!({"n": 3})).await?;
    let (done, _) = to_the_end(&gw, &task_id).await?;
    assert_eq!(done["result"]["structuredContent"], json!({"n": 3}), "{done}");
    assert_eq!(refusals("typed_job"), 0.0);
    // One that breaks it is replaced, in tasks/get, without the value.
    let task_id = gw.start_task("typed_job", json!({"n": "three"})).await?;
    let (done, _) = to_the_end(&gw, &task_id).await?;
    assert_eq!(done["status"], "completed", "{done}");
    let text = refused_text(&done["result"]).ok_or(HarnessError::Unexpected(done.to_string()))?;
    assert!(text.contains("\"typed_job\"") && !text.contains("three"), "{text}");
    assert!(done["result"].get("structuredContent").is_none(), "{done}");
    assert_eq!(refusals("typed_job"), 1.0);
    // A task tool the upstream ran at once, without a task.
    let reply = gw
        .client
        .call_tool("typed_job", json!({"n": "four", "at_once": true}))
        .caps(with_extension())
        .send()
        .await?;
    let result = reply.result()?;
    assert!(refused_text(result).is_some_and(|t| !t.contains("four")), "{}", reply.body);
    assert_eq!(refusals("typed_job"), 2.0);
    // A long call that finished as a task.
    let task_id = gw.start_task("typed_plain", json!({"n": "five"})).await?;
    let (done, _) = to_the_end(&gw, &task_id).await?;
    assert!(refused_text(&done["result"]).is_some_and(|t| !t.contains("five")), "{done}");
    assert_eq!(refusals("typed_plain"), 1.0);
    gw.stop().await
}
