//! Tasks across replicas (`src/tasks/forward.rs`, `src/cluster/tasks.rs`): `tasks/get`,
//! `tasks/update` and `tasks/cancel` that reach a replica other than the task's owner are
//! forwarded to the owner over the internal listener; a finished task is kept in Redis, when
//! `state.redis_url` is set, and served from there by any replica, its owner killed or not;
//! without Redis a killed owner's task is `failed`, saying so, at once; an owner that shuts
//! down stops its running tasks, a legacy task and a long call, cancels them upstream and
//! stores them `failed`, saying why, for the other replica to serve; the retry of an input
//! round of a call that asks before it creates its task, reaching the other replica, is
//! forwarded to the owner, where the call waits. Each replica runs the
//! scripted legacy task server (`tests/fixtures/task_server.py`) over stdio, so a task lives
//! only in its owner's upstream process.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use http::StatusCode;
use mrtr_gateway::app::Gateway;
use mrtr_gateway::config::Config;
use serde_json::json;

use super::tasks::{task, until, with_extension};
use crate::common::harness::{metric, test_key};
use crate::common::process::{address_in_use, on_free_port, GatewayProcess};
use crate::common::redis::RedisServer;
use crate::common::stdio::serial;
use crate::common::{bounded, eventually, Client, HarnessError, TestResult};

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/task_server.py");

/// The fixture's log (what its processes ran and cancelled), removed on drop.
struct FixtureLog(PathBuf);

impl FixtureLog {
    fn new() -> Self {
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        Self(std::env::temp_dir().join(format!("task-replicas-{}-{nanos}.log", std::process::id())))
    }

    fn events(&self, event: &str) -> usize {
        std::fs::read_to_string(&self.0).unwrap_or_default().lines().filter(|l| *l == event).count()
    }
}

