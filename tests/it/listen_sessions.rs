//! A principal's calls run on its listen session whenever no other call has it
//! (`subscriptions.share_with_calls`), so a server that tells a session only of that session's
//! own changes tells the listen streams of what the principal's calls changed. The scripted
//! upstream's `touch` is such a server: it notifies only the session it ran on.

use mrtr_gateway::app::Gateway;
use serde_json::{json, Value};

use super::chatty_upstream::Chatty;
use super::subscriptions::Events;
use crate::common::harness::metric;
use crate::common::{eventually, Client, Setup, TestResult};

const URI: &str = "chatty://page";
const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
const HUBS: &str = "mrtr_gateway_listen_upstream_sessions";

/// A gateway set up as `setup` in front of a new scripted upstream, and its client.
async fn start(setup: Setup) -> TestResult<(Chatty, Gateway, Client)> {
    let upstream = Chatty::spawn(false).await?;
    let (gateway, client) = setup.attach_url(&upstream.url()).await?;
    Ok((upstream, gateway, client))
}

/// Opens a listen stream on [`URI`] as request `id` and reads its acknowledgement.
async fn listen(client: &Client, id: i64) -> TestResult<Events> {
    let mut events = Events::open(client, id, json!({"resourceSubscriptions": [URI]})).await?;
    let ack = events.message().await?;
    assert_eq!(ack["params"]["notifications"], json!({"resourceSubscriptions": [URI]}), "{ack}");
    Ok(events)
}

/// Calls `touch`; returns its text, after checking that the update did not leak into the reply.
async fn touch(client: &Client) -> TestResult<String> {
    let reply = client.call_tool("touch", json!({})).send().await?;
    let leaked = reply.events.iter().any(|e| e.get("method").and_then(Value::as_str).is_some());
    assert!(!leaked, "a call's reply carries no listen notification: {:?}", reply.events);
    reply.text()
}

#[tokio::test]
async fn a_call_runs_on_the_listen_session_and_its_change_reaches_the_stream() -> TestResult {
    let (upstream, gateway, client) = start(Setup::new()).await?;
    let mut events = listen(&client, 7).await?;
    let listening = upstream.seen.subscribers(URI);
    assert_eq!(listening.len(), 1, "one upstream session subscribed");
    for round in 1..=2 {
        assert_eq!(touch(&client).await?, "touched 1", "round {round}: the call saw the subscription");
        let update = events.message().await?;
        assert_eq!(update["method"], "notifications/resources/updated", "{update}");
        assert_eq!(update["params"], json!({"uri": URI, "_meta": {SUBSCRIPTION_ID: 7}}));
    }
    assert_eq!(upstream.seen.sessions_of("touch"), [listening[0].clone(), listening[0].clone()]);
    drop(events);
    gateway.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn after_the_last_listener_calls_go_back_to_the_pool() -> TestResult {
    let (upstream, gateway, client) = start(Setup::new()).await?;
    let events = listen(&client, 1).await?;
    let listening = upstream.seen.subscribers(URI);
    assert_eq!(touch(&client).await?, "touched 1");
    drop(events);
    eventually("the listen session to be closed", || metric(&gateway, HUBS) == 0.0).await?;
    assert!(upstream.seen.subscribers(URI).is_empty(), "the last listener unsubscribed");
    assert_eq!(touch(&client).await?, "touched 0");
    let sessions = upstream.seen.sessions_of("touch");
    assert_eq!(sessions[0], listening[0]);
    assert_ne!(sessions[1], listening[0], "a withdrawn listen session serves no call");
    gateway.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn with_sharing_off_calls_stay_on_the_pool() -> TestResult {
    let (upstream, gateway, client) =
        start(Setup::new().set("subscriptions", "share_with_calls = false")).await?;
    let events = listen(&client, 1).await?;
    let listening = upstream.seen.subscribers(URI);
    // The change happens on another session, which this server tells nobody of.
    assert_eq!(touch(&client).await?, "touched 0");
    assert_ne!(upstream.seen.sessions_of("touch"), listening);
    drop(events);
    gateway.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn listen_sessions_are_bounded_with_a_clear_error() -> TestResult {
    let (_upstream, gateway, client) = start(Setup::new().set("subscriptions", "max_sessions = 1")).await?;
    let first = listen(&client, 1).await?;
    // The same key shares the session it holds; another capability set is another key.
    let second = listen(&client, 2).await?;
    let other_key = json!({"elicitation": {"form": {}}});
    let as_other_key = || {
        let filter = json!({"resourceSubscriptions": [URI]});
        client.request("subscriptions/listen").caps(other_key.clone()).param("notifications", filter)
    };
    let refused = as_other_key().send().await?;
    let message = refused.expect_error(http::StatusCode::SERVICE_UNAVAILABLE, -32603)?;
    assert!(message.contains("no upstream session is free") && message.contains("limit is 1"), "{message}");
    let series = "mrtr_gateway_listen_refused_total{reason=\"sessions\"}";
    assert_eq!(metric(&gateway, series), 1.0);
    drop((first, second));
    eventually("the listen session to be closed", || metric(&gateway, HUBS) == 0.0).await?;
    let again = as_other_key().open().await?;
    assert_eq!(again.status(), http::StatusCode::OK, "the session was given back");
    drop(again);
    gateway.shutdown().await;
    Ok(())
}
