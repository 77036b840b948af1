//! A session lent back to the pool by a long-lived holder (the listen bridge): its key's calls
//! get it first, one at a time; other keys never do; a poisoned call retires it from calls
//! without closing it; a withdrawal while a call has it leaves the close to that call's lease;
//! a call on a pooled session meanwhile taps its list changes into the lent session's queue.

use std::sync::Arc;

use serde_json::json;

use super::server::{event, sse_channel, Reply, TestServer};
use super::{caps, deletes, inits, on_call, result, server, settings};
use crate::upstream::{Pool, PoolKey, PoolStats, UpstreamEvent};

fn key(principal: &str) -> PoolKey {
    (Arc::from(principal), 0)
}

#[tokio::test]
async fn a_lent_session_serves_its_keys_calls_one_at_a_time() {
    let server = server().await;
    let pool = Pool::new(settings(&server)).unwrap();
    let held = pool.take_unpooled(&key("a"), &caps()).await.unwrap();
    let lending = pool.lend(&key("a"), held);
    assert_eq!(format!("{lending:?}"), r#"Lending { key: ("a", 0), .. }"#, "a lending shows its key only");
    let first = pool.lease(key("a"), &caps()).await.unwrap();
    assert_eq!(server.count(inits), 1, "the first call got the lent session");
    assert_eq!(format!("{first:?}"), r#"Lease { key: ("a", 0), .. }"#, "a lease shows its key only");
    assert_eq!(pool.stats(), PoolStats::default(), "a lent session is not the pool's");
    let second = pool.lease(key("a"), &caps()).await.unwrap();
    assert_eq!(server.count(inits), 2, "a second call at once gets a pooled session");
    let other = pool.lease(key("b"), &caps()).await.unwrap();
    assert_eq!(server.count(inits), 3, "another key never gets it");
    drop(first);
    let third = pool.lease(key("a"), &caps()).await.unwrap();
    assert_eq!(server.count(inits), 3, "given back, it serves the next call");
    assert_eq!(pool.stats().leased, 2);
    drop((second, other, third));
    assert_eq!(pool.stats(), PoolStats { idle: 2, leased: 0, starting: 0, warm: 0 });
}

#[tokio::test]
async fn a_poisoned_call_retires_the_lent_session_from_calls_without_closing_it() {
    let server = server().await;
    let pool = Pool::new(settings(&server)).unwrap();
    let held = pool.take_unpooled(&key("a"), &caps()).await.unwrap();
    let lending = pool.lend(&key("a"), held.clone());
    pool.lease(key("a"), &caps()).await.unwrap().poison();
    drop(pool.lease(key("a"), &caps()).await.unwrap());
    assert_eq!(server.count(inits), 2, "the next call got a pooled session");
    assert!(held.is_healthy());
    assert!(lending.withdraw(), "no call holds it: its holder closes it");
    assert_eq!(server.count(deletes), 0, "nobody closed the holder's session for it");
}

#[tokio::test]
async fn a_withdrawal_leaves_the_close_to_the_call_holding_the_session() {
    let mut server = server().await;
    let pool = Pool::new(settings(&server)).unwrap();
    let held = pool.take_unpooled(&key("a"), &caps()).await.unwrap();
    let lending = pool.lend(&key("a"), held);
    let call = pool.lease(key("a"), &caps()).await.unwrap();
    assert!(!lending.withdraw(), "a call holds it");
    drop(pool.lease(key("a"), &caps()).await.unwrap());
    assert_eq!(server.count(inits), 2, "withdrawn, it serves no new call");
    assert_eq!(server.count(deletes), 0, "the call still has it");
    drop(call);
    server.wait_for(deletes).await;
    assert_eq!(pool.stats().idle, 1, "only the pooled session went back to the pool");
}

#[tokio::test]
async fn dropping_the_lending_withdraws_the_session() {
    let server = server().await;
    let pool = Pool::new(settings(&server)).unwrap();
    let held = pool.take_unpooled(&key("a"), &caps()).await.unwrap();
    drop(pool.lend(&key("a"), held));
    drop(pool.lease(key("a"), &caps()).await.unwrap());
    assert_eq!(server.count(inits), 2);
}

/// A server whose every call says its tool list changed, on the call's own stream, then answers.
async fn list_changing_server() -> TestServer {
    TestServer::start(on_call(|seen| {
        let (tx, rx) = sse_channel();
        let changed = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
        tx.try_send(event(None, &changed)).unwrap();
        tx.try_send(event(None, &result(&seen.body["id"], json!({})))).unwrap();
        Reply::Sse(rx)
    }))
    .await
}

#[tokio::test]
async fn a_pooled_call_meanwhile_taps_its_list_changes_into_the_lent_session() {
    let server = list_changing_server().await;
    let pool = Pool::new(settings(&server)).unwrap();
    let held = pool.take_unpooled(&key("a"), &caps()).await.unwrap();
    let mut notes = held.listen(8);
    let lending = pool.lend(&key("a"), held);
    let lent = pool.lease(key("a"), &caps()).await.unwrap();
    let pooled = pool.lease(key("a"), &caps()).await.unwrap();
    pooled.request("tools/call", None).await.unwrap();
    let Ok(UpstreamEvent::Notification { method, .. }) = notes.try_recv().unwrap() else {
        panic!("the list change was not tapped")
    };
    assert_eq!(method, "notifications/tools/list_changed");
    // Each list change is routed before the response after it, so none can still be on its way.
    let other = pool.lease(key("b"), &caps()).await.unwrap();
    other.request("tools/call", None).await.unwrap();
    assert!(notes.try_recv().is_err(), "another key's call taps nothing");
    drop((pooled, lending));
    let after = pool.lease(key("a"), &caps()).await.unwrap();
    after.request("tools/call", None).await.unwrap();
    assert!(notes.try_recv().is_err(), "once withdrawn, nothing is tapped");
    drop((lent, other, after));
}

#[tokio::test]
async fn a_long_lived_holder_takes_an_idle_session_of_its_key_first() {
    let server = server().await;
    let pool = Pool::new(settings(&server)).unwrap();
    drop(pool.lease(key("a"), &caps()).await.unwrap());
    assert_eq!(pool.stats().idle, 1);
    let other = pool.take_unpooled(&key("b"), &caps()).await.unwrap();
    assert_eq!(server.count(inits), 2, "another key's idle session is never taken");
    let taken = pool.take_unpooled(&key("a"), &caps()).await.unwrap();
    assert_eq!(server.count(inits), 2, "the idle session, with no handshake of its own");
    assert_eq!(pool.stats(), PoolStats::default(), "taken out of the pool");
    drop((other, taken));
}

#[tokio::test]
async fn only_a_pooled_lease_winds_down_and_only_once() {
    let server = server().await;
    let pool = Pool::new(settings(&server)).unwrap();
    let held = pool.take_unpooled(&key("a"), &caps()).await.unwrap();
    let _lending = pool.lend(&key("a"), held);
    let mut lent = pool.lease(key("a"), &caps()).await.unwrap();
    lent.wind_down();
    assert_eq!(pool.winding(), 0, "a lent session is not the pool's: no call waits for it");
    let mut pooled = pool.lease(key("a"), &caps()).await.unwrap();
    pooled.wind_down();
    pooled.wind_down();
    assert_eq!(pool.winding(), 1, "one entry per lease");
    drop(pooled);
    assert_eq!(pool.winding(), 0, "released, it holds up nobody");
    drop(lent);
}
