//! Per-principal shares of the bounds every client shares, through a running gateway with JWT
//! clients: one principal at its share of legacy sessions, of upstream sessions (leases) or of
//! parked calls is refused (or, for a parked call, replayed) with a message naming the share,
//! counted in `share_refusals_total`, while a second principal is still served.

use http::StatusCode;
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpStream;

use super::form_only;
use super::legacy_rules::{token, with_jwt};
use crate::common::legacy_client::LegacyClient;
use crate::common::{answer_all, eventually, Client, Harness, Setup, TestResult};

fn refusals(h: &Harness, share: &str) -> f64 {
    h.metric(&format!(r#"mrtr_gateway_share_refusals_total{{share="{share}"}}"#))
}

fn initialize_body(client: &LegacyClient) -> Value {
    client.request_body(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "share-test", "version": "1"}}),
    )
}

#[tokio::test]
async fn a_principal_at_its_share_of_legacy_sessions_is_refused_and_another_is_served() -> TestResult {
    let setup = with_jwt(Setup::new())
        .set("legacy", "max_sessions = 4")
        .set("legacy", "max_sessions_per_principal = 2");
    let h = setup.start().await?;
    let (alice, bob) = (token("alice", "")?, token("bob", "")?);
    let url = h.gateway.url("/mcp");
    for _ in 0..2 {
        LegacyClient::new(url.clone()).with_bearer(&alice).initialize(json!({})).await?;
    }
    let third = LegacyClient::new(url.clone()).with_bearer(&alice);
    let refused = third.post(&initialize_body(&third)).await?;
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE, "{:?}", refused.messages);
    let message = refused.messages[0]["error"]["message"].as_str().unwrap_or_default();
    assert_eq!(message, "this client holds its share of legacy sessions on this gateway (2); end one first");
    assert_eq!(refusals(&h, "legacy_sessions"), 1.0);
    assert_eq!(h.metric(r#"mrtr_gateway_legacy_refused_requests_total{reason="principal_share"}"#), 1.0);
    // Another principal still opens sessions: the total has room left.
    let mut other = LegacyClient::new(url).with_bearer(&bob);
    other.initialize(json!({})).await?;
    let echoed = other.call_tool("echo", json!({"message": "bob"})).await?;
    assert_eq!(echoed.pointer("/result/content/0/text"), Some(&json!("Echo: bob")), "{echoed}");
    h.stop().await
}

fn order(client: &Client) -> crate::common::client::Call<'_> {
    client.call_tool("place_order", json!({})).caps(form_only())
}

/// Writes a `hang` call of `client` on a raw connection and keeps it open.
async fn hanging_call(h: &Harness, client: &Client) -> TestResult<TcpStream> {
    let bytes = client.call_tool("hang", json!({})).http1_bytes()?;
    let mut tcp = TcpStream::connect(h.gateway.front_addr).await?;
    tcp.write_all(&bytes).await?;
    Ok(tcp)
}

#[tokio::test]
async fn a_principal_at_its_share_of_upstream_sessions_is_refused_and_another_is_served() -> TestResult {
    let setup = with_jwt(Setup::new())
        .set("upstream", "pool_max_sessions = 8")
        .set("upstream", "pool_max_per_principal = 2");
    let h = setup.start().await?;
    let alice = h.client.with_bearer(&token("alice", "")?);
    let bob = h.client.with_bearer(&token("bob", "")?);
    let held = [hanging_call(&h, &alice).await?, hanging_call(&h, &alice).await?];
    let stats = h.demo.stats.clone();
    eventually("both calls to hold a session", || stats.tool_calls("hang") == 2).await?;
    // A third call, even declaring other capabilities (another pool key), is refused at once.
    let refused = alice.call_tool("echo", json!({"message": "m"})).caps(form_only()).send().await?;
    let message = refused.expect_error(StatusCode::SERVICE_UNAVAILABLE, -32603)?;
    assert_eq!(message, "gateway overloaded: this client holds its share of upstream sessions (2)");
    assert_eq!(refusals(&h, "upstream_leases"), 1.0);
    assert_eq!(h.metric(r#"mrtr_gateway_upstream_rejections_total{reason="principal_share"}"#), 1.0);
    assert_eq!(stats.tool_calls("echo"), 0, "a refused call never reaches the upstream");
    let served = bob.call_tool("echo", json!({"message": "bob"})).send().await?;
    assert_eq!(served.text()?, "Echo: bob");
    drop(held);
    // Once its calls end, the principal is served again.
    crate::common::bounded("alice to be served again", async {
        loop {
            let reply = alice.call_tool("echo", json!({"message": "again"})).send().await?;
            if reply.status == StatusCode::OK {
                return reply.text().map(drop);
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await??;
    h.stop().await
}

#[tokio::test]
async fn a_principal_at_its_share_of_parked_calls_is_replayed_and_another_is_parked() -> TestResult {
    let setup =
        with_jwt(Setup::new()).set("mrtr", "mode = \"park\"").set("mrtr", "max_parked_per_principal = 1");
    let h = setup.start().await?;
    let alice = h.client.with_bearer(&token("alice", "")?);
    let bob = h.client.with_bearer(&token("bob", "")?);
    let outcome =
        |label: &str| h.metric(&format!(r#"mrtr_gateway_park_outcomes_total{{outcome="{label}"}}"#));
    let (q1, s1) = order(&alice).send().await?.input_required()?;
    assert_eq!(outcome("parked"), 1.0);
    // Alice's second call is not parked: its round is replayed, and she still gets her question.
    let (q2, s2) = order(&alice).send().await?.input_required()?;
    assert_eq!((outcome("parked"), outcome("share")), (1.0, 1.0));
    assert_eq!(refusals(&h, "parked_calls"), 1.0);
    // Bob's call parks.
    order(&bob).send().await?.input_required()?;
    assert_eq!(outcome("parked"), 2.0);
    assert_eq!(h.metric("mrtr_gateway_parked_calls"), 2.0);
    // Alice's replayed call completes by replay.
    let done = order(&alice).state(&s2).responses(answer_all(&q2)).send().await?;
    assert!(done.text()?.contains("placed"), "{}", done.text()?);
    // Her parked call, answered, gives her place back: her next call parks again.
    let done = order(&alice).state(&s1).responses(answer_all(&q1)).send().await?;
    assert!(done.text()?.contains("placed"), "{}", done.text()?);
    assert_eq!(outcome("resumed"), 1.0);
    order(&alice).send().await?.input_required()?;
    assert_eq!((outcome("parked"), outcome("share")), (3.0, 1.0));
    h.stop().await
}
