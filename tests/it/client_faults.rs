//! The client half of the fault matrix: clients that go away mid-call (a plain JSON wait and a
//! progress stream), clients that never finish their request (slow-loris headers and bodies),
//! states replayed out of order or twice, and ten concurrent retries of one state. The gateway
//! must cancel what the client abandoned, free its session and connection, and give every
//! replayed state the same answer it gave the first time, with nothing left running.

use std::time::Duration;

use http_body_util::BodyExt;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::form_only;
use crate::common::answers::NAME;
use crate::common::client::admin_get;
use crate::common::faulty::tools;
use crate::common::harness::metric_in;
use crate::common::rig::Rig;
use crate::common::{answer_all, bounded, eventually, HarnessError, Setup, TestResult};

/// How long a test lets slow clients trickle before giving up on them.
const TRICKLE: Duration = Duration::from_millis(300);
/// How long a test waits for the gateway to close a slow client: well past [`READ_TIMEOUT`].
const FRONT_READ_BOUND: Duration = Duration::from_secs(10);
/// The front's read timeout in the slow-client tests: longer than [`TRICKLE`], far below
/// [`FRONT_READ_BOUND`].
const READ_TIMEOUT: &str = "read_timeout_ms = 1000";

/// A request written over a raw socket: all of it, or all but the last `withheld` bytes.
async fn raw_request(rig: &Rig, bytes: &[u8], withheld: usize) -> TestResult<TcpStream> {
    let mut tcp = TcpStream::connect(rig.gateway.front_addr).await?;
    tcp.write_all(&bytes[..bytes.len() - withheld]).await?;
    Ok(tcp)
}

/// A client that sends its request head but not its end (slow-loris headers), and one that sends
/// the head but withholds the last bytes of the body (slow-loris body).
async fn slow_clients(rig: &Rig) -> TestResult<(TcpStream, TcpStream)> {
    let bytes = rig.client.call_tool(tools::OK, json!({})).http1_bytes()?;
    let head_end = bytes.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or(0);
    let slow_head = raw_request(rig, &bytes, bytes.len() - head_end).await?;
    let slow_body = raw_request(rig, &bytes, 5).await?;
    Ok((slow_head, slow_body))
}

