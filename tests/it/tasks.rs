//! Legacy task tools served as 2026-07-28 tasks (`src/tasks`), against a scripted legacy
//! server with 2025-11-25 tasks over stdio (`tests/fixtures/task_server.py`): a task tool end to
//! end, run once; a question inside a task answered by `tasks/update`; cancel; forged and
//! tampered task ids; a client without the extension; and the bounds.

use std::path::PathBuf;
use std::time::Duration;

use http::StatusCode;
use mrtr_gateway::app::Gateway;
use mrtr_gateway::config::Config;
use mrtr_gateway::tasks::EXTENSION;
use serde_json::{json, Value};

use crate::common::harness::{metric, test_key};
use crate::common::stdio::serial;
use crate::common::{bounded, eventually, Client, HarnessError, Reply, TestResult};

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/task_server.py");

pub(crate) struct TaskGateway {
    pub(crate) gateway: Gateway,
    pub(crate) client: Client,
    /// What the fixture's processes did: "run <tool>", "cancel <tool>" lines.
    log: PathBuf,
}

impl TaskGateway {
    pub(crate) async fn start(tasks: &[&str]) -> TestResult<Self> {
        Self::start_with(tasks, "").await
    }

    /// [`Self::start`], with `extra` TOML sections (`[elicitation]`, say) in the configuration.
    pub(crate) async fn start_with(tasks: &[&str], extra: &str) -> TestResult<Self> {
        let log =
            std::env::temp_dir().join(format!("task-server-{}-{}.log", std::process::id(), rand_suffix()));
        let command = vec!["python3", FIXTURE, "--log", log.to_str().unwrap_or_default()];
        let toml = format!(
            "[front]\nlisten = \"127.0.0.1:0\"\n[admin]\nlisten = \"127.0.0.1:0\"\n[log]\nlevel = \"warn\"\n\
             [state]\nkeys = [{:?}]\n[tasks]\n{}\n[upstream]\ncommand = {command:?}\n{extra}\n",
            test_key("k1", 0x11),
            tasks.join("\n"),
        );
        let gateway = Gateway::start(Config::from_toml(&toml)?).await?;
        eventually("the stdio upstream to answer initialize", || gateway.ready.is_ready()).await?;
        let client = Client::new(gateway.url("/mcp"));
        Ok(Self { gateway, client, log })
    }

    pub(crate) fn events(&self, event: &str) -> usize {
        std::fs::read_to_string(&self.log).unwrap_or_default().lines().filter(|l| *l == event).count()
    }

    pub(crate) async fn start_task(&self, tool: &str, arguments: Value) -> TestResult<String> {
        self.start_task_as(tool, arguments, with_extension()).await
    }

    /// [`Self::start_task`] by a client that declared `caps` (the extension among them).
    pub(crate) async fn start_task_as(
        &self,
        tool: &str,
        arguments: Value,
        caps: Value,
    ) -> TestResult<String> {
        let reply = self.client.call_tool(tool, arguments).caps(caps).send().await?;
        let result = reply.result()?;
        if result["resultType"] != "task" {
            return Err(HarnessError::Unexpected(format!("wanted a CreateTaskResult, got {}", reply.body)));
        }
        Ok(result["taskId"].as_str().unwrap_or_default().to_owned())
    }

    pub(crate) async fn task(
        &self,
        method: &str,
        task_id: &str,
        extra: Option<(&str, Value)>,
    ) -> TestResult<Reply> {
        let mut call =
            self.client.request(method).header("mcp-name", task_id).param("taskId", json!(task_id));
        if let Some((key, value)) = extra {
            call = call.param(key, value);
        }
        call.caps(with_extension()).send().await
    }

