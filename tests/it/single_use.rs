//! `state.single_use` against a real `redis-server` on loopback: a state opens once across two
//! gateways sharing the server, a replay gets the generic invalid-state error, and with Redis
//! stopped the gateway fails closed (503, `/readyz` down) and recovers when Redis is back; a
//! request without a state needs no store, so first rounds and plain calls are served
//! meanwhile.

use std::time::Duration;

use http::StatusCode;
use serde_json::json;

use super::form_only;
use crate::common::answers::NAME;
use crate::common::client::{admin_get, Call};
use crate::common::harness::metric;
use crate::common::redis::RedisServer;
use crate::common::{answer_all, bounded_for, Client, HarnessError, Setup, TestResult};

/// Longer than the suite's usual bound: the gateway pings its store every two seconds and a
/// loaded machine may miss a beat.
const STORE_WAIT: Duration = Duration::from_secs(30);

fn greet(client: &Client) -> Call<'_> {
    client.call_tool("greet", json!({})).caps(form_only())
}

fn single_use(redis: &RedisServer) -> Setup {
    Setup::new().set("state", "single_use = true").set("state", &format!("redis_url = {:?}", redis.url()))
}

/// Polls `/readyz` until it answers `status`; its body.
async fn readyz_becomes(
    client: &Client,
    admin: std::net::SocketAddr,
    status: StatusCode,
) -> TestResult<String> {
    bounded_for(STORE_WAIT, &format!("/readyz to answer {status}"), async {
        loop {
            if let Ok((s, body)) = admin_get(client, admin, "/readyz").await {
                if s == status {
                    return body;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
}

#[tokio::test]
async fn a_consumed_state_is_refused_on_a_second_replica() -> TestResult {
    let redis = RedisServer::start().await?;
    let h = single_use(&redis).start().await?;
    let (b, b_client) = single_use(&redis).attach(&h.demo).await?;

    let (questions, state) = greet(&h.client).send().await?.input_required()?;
    let done = greet(&b_client).state(&state).responses(answer_all(&questions)).send().await?;
    assert_eq!(done.text()?, format!("Hello, {NAME}!"));
    for client in [&h.client, &b_client] {
        let replay = greet(client).state(&state).responses(answer_all(&questions)).send().await?;
        let message = replay.expect_error(StatusCode::BAD_REQUEST, -32602)?;
        assert_eq!(message, "Invalid or expired requestState", "the same error as any invalid state");
    }
    assert_eq!(h.demo.stats.tool_calls("greet"), 2, "replays never reach the upstream");
    let replayed = r#"mrtr_gateway_state_rejections_total{reason="replayed"}"#;
    assert_eq!(h.metric(replayed) + metric(&b, replayed), 2.0);
    assert_eq!(h.metric(r#"mrtr_gateway_requests_total{method="tools/call",outcome="invalid_state"}"#), 1.0);
    bounded_for(STORE_WAIT, "the second gateway to drain", b.shutdown()).await?;
    h.stop().await
}

#[tokio::test]
async fn with_redis_stopped_single_use_fails_closed_and_recovers_when_it_is_back() -> TestResult {
    let mut redis = RedisServer::start().await?;
    let h = single_use(&redis).start().await?;
    let admin = h.gateway.admin_addr.ok_or_else(|| HarnessError::Unexpected("no admin listener".into()))?;
    let call = || h.client.call_tool("greet", json!({})).caps(form_only());
    let (questions, state) = call().send().await?.input_required()?;

    redis.stop()?;
    let refused = call().state(&state).responses(answer_all(&questions)).send().await?;
    let message = refused.expect_error(StatusCode::SERVICE_UNAVAILABLE, -32603)?;
    assert_eq!(message, "state store unavailable");
    assert_eq!(h.demo.stats.tool_calls("greet"), 1, "a state that could not be checked is not replayed");
    let body = readyz_becomes(&h.client, admin, StatusCode::SERVICE_UNAVAILABLE).await?;
    assert_eq!(body, "state store unavailable\n");
    assert_eq!(h.metric("mrtr_gateway_state_store_up"), 0.0);
    let failed = |op: &str| {
        ["unavailable", "timeout"]
            .iter()
            .map(|e| h.metric(&format!(r#"mrtr_gateway_state_store_errors_total{{error="{e}",op="{op}"}}"#)))
            .sum::<f64>()
    };
    assert!(failed("consume") >= 1.0 && failed("ping") >= 1.0);
    let outcome = r#"mrtr_gateway_requests_total{method="tools/call",outcome="state_store_unavailable"}"#;
    assert_eq!(h.metric(outcome), 1.0);

    redis.resume().await?;
    readyz_becomes(&h.client, admin, StatusCode::OK).await?;
    assert_eq!(h.metric("mrtr_gateway_state_store_up"), 1.0);
    // The refused retry consumed nothing: the same state now opens, once.
    let done = call().state(&state).responses(answer_all(&questions)).send().await?;
    assert_eq!(done.text()?, format!("Hello, {NAME}!"));
    let replay = call().state(&state).responses(answer_all(&questions)).send().await?;
    replay.expect_error(StatusCode::BAD_REQUEST, -32602)?;
    h.stop().await
}

#[tokio::test]
async fn with_redis_stopped_first_rounds_and_plain_calls_are_still_served() -> TestResult {
    let mut redis = RedisServer::start().await?;
    let h = single_use(&redis).start().await?;
    let admin = h.gateway.admin_addr.ok_or_else(|| HarnessError::Unexpected("no admin listener".into()))?;
    redis.stop()?;
    readyz_becomes(&h.client, admin, StatusCode::SERVICE_UNAVAILABLE).await?;
    // Nothing to consume: a first round is served and seals its state as usual.
    let (questions, state) = greet(&h.client).send().await?.input_required()?;
    let echo = h.client.call_tool("echo", json!({"message": "no store needed"})).send().await?;
    assert_eq!(echo.text()?, "Echo: no store needed");
    assert_eq!(h.metric("mrtr_gateway_state_store_up"), 0.0, "the store was down all along");
    let consume_errors = ["unavailable", "timeout"]
        .iter()
        .map(|e| h.metric(&format!(r#"mrtr_gateway_state_store_errors_total{{error="{e}",op="consume"}}"#)))
        .sum::<f64>();
    assert_eq!(consume_errors, 0.0, "neither request asked the store");
    // The retry needs the store: refused while it is down, served once it is back.
    let refused = greet(&h.client).state(&state).responses(answer_all(&questions)).send().await?;
    refused.expect_error(StatusCode::SERVICE_UNAVAILABLE, -32603)?;
    redis.resume().await?;
    readyz_becomes(&h.client, admin, StatusCode::OK).await?;
    let done = greet(&h.client).state(&state).responses(answer_all(&questions)).send().await?;
    assert_eq!(done.text()?, format!("Hello, {NAME}!"));
    h.stop().await
}