/// Trickles one harmless byte at a time into a slow header block for [`TRICKLE`].
async fn trickle(tcp: &mut TcpStream) -> TestResult {
    tcp.write_all(b"\r\nx-slow: ").await?;
    let deadline = tokio::time::Instant::now() + TRICKLE;
    while tokio::time::Instant::now() < deadline {
        tcp.write_all(b"a").await?;
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    Ok(())
}

/// Waits for the gateway to close `tcp`, whatever it writes first (a 408, for instance).
async fn closed_by_the_gateway(mut tcp: TcpStream) -> TestResult {
    let mut sink = Vec::new();
    let read = tokio::time::timeout(FRONT_READ_BOUND, tcp.read_to_end(&mut sink)).await;
    // A reset counts as closed as much as an orderly end does.
    read.map(drop).map_err(|_| {
        HarnessError::Timeout(format!("the gateway to close a slow client within {FRONT_READ_BOUND:?}"))
    })
}

/// Front `tools/call` requests counted as abandoned by their client.
async fn abandoned(rig: &Rig) -> TestResult<f64> {
    let admin = rig.gateway.admin_addr.ok_or_else(|| HarnessError::Unexpected("no admin".into()))?;
    let (_, text) = admin_get(&rig.client, admin, "/metrics").await?;
    Ok(metric_in(&text, r#"mrtr_gateway_requests_total{method="tools/call",outcome="abandoned"}"#))
}

#[tokio::test]
async fn a_client_that_disconnects_mid_call_cancels_it_and_frees_the_session() -> TestResult {
    let rig = Rig::start().await?;
    let bytes = rig.client.call_tool(tools::WAIT, json!({})).http1_bytes()?;
    let tcp = raw_request(&rig, &bytes, 0).await?;
    let stats = rig.upstream.stats();
    eventually("the call to run upstream", || stats.open_streams() == 1).await?;
    // A 2026-07-28 client cancels by closing its connection; a legacy server needs to be told.
    drop(tcp);
    eventually("the upstream call to be cancelled", || stats.cancellations() == 1).await?;
    rig.assert_at_rest().await?;
    // Nobody got a response, yet the request was counted (and logged) as abandoned.
    assert_eq!(abandoned(&rig).await?, 1.0);
    // Freed, not evicted: the same session serves the next call.
    rig.expect_ok("s1").await?;
    assert_eq!(stats.initializes(), 1);
    assert_eq!(stats.deletes(), 0);
    rig.stop().await
}

#[tokio::test]
async fn a_client_that_closes_its_progress_stream_cancels_the_call_and_frees_the_session() -> TestResult {
    let rig = Rig::start().await?;
    let response = rig.client.call_tool(tools::WAIT, json!({})).progress(json!("p-1")).open().await?;
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut body = response.into_body();
    let first = bounded("the first progress event", body.frame()).await?;
    assert!(first.is_some_and(|frame| frame.is_ok()), "a progress event arrived");
    drop(body);
    let stats = rig.upstream.stats();
    eventually("the upstream call to be cancelled", || stats.cancellations() == 1).await?;
    rig.assert_at_rest().await?;
    // The stream had begun, so no error response exists; its end is counted as abandoned.
    assert_eq!(abandoned(&rig).await?, 1.0);
    rig.expect_ok("s1").await?;
    assert_eq!(stats.initializes(), 1);
    rig.stop().await
}

#[tokio::test]
async fn slow_clients_that_give_up_free_their_connection_slots() -> TestResult {
    // Two slots, both taken by clients that never finish their request.
    let rig = Rig::with(Setup::faulty().set("front", "max_connections = 2")).await?;
    let (mut slow_head, slow_body) = slow_clients(&rig).await?;
    trickle(&mut slow_head).await?;
    let client = rig.client.clone();
    let waiting = tokio::spawn(async move { client.call_tool(tools::OK, json!({})).send().await });
    drop((slow_head, slow_body));
    // Their slots, tasks and buffers go when they do, and the waiting client is served.
    let reply = bounded("the waiting client", waiting)
        .await?
        .map_err(|e| HarnessError::Unexpected(format!("the waiting call failed: {e}")))??;
    assert_eq!(reply.text()?, "ok from s1");
    assert_eq!(rig.upstream.stats().calls_of(tools::OK), 2, "the slow requests never reached it");
    rig.assert_at_rest().await?;
    rig.stop().await
}

#[tokio::test]
async fn the_front_drops_a_client_that_never_ends_its_headers() -> TestResult {
    let rig = Rig::with(Setup::faulty().set("front", READ_TIMEOUT)).await?;
    let (mut slow_head, slow_body) = slow_clients(&rig).await?;
    drop(slow_body);
    trickle(&mut slow_head).await?;
    closed_by_the_gateway(slow_head).await?;
    rig.assert_at_rest().await?;
    rig.stop().await
}

#[tokio::test]
async fn the_front_drops_a_client_that_never_ends_its_body() -> TestResult {
    let rig = Rig::with(Setup::faulty().set("front", READ_TIMEOUT)).await?;
    let (slow_head, slow_body) = slow_clients(&rig).await?;
    drop(slow_head);
    closed_by_the_gateway(slow_body).await?;
    rig.assert_at_rest().await?;
    rig.stop().await
}

#[tokio::test]
async fn stale_duplicated_and_reordered_states_get_consistent_answers() -> TestResult {
    let rig = Rig::start().await?;
    let call = || rig.client.call_tool(tools::ASK_TWICE, json!({})).caps(form_only());
    let (q1, s1) = call().send().await?.input_required()?;
    let (q2, s2) = call().state(&s1).responses(answer_all(&q1)).send().await?.input_required()?;
    let message = q2.values().next().map(|q| q["params"]["message"].clone()).unwrap_or_default();
    assert_eq!(message, json!(format!("Please confirm: is your name {NAME}?")));
    // Round 1's state after round 2: the same second round again, under a fresh state.
    let (q2_again, s2_again) = call().state(&s1).responses(answer_all(&q1)).send().await?.input_required()?;
    assert_eq!(q2_again, q2);
    assert_ne!(s2_again, s2, "every round seals a new state");
    // Both round-2 states finish the call, in either order, and the same state twice finishes
    // it twice: single use is not promised, every retry is a replay.
    let done = format!("Confirmed {NAME}: true");
    for state in [&s2_again, &s2, &s2] {
        let reply = call().state(state).responses(answer_all(&q2)).send().await?;
        assert_eq!(reply.text()?, done);
    }
    // A round-2 state without its answer asks its question again.
    let (q2_asked, _) = call().state(&s2).send().await?.input_required()?;
    assert_eq!(q2_asked, q2);
    let stats = rig.upstream.stats();
    assert_eq!(stats.calls_of(tools::ASK_TWICE), 7, "every request replayed the call once");
    // Answers replayed upstream: 1 + 1 + 2 + 2 + 2 + 1.
    assert_eq!(stats.answers(), 9);
    assert_eq!(stats.initializes(), 2, "one session for these capabilities, reused throughout");
    rig.assert_at_rest().await?;
    rig.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_concurrent_retries_of_one_state_agree() -> TestResult {
    const RETRIES: usize = 10;
    let rig = Rig::start().await?;
    let (requests, state) =
        rig.client.call_tool(tools::ASK, json!({})).caps(form_only()).send().await?.input_required()?;
    let answers = answer_all(&requests);
    let retries: Vec<_> = (0..RETRIES)
        .map(|_| {
            let (client, state, answers) = (rig.client.clone(), state.clone(), answers.clone());
            tokio::spawn(async move {
                client
                    .call_tool(tools::ASK, json!({}))
                    .caps(form_only())
                    .state(&state)
                    .responses(answers)
                    .send()
                    .await
            })
        })
        .collect();
    for retry in retries {
        let reply = bounded("a concurrent retry", retry)
            .await?
            .map_err(|e| HarnessError::Unexpected(format!("a retry task failed: {e}")))??;
        assert_eq!(reply.text()?, format!("Hello, {NAME}"));
    }
    let stats = rig.upstream.stats();
    assert_eq!(stats.answers(), RETRIES as u64, "each retry replayed the answer once");
    // Each concurrent retry leased a session of its own, at most one per retry, all returned.
    let sessions = rig.pool_size().await?;
    assert!((2.0..=(RETRIES + 1) as f64).contains(&sessions), "{sessions} sessions");
    assert_eq!(stats.deletes(), 0);
    rig.assert_at_rest().await?;
    rig.expect_ok("s1").await?;
    rig.stop().await
}
