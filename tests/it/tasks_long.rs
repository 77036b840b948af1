//! Long legacy calls become tasks (`src/tasks/long.rs`): an ordinary tool named in
//! `tasks.long_tools`, or a call running past `tasks.long_after_ms`, keeps running upstream on
//! the replica while a client that declared the tasks extension polls it as a task. A question
//! inside it is answered by `tasks/update` straight to the waiting upstream request, so the
//! tool runs once; cancel cancels it upstream; a client without the extension, or a call that
//! finishes in time, gets the plain in-line call.

use std::time::Duration;

use http::StatusCode;
use mrtr_gateway::app::Gateway;
use serde_json::{json, Value};

use super::form_only;
use super::tasks::{task, until, with_extension};
use crate::common::client::Call;
use crate::common::harness::metric;
use crate::common::transports::{on_every_transport, Transport, Upstream};
use crate::common::{answer_all, bounded, eventually, Client, HarnessError, Reply, Setup, TestResult};

on_every_transport!(a_long_call_asks_inside_its_task_and_runs_once);

fn long(lines: &[&str]) -> Setup {
    lines.iter().fold(Setup::new(), |setup, line| setup.set("tasks", line))
}

fn tasks_total(gateway: &Gateway, outcome: &str) -> f64 {
    metric(gateway, &format!("mrtr_gateway_tasks_total{{outcome=\"{outcome}\"}}"))
}

fn call<'a>(client: &'a Client, tool: &str, arguments: Value) -> Call<'a> {
    client.call_tool(tool, arguments).caps(with_extension())
}

/// The task id of a `CreateTaskResult`.
fn created(reply: &Reply) -> TestResult<String> {
    let result = reply.result()?;
    match (result["resultType"].as_str(), result["taskId"].as_str()) {
        (Some("task"), Some(id)) => Ok(id.to_owned()),
        _ => Err(HarnessError::Unexpected(format!("wanted a CreateTaskResult, got {}", reply.body))),
    }
}