impl Drop for FixtureLog {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A replica's configuration: its internal listener on `port`, advertised, the fixture behind
/// it, and Redis when given; calls of `screen_plain` become tasks at once.
fn replica_toml(port: u16, log: &Path, redis: Option<&str>) -> String {
    let command = vec!["python3", FIXTURE, "--log", log.to_str().unwrap_or_default()];
    let redis = redis.map(|url| format!("redis_url = {url:?}\n")).unwrap_or_default();
    format!(
        "[front]\nlisten = \"127.0.0.1:0\"\n[admin]\nlisten = \"127.0.0.1:0\"\n[log]\nlevel = \"warn\"\n\
         [state]\nkeys = [{:?}]\n{redis}\
         [cluster]\nlisten = \"127.0.0.1:{port}\"\nadvertise_url = \"http://127.0.0.1:{port}\"\n\
         [tasks]\nlong_tools = [\"screen_plain\"]\n[upstream]\ncommand = {command:?}\n",
        test_key("k1", 0x11),
    )
}

/// A replica in this process.
async fn replica(log: &FixtureLog, redis: Option<&str>) -> TestResult<(Gateway, Client)> {
    on_free_port(address_in_use, |port| async move {
        let gateway = Gateway::start(Config::from_toml(&replica_toml(port, &log.0, redis))?).await?;
        eventually("the stdio upstream to answer initialize", || gateway.ready.is_ready()).await?;
        let client = Client::new(gateway.url("/mcp"));
        Ok((gateway, client))
    })
    .await
}

/// A replica as a process of its own, to be killed.
async fn replica_process(log: &FixtureLog, redis: Option<&str>, dir: &Path) -> TestResult<GatewayProcess> {
    let config = dir.join("owner.toml");
    on_free_port(address_in_use, |port| {
        let (config, toml) = (config.clone(), replica_toml(port, &log.0, redis));
        async move {
            std::fs::write(&config, toml)?;
            GatewayProcess::spawn_args(&["--config", &config.display().to_string()], Stdio::null()).await
        }
    })
    .await
}

async fn start_task(client: &Client, tool: &str) -> TestResult<String> {
    start_task_with(client, tool, json!({})).await
}

async fn start_task_with(client: &Client, tool: &str, arguments: serde_json::Value) -> TestResult<String> {
    let reply = client.call_tool(tool, arguments).caps(with_extension()).send().await?;
    let result = reply.result()?;
    if result["resultType"] != "task" {
        return Err(HarnessError::Unexpected(format!("wanted a CreateTaskResult, got {}", reply.body)));
    }
    Ok(result["taskId"].as_str().unwrap_or_default().to_owned())
}

fn forwards(gateway: &Gateway, outcome: &str) -> f64 {
    metric(gateway, &format!("mrtr_gateway_task_forwards_total{{outcome=\"{outcome}\"}}"))
}

#[tokio::test]
async fn get_update_and_cancel_on_a_replica_that_is_not_the_owner_reach_the_owner() -> TestResult {
    let _serial = serial().await;
    let log = FixtureLog::new();
    let (a, client_a) = replica(&log, None).await?;
    let (b, client_b) = replica(&log, None).await?;

    // A question inside a task started on a, seen and answered on b.
    let asking = start_task(&client_a, "ask_job").await?;
    let waiting = until(&client_b, &asking, "input_required").await?;
    assert_eq!(waiting["taskId"], asking.as_str(), "{waiting}");
    let requests = waiting["inputRequests"].as_object().cloned().unwrap_or_default();
    let key = requests.keys().next().cloned().unwrap_or_default();
    assert_eq!(requests[&key]["params"]["message"], "Your name?", "{waiting}");
    let answers = json!({key.as_str(): {"action": "accept", "content": {"name": "Ada"}}});
    let ack = task(&client_b, "tasks/update", &asking, Some(("inputResponses", answers))).await?;
    assert_eq!(*ack.result()?, json!({"resultType": "complete"}));
    let done = until(&client_b, &asking, "completed").await?;
    assert_eq!(done["result"]["content"][0]["text"], "Hello, Ada", "{done}");

    // A running task cancelled from b: the owner cancels it upstream.
    let slow = start_task(&client_a, "slow_job").await?;
    assert_eq!(until(&client_b, &slow, "working").await?["status"], "working");
    let ack = task(&client_b, "tasks/cancel", &slow, None).await?;
    assert_eq!(*ack.result()?, json!({"resultType": "complete"}));
    assert_eq!(until(&client_a, &slow, "cancelled").await?["status"], "cancelled");
    eventually("the upstream task to be cancelled", || log.events("cancel slow_job") == 1).await?;

    assert_eq!(log.events("run ask_job") + log.events("run slow_job"), 2, "each task ran once, on a");
    let forwarded = forwards(&b, "answered");
    assert!(forwarded >= 4.0, "b forwarded every request: {forwarded}");
    assert_eq!(forwards(&a, "answered"), 0.0, "a served its own tasks");
    // An id that does not open is refused where it arrives, never forwarded.
    let forged = task(&client_b, "tasks/get", "t1.AAAA", None).await?;
    forged.expect_error(StatusCode::BAD_REQUEST, -32602)?;
    assert_eq!(forwards(&b, "answered"), forwarded);
    bounded("replica a to drain", a.shutdown()).await?;
    bounded("replica b to drain", b.shutdown()).await
}

#[tokio::test]
async fn a_stored_result_is_served_after_its_owner_was_killed() -> TestResult {
    let _serial = serial().await;
    let redis = RedisServer::start().await?;
    let (log, dir) = (FixtureLog::new(), tempfile::tempdir()?);
    let owner = replica_process(&log, Some(&redis.url()), dir.path()).await?;
    let (b, client_b) = replica(&log, Some(&redis.url())).await?;

    let task_id = start_task(&owner.client, "count_job").await?;
    // b asks Redis first: once the owner stored the finished task, b serves it from there.
    bounded("b to serve the finished task from Redis", async {
        loop {
            let result = task(&client_b, "tasks/get", &task_id, None).await?.result()?.clone();
            if result["status"] == "completed" && forwards(&b, "stored") >= 1.0 {
                return Ok::<_, HarnessError>(());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await??;

    drop(owner); // SIGKILL: the owner's table and upstream process die with it.
    let served = task(&client_b, "tasks/get", &task_id, None).await?;
    let result = served.result()?;
    assert_eq!(
        (result["status"].as_str(), result["taskId"].as_str()),
        (Some("completed"), Some(task_id.as_str()))
    );
    assert_eq!(result["result"]["content"][0]["text"], "run 1", "{result}");
    // A finished task's cancel is acknowledged, as on its owner.
    let ack = task(&client_b, "tasks/cancel", &task_id, None).await?;
    assert_eq!(*ack.result()?, json!({"resultType": "complete"}));
    assert_eq!(log.events("run count_job"), 1);
    bounded("replica b to drain", b.shutdown()).await
}

#[tokio::test]
async fn without_redis_a_killed_owners_task_fails_at_once_saying_why() -> TestResult {
    let _serial = serial().await;
    let (log, dir) = (FixtureLog::new(), tempfile::tempdir()?);
    let owner = replica_process(&log, None, dir.path()).await?;
    let (b, client_b) = replica(&log, None).await?;
    let task_id = start_task(&owner.client, "slow_job").await?;
    assert_eq!(until(&client_b, &task_id, "working").await?["status"], "working", "forwarded to the owner");

    drop(owner);
    let asked = Instant::now();
    let failed = task(&client_b, "tasks/get", &task_id, None).await?;
    let result = failed.result()?;
    assert_eq!(result["status"], "failed", "{result}");
    let message = result["error"]["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("the replica running this task is gone"), "{message}");
    for method in ["tasks/cancel", "tasks/update"] {
        let extra = (method == "tasks/update").then(|| ("inputResponses", json!({})));
        let refused = task(&client_b, method, &task_id, extra).await?;
        let message = refused.expect_error(StatusCode::SERVICE_UNAVAILABLE, -32603)?;
        assert!(message.starts_with("the replica running this task is gone"), "{method}: {message}");
    }
    assert!(asked.elapsed() < Duration::from_secs(3), "no hang: {:?}", asked.elapsed());
    assert_eq!(forwards(&b, "gone"), 3.0);
    bounded("replica b to drain", b.shutdown()).await
}

#[tokio::test]
async fn an_owner_that_shuts_down_stops_its_tasks_and_stores_them_failed() -> TestResult {
    let _serial = serial().await;
    let redis = RedisServer::start().await?;
    let log = FixtureLog::new();
    let (a, client_a) = replica(&log, Some(&redis.url())).await?;
    let (b, client_b) = replica(&log, Some(&redis.url())).await?;
    // A legacy task that runs until cancelled, and a long call waiting on its question.
    let slow = start_task(&client_a, "slow_job").await?;
    let long = start_task_with(&client_a, "screen_plain", json!({"ask": "form"})).await?;
    assert_eq!(until(&client_b, &slow, "working").await?["status"], "working");
    assert_eq!(until(&client_b, &long, "input_required").await?["status"], "input_required");

    let metrics = a.metrics.clone();
    bounded("replica a to shut down", a.shutdown()).await?;
    assert_eq!(metrics.tasks.total.with_label_values(&["stopped"]).get(), 2);
    assert_eq!(log.events("cancel slow_job"), 1, "the legacy task was cancelled upstream");
    for task_id in [&slow, &long] {
        let result = task(&client_b, "tasks/get", task_id, None).await?.result()?.clone();
        assert_eq!(result["status"], "failed", "{result}");
        assert_eq!(result["error"]["message"], "the gateway replica running the task shut down", "{result}");
    }
    assert_eq!(forwards(&b, "stored"), 2.0, "both served from Redis, the owner gone");
    bounded("replica b to drain", b.shutdown()).await
}

#[tokio::test]
async fn a_rounds_retry_on_the_other_replica_reaches_the_waiting_call() -> TestResult {
    let _serial = serial().await;
    let log = FixtureLog::new();
    let (a, client_a) = replica(&log, None).await?;
    let (b, client_b) = replica(&log, None).await?;
    let first = client_a.call_tool("ask_first_job", json!({})).caps(with_extension()).send().await?;
    let round = first.result()?.clone();
    assert_eq!(round["resultType"], "input_required", "{round}");
    let key = round["inputRequests"].as_object().and_then(|r| r.keys().next().cloned()).unwrap_or_default();
    let state = round["requestState"].clone();
    let answers = json!({key.as_str(): {"action": "accept", "content": {"name": "Ada"}}});
    let retry = client_b.call_tool("ask_first_job", json!({})).caps(with_extension());
    let second = retry.param("requestState", state).param("inputResponses", answers).send().await?;
    let created = second.result()?.clone();
    assert_eq!(created["resultType"], "task", "{created}");
    let task_id = created["taskId"].as_str().unwrap_or_default();
    let done = until(&client_b, task_id, "completed").await?;
    assert_eq!(done["result"]["content"][0]["text"], "Hello, Ada", "{done}");
    assert_eq!(log.events("run ask_first_job"), 1, "the call ran once, on a");
    assert!(forwards(&b, "answered") >= 2.0, "the retry and the polls went to a");
    bounded("replica a to drain", a.shutdown()).await?;
    bounded("replica b to drain", b.shutdown()).await
}