    /// Polls `tasks/get` until the task reports `status` (or ends).
    pub(crate) async fn until(&self, task_id: &str, status: &str) -> TestResult<Value> {
        bounded(&format!("the task to be {status}"), async {
            loop {
                let reply = self.task("tasks/get", task_id, None).await?;
                let result = reply.result()?.clone();
                let now = result["status"].as_str().unwrap_or_default();
                if now == status || ["completed", "failed", "cancelled"].contains(&now) {
                    return Ok::<_, HarnessError>(result);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await?
    }

    pub(crate) async fn stop(self) -> TestResult {
        let _ = std::fs::remove_file(&self.log);
        bounded("the gateway to drain", self.gateway.shutdown()).await
    }
}

fn rand_suffix() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

pub(crate) fn with_extension() -> Value {
    json!({"elicitation": {}, "extensions": {EXTENSION: {}}})
}

/// Sends task request `method` about `task_id` (with one `extra` param) as a client that
/// declared the extension.
pub(crate) async fn task(
    client: &Client,
    method: &str,
    task_id: &str,
    extra: Option<(&str, Value)>,
) -> TestResult<Reply> {
    let mut request = client.request(method).header("mcp-name", task_id).param("taskId", json!(task_id));
    if let Some((key, value)) = extra {
        request = request.param(key, value);
    }
    request.caps(with_extension()).send().await
}

/// Polls `tasks/get` until the task reports `status`, or ends.
pub(crate) async fn until(client: &Client, task_id: &str, status: &str) -> TestResult<Value> {
    bounded(&format!("the task to be {status}"), async {
        loop {
            let result = task(client, "tasks/get", task_id, None).await?.result()?.clone();
            let now = result["status"].as_str().unwrap_or_default();
            if now == status || ["completed", "failed", "cancelled"].contains(&now) {
                return Ok::<_, HarnessError>(result);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await?
}

#[tokio::test]
async fn a_legacy_task_tool_runs_once_as_a_task_end_to_end() -> TestResult {
    let _serial = serial().await;
    let gw = TaskGateway::start(&[]).await?;
    let listed = gw.client.request("tools/list").send().await?;
    let tools = listed.result()?["tools"].as_array().cloned().unwrap_or_default();
    let count = tools.iter().find(|t| t["name"] == "count_job").expect("a required-task tool is listed");
    assert_eq!(count["execution"]["taskSupport"], "required", "execution says what it means");

    let task_id = gw.start_task("count_job", json!({})).await?;
    assert!(task_id.starts_with("t1."), "a sealed id: {task_id}");
    let done = gw.until(&task_id, "completed").await?;
    assert_eq!(done["status"], "completed");
    assert_eq!(done["resultType"], "complete");
    assert_eq!(done["result"]["content"][0]["text"], "run 1");
    assert!(done["result"].get("_meta").is_none(), "the related-task _meta is stripped: {done}");
    assert!(done["ttlMs"].as_u64().is_some_and(|t| t > 0) && done.get("ttl").is_none());
    assert_eq!(gw.events("run count_job"), 1, "the tool ran exactly once");
    eventually("the task to be counted", || {
        metric(&gw.gateway, "mrtr_gateway_tasks_total{outcome=\"completed\"}") == 1.0
    })
    .await?;
    assert_eq!(metric(&gw.gateway, "mrtr_gateway_tasks_total{outcome=\"created\"}"), 1.0);
    // The legacy methods the extension removed are unknown to a 2026 client.
    for removed in ["tasks/result", "tasks/list"] {
        let reply = gw.task(removed, &task_id, None).await?;
        reply.expect_error(StatusCode::NOT_FOUND, -32601)?;
    }
    gw.stop().await
}

#[tokio::test]
async fn a_question_inside_a_task_is_answered_by_tasks_update() -> TestResult {
    let _serial = serial().await;
    let gw = TaskGateway::start(&[]).await?;
    let task_id = gw.start_task("ask_job", json!({})).await?;
    let waiting = gw.until(&task_id, "input_required").await?;
    assert_eq!(waiting["status"], "input_required", "{waiting}");
    let requests = waiting["inputRequests"].as_object().cloned().unwrap_or_default();
    assert_eq!(requests.len(), 1, "{waiting}");
    let (key, request) = requests.iter().next().expect("one question");
    assert_eq!(request["method"], "elicitation/create");
    assert_eq!(request["params"]["message"], "Your name?");
    // Asked again, the same question is still there: the legacy server sent it only once.
    let again = gw.task("tasks/get", &task_id, None).await?;
    assert_eq!(again.result()?["inputRequests"][key.as_str()], *request);

    let answers =
        json!({key.as_str(): {"action": "accept", "content": {"name": "Ada"}}, "unknown": {"x": 1}});
    let ack = gw.task("tasks/update", &task_id, Some(("inputResponses", answers))).await?;
    assert_eq!(*ack.result()?, json!({"resultType": "complete"}), "an empty ack");
    let done = gw.until(&task_id, "completed").await?;
    assert_eq!(done["result"]["content"][0]["text"], "Hello, Ada", "{done}");
    gw.stop().await
}

#[tokio::test]
async fn cancel_cancels_upstream_and_acks_the_same_every_time() -> TestResult {
    let _serial = serial().await;
    let gw = TaskGateway::start(&[]).await?;
    let task_id = gw.start_task("slow_job", json!({})).await?;
    assert_eq!(gw.until(&task_id, "working").await?["status"], "working");
    for _ in 0..2 {
        let ack = gw.task("tasks/cancel", &task_id, None).await?;
        assert_eq!(*ack.result()?, json!({"resultType": "complete"}));
    }
    assert_eq!(gw.until(&task_id, "cancelled").await?["status"], "cancelled");
    eventually("the upstream task to be cancelled", || gw.events("cancel slow_job") == 1).await?;
    eventually("the cancel to be counted", || {
        metric(&gw.gateway, "mrtr_gateway_tasks_total{outcome=\"cancelled\"}") == 1.0
    })
    .await?;
    gw.stop().await
}

#[tokio::test]
async fn tool_errors_complete_and_protocol_errors_fail() -> TestResult {
    let _serial = serial().await;
    let gw = TaskGateway::start(&["max_result_bytes = 512"]).await?;
    let broken = gw.start_task("broken_job", json!({})).await?;
    let failed = gw.until(&broken, "failed").await?;
    assert_eq!(failed["status"], "failed");
    assert!(failed["error"]["code"].is_i64() && failed.get("result").is_none(), "{failed}");
    let big = gw.start_task("big_job", json!({"bytes": 4096})).await?;
    let over = gw.until(&big, "failed").await?;
    let message = over["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("512 bytes"), "the bound is named: {over}");
    assert!(!message.contains("xxxx"), "nothing of the result leaks");
    gw.stop().await
}

#[tokio::test]
async fn forged_and_tampered_task_ids_are_refused() -> TestResult {
    let _serial = serial().await;
    let gw = TaskGateway::start(&[]).await?;
    let reply = gw.task("tasks/get", "tasks-conformance-nonexistent-12345", None).await?;
    let message = reply.expect_error(StatusCode::BAD_REQUEST, -32602)?;
    assert_eq!(message, "unknown or expired taskId");
    let task_id = gw.start_task("count_job", json!({})).await?;
    let mut bytes = task_id.clone().into_bytes();
    let at = bytes.len() - 3;
    bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(bytes).unwrap_or_default();
    for method in ["tasks/get", "tasks/cancel"] {
        gw.task(method, &tampered, None).await?.expect_error(StatusCode::BAD_REQUEST, -32602)?;
    }
    // The header must name the task the body names.
    let mismatch = gw
        .client
        .request("tasks/get")
        .header("mcp-name", "another")
        .param("taskId", json!(task_id))
        .caps(with_extension())
        .send()
        .await?;
    mismatch.expect_error(StatusCode::BAD_REQUEST, -32020)?;
    gw.stop().await
}

#[tokio::test]
async fn a_client_without_the_extension_gets_the_error_naming_it() -> TestResult {
    let _serial = serial().await;
    let gw = TaskGateway::start(&[]).await?;
    let reply = gw.client.call_tool("count_job", json!({})).caps(json!({"elicitation": {}})).send().await?;
    reply.expect_error(StatusCode::BAD_REQUEST, -32021)?;
    assert_eq!(reply.error()?["data"]["requiredCapabilities"], json!({"extensions": {EXTENSION: {}}}));
    let get =
        gw.client.request("tasks/get").header("mcp-name", "x").param("taskId", json!("x")).send().await?;
    get.expect_error(StatusCode::BAD_REQUEST, -32021)?;
    // A tool without task support runs in-line for it, and a stray legacy `task` param is dropped.
    let plain = gw.client.call_tool("plain", json!({})).param("task", json!({"ttl": 1000})).send().await?;
    assert_eq!(plain.text()?, "plain");
    // So does an optional-task tool: no task is made for a client that cannot follow one.
    let typed = gw.client.call_tool("typed_job", json!({"n": 3})).send().await?;
    assert_eq!(typed.result()?["structuredContent"], json!({"n": 3}), "run in-line");
    assert_eq!(gw.events("run count_job"), 0, "nothing ran upstream");
    gw.stop().await
}

#[tokio::test]
async fn the_bounds_on_running_tasks_are_enforced() -> TestResult {
    let _serial = serial().await;
    let gw = TaskGateway::start(&["max_tasks = 2", "max_per_principal = 1"]).await?;
    let first = gw.start_task("slow_job", json!({})).await?;
    let second = gw.client.call_tool("slow_job", json!({})).caps(with_extension()).send().await?;
    let message = second.expect_error(StatusCode::TOO_MANY_REQUESTS, -32000)?;
    assert!(message.contains("limit is 1"), "{message}");
    assert_eq!(gw.events("run slow_job"), 1, "the refused call never reached the upstream");
    // A finished task frees its running slot.
    gw.task("tasks/cancel", &first, None).await?.result()?;
    gw.until(&first, "cancelled").await?;
    gw.start_task("count_job", json!({})).await?;
    assert_eq!(metric(&gw.gateway, "mrtr_gateway_tasks_total{outcome=\"principal_full\"}"), 1.0);
    gw.stop().await
}