async fn a_long_call_asks_inside_its_task_and_runs_once(t: Transport) -> TestResult {
    let upstream = Upstream::start(t).await?;
    let (gateway, client) = upstream.gateway(long(&["long_tools = [\"place_order\"]"])).await?;
    let task_id = created(&call(&client, "place_order", json!({})).send().await?)?;
    // The task is in the table before its id is handed out.
    let first = task(&client, "tasks/get", &task_id, None).await?;
    assert!(["working", "input_required"].contains(&first.result()?["status"].as_str().unwrap_or_default()));

    let waiting = until(&client, &task_id, "input_required").await?;
    let requests = waiting["inputRequests"].as_object().cloned().unwrap_or_default();
    assert_eq!(requests.len(), 1, "{waiting}");
    let (key, question) = requests.iter().next().expect("one question");
    assert_eq!(question["method"], "elicitation/create");
    assert_eq!(question["params"]["message"], "Order placed. Any delivery note?");
    assert_eq!(upstream.orders(), 1, "the order was placed before the question");

    let ack =
        task(&client, "tasks/update", &task_id, Some(("inputResponses", answer_all(&requests)))).await?;
    assert_eq!(*ack.result()?, json!({"resultType": "complete"}));
    let done = until(&client, &task_id, "completed").await?;
    let text = done["result"]["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.starts_with("Order #1 placed (accept)"), "{done}");
    assert_eq!(done["statusMessage"], "step 1 of 1", "the call's progress is the status message");
    assert_eq!(upstream.orders(), 1, "answered live: nothing was replayed");
    assert_eq!(upstream.tool_calls("place_order"), 1);
    assert_eq!(upstream.cancellations(), 0);
    // A key is never reused in the task: an answer to it again changes nothing.
    let again = json!({key.as_str(): {"action": "accept", "content": {"note": "twice"}}});
    task(&client, "tasks/update", &task_id, Some(("inputResponses", again))).await?.result()?;
    assert_eq!(until(&client, &task_id, "completed").await?["result"], done["result"]);
    eventually("the task to be counted", || tasks_total(&gateway, "completed") == 1.0).await?;
    assert_eq!(tasks_total(&gateway, "created"), 1.0);
    bounded("the gateway to drain", gateway.shutdown()).await?;
    upstream.stop().await
}

#[tokio::test]
async fn a_call_past_the_duration_becomes_a_task_and_a_quick_one_answers_in_line() -> TestResult {
    let h = long(&["long_after_ms = 300"]).start().await?;
    let quick = call(&h.client, "count_down", json!({"steps": 1, "delay_ms": 10})).send().await?;
    assert_eq!(quick.text()?, "Done after 1 steps", "finished before the duration: in-line");
    assert_eq!(h.metric("mrtr_gateway_tasks_total{outcome=\"created\"}"), 0.0);

    let started = std::time::Instant::now();
    let reply = call(&h.client, "count_down", json!({"steps": 6, "delay_ms": 150})).send().await?;
    let task_id = created(&reply)?;
    assert!(started.elapsed() >= Duration::from_millis(300), "not before the duration");
    assert_eq!(reply.result()?["status"], "working");
    assert!(reply.result()?["ttlMs"].as_u64().is_some_and(|ttl| ttl > 0), "{}", reply.body);
    let mut messages = Vec::new();
    let done = bounded("the task to complete", async {
        loop {
            let now = task(&h.client, "tasks/get", &task_id, None).await?.result()?.clone();
            messages.extend(now["statusMessage"].as_str().map(str::to_owned));
            if now["status"] != "working" {
                return Ok::<_, HarnessError>(now);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await??;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["content"][0]["text"], "Done after 6 steps");
    assert!(messages.iter().any(|m| m.starts_with("step ") && m.ends_with(" of 6")), "{messages:?}");
    assert_eq!(h.demo.stats.tool_calls("count_down"), 2, "each call ran once");
    assert_eq!(h.demo.stats.cancellations(), 0);
    assert_eq!(h.metric("mrtr_gateway_tasks_total{outcome=\"created\"}"), 1.0);
    h.stop().await
}

#[tokio::test]
async fn a_question_before_the_duration_makes_the_call_a_task_at_once() -> TestResult {
    let h = long(&["long_after_ms = 60000"]).start().await?;
    let reply =
        bounded("the question to make a task", call(&h.client, "place_order", json!({})).send()).await??;
    let task_id = created(&reply)?;
    let waiting = task(&h.client, "tasks/get", &task_id, None).await?.result()?.clone();
    assert_eq!(waiting["status"], "input_required", "the question is pending at once: {waiting}");
    let requests = waiting["inputRequests"].as_object().cloned().unwrap_or_default();
    task(&h.client, "tasks/update", &task_id, Some(("inputResponses", answer_all(&requests)))).await?;
    let done = until(&h.client, &task_id, "completed").await?;
    assert!(done["result"]["content"][0]["text"].as_str().is_some_and(|t| t.starts_with("Order #1 placed")));
    assert_eq!(h.demo.stats.orders(), 1);
    h.stop().await
}

#[tokio::test]
async fn cancel_cancels_the_long_call_upstream() -> TestResult {
    let h = long(&["long_tools = [\"count_down\"]"]).start().await?;
    let reply = call(&h.client, "count_down", json!({"steps": 100, "delay_ms": 100})).send().await?;
    let task_id = created(&reply)?;
    assert_eq!(until(&h.client, &task_id, "working").await?["status"], "working");
    let ack = task(&h.client, "tasks/cancel", &task_id, None).await?;
    assert_eq!(*ack.result()?, json!({"resultType": "complete"}));
    assert_eq!(until(&h.client, &task_id, "cancelled").await?["status"], "cancelled");
    eventually("the call to be cancelled upstream", || h.demo.stats.cancellations() == 1).await?;
    eventually("the cancel to be counted", || {
        h.metric("mrtr_gateway_tasks_total{outcome=\"cancelled\"}") == 1.0
    })
    .await?;
    h.stop().await
}

#[tokio::test]
async fn a_client_without_the_extension_gets_the_plain_in_line_call() -> TestResult {
    let h = long(&["long_tools = [\"place_order\"]", "long_after_ms = 100"]).start().await?;
    // A question is an input round, as for any call.
    let reply = h.client.call_tool("place_order", json!({})).caps(form_only()).send().await?;
    let (questions, _state) = reply.input_required()?;
    assert_eq!(questions.len(), 1);
    // A call past the duration runs to its end in-line.
    let slow = h.client.call_tool("count_down", json!({"steps": 3, "delay_ms": 100})).caps(form_only());
    assert_eq!(slow.send().await?.text()?, "Done after 3 steps");
    assert_eq!(h.metric("mrtr_gateway_tasks_total{outcome=\"created\"}"), 0.0);
    h.stop().await
}

#[tokio::test]
async fn long_calls_count_against_the_task_bounds() -> TestResult {
    let setup = long(&["long_tools = [\"place_order\"]", "long_after_ms = 100", "max_tasks = 1"]);
    let h = setup.start().await?;
    let first = call(&h.client, "count_down", json!({"steps": 100, "delay_ms": 100})).send().await?;
    let first = created(&first)?;
    let refused = call(&h.client, "place_order", json!({})).send().await?;
    let message = refused.expect_error(StatusCode::SERVICE_UNAVAILABLE, -32603)?;
    assert!(message.contains("limit is 1"), "{message}");
    assert_eq!(h.demo.stats.orders(), 0, "the refused call never reached the upstream");
    // Without room, a call past the duration runs on in-line instead.
    let inline = call(&h.client, "count_down", json!({"steps": 3, "delay_ms": 100})).send().await?;
    assert_eq!(inline.text()?, "Done after 3 steps");
    task(&h.client, "tasks/cancel", &first, None).await?.result()?;
    until(&h.client, &first, "cancelled").await?;
    assert_eq!(h.metric("mrtr_gateway_tasks_total{outcome=\"full\"}"), 1.0);
    assert_eq!(h.metric("mrtr_gateway_tasks_total{outcome=\"created\"}"), 1.0);
    h.stop().await
}

#[tokio::test]
async fn a_task_outlives_the_upstream_request_timeout() -> TestResult {
    let setup = long(&["long_tools = [\"count_down\"]"]).set("upstream", "request_timeout_ms = 400");
    let h = setup.start().await?;
    let reply = call(&h.client, "count_down", json!({"steps": 8, "delay_ms": 100})).send().await?;
    let task_id = created(&reply)?;
    let done = until(&h.client, &task_id, "completed").await?;
    assert_eq!(done["status"], "completed", "bounded by the task's life, not the request's: {done}");
    assert_eq!(done["result"]["content"][0]["text"], "Done after 8 steps");
    // An in-line call is still bounded by the request timeout.
    let inline = h.client.call_tool("count_down", json!({"steps": 8, "delay_ms": 100})).send().await?;
    inline.expect_error(StatusCode::GATEWAY_TIMEOUT, -32603)?;
    h.stop().await
}
