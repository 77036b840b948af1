//! The pool: reuse per key, the size bound, waiting, idle expiry, poisoning and eviction of
//! unhealthy sessions, and the cached `initialize` answer.

use std::sync::Arc;
use std::time::Duration;

use super::server::{Reply, Seen, TestServer};
use super::{caps, deletes, inits, server, settings};
use crate::upstream::{Pool, PoolKey, PoolStats, UpstreamError};

fn key(principal: &str, fingerprint: u8) -> PoolKey {
    (Arc::from(principal), fingerprint)
}

#[tokio::test]
async fn idle_session_of_the_same_key_is_reused() {
    let server = server().await;
    let pool = Pool::new(settings(&server)).unwrap();
    assert!(pool.initialize_result().is_none());
    drop(pool.lease(key("alice", 1), &caps()).await.unwrap());
    let lease = pool.lease(key("alice", 1), &caps()).await.unwrap();
    assert_eq!(server.count(inits), 1);
    assert_eq!(pool.stats(), PoolStats { idle: 0, leased: 1, starting: 0, warm: 0 });
    let other = pool.lease(key("bob", 1), &caps()).await.unwrap();
    let third = pool.lease(key("alice", 2), &caps()).await.unwrap();
    assert_eq!(server.count(inits), 3, "principal and fingerprint both key the pool");
    assert_eq!(pool.size(), 3, "leased sessions count in the pool's size");
    drop((lease, other, third));
    assert_eq!(pool.size(), 3, "and so do idle ones");
    let init = pool.initialize_result().unwrap();
    assert_eq!(init.server_info["name"], "scripted");
    assert_eq!(pool.close_idle().await, 3, "the idle sessions closed, as the shutdown log counts them");
    assert_eq!(server.count(deletes), 3);
}

#[tokio::test]
async fn full_pool_of_leased_sessions_waits_then_gives_up() {
    let server = server().await;
    let mut s = settings(&server);
    s.pool_max_sessions = 1;
    let pool = Pool::new(s).unwrap();
    let held = pool.lease(key("a", 0), &caps()).await.unwrap();
    let started = std::time::Instant::now();
    let err = pool.lease(key("b", 0), &caps()).await.unwrap_err();
    assert!(matches!(err, UpstreamError::PoolExhausted(_)));
    assert!(started.elapsed() >= Duration::from_millis(250));
    assert_eq!(pool.size(), 1, "the pool never grows past its bound");
    drop(held);
}

/// A lease of `key` taken (and dropped) in a task of its own.
fn spawn_lease(pool: &Pool, key: PoolKey) -> tokio::task::JoinHandle<Result<(), UpstreamError>> {
    let pool = pool.clone();
    tokio::spawn(async move { pool.lease(key, &caps()).await.map(drop) })
}

/// Yields to the runtime until `ready` holds; panics after a bounded number of turns.
async fn until(what: &str, ready: impl Fn() -> bool) {
    for _ in 0..10_000 {
        if ready() {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("{what} never happened");
}

#[tokio::test]
async fn a_call_of_the_key_waits_for_a_winding_down_session_instead_of_opening_one() {
    let server = server().await;
    let pool = Pool::new(settings(&server)).unwrap();
    let mut winding = pool.lease(key("a", 0), &caps()).await.unwrap();
    winding.wind_down();
    // Another key is not held up by it.
    drop(pool.lease(key("b", 0), &caps()).await.unwrap());
    assert_eq!(server.count(inits), 2);
    let waiter = spawn_lease(&pool, key("a", 0));
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    assert!(!waiter.is_finished(), "the waiter waits for the winding-down session");
    drop(winding);
    waiter.await.unwrap().unwrap();
    assert_eq!(server.count(inits), 2, "the waiter got the wound-down session, no new one");
    assert_eq!(pool.stats(), PoolStats { idle: 2, leased: 0, starting: 0, warm: 0 });
}

#[tokio::test]
async fn a_retired_winding_down_session_lets_its_waiter_open_another() {
    let server = server().await;
    let pool = Pool::new(settings(&server)).unwrap();
    let mut winding = pool.lease(key("a", 0), &caps()).await.unwrap();
    winding.wind_down();
    let waiter = spawn_lease(&pool, key("a", 0));
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    winding.poison();
    waiter.await.unwrap().unwrap();
    assert_eq!(server.count(inits), 2, "the retired session was replaced once");
    assert_eq!(pool.stats().idle, 1);
}

#[tokio::test]
async fn waiter_gets_the_session_released_meanwhile() {
    let server = server().await;
    let mut s = settings(&server);
    s.pool_max_sessions = 1;
    // Not the thing under test: the waiter must not give up while the test is descheduled.
    s.pool_acquire_timeout = Duration::from_secs(30);
    let pool = Pool::new(s).unwrap();
    let held = pool.lease(key("a", 0), &caps()).await.unwrap();
    let waiter = spawn_lease(&pool, key("a", 0));
    until("the waiter queued behind the held lease", || pool.queued() == 1).await;
    assert!(!waiter.is_finished(), "a full pool must make the waiter wait");
    drop(held);
    waiter.await.unwrap().unwrap();
    assert_eq!(server.count(inits), 1, "the waiter got the released session");
    assert_eq!(pool.queued(), 0);
}

#[tokio::test]
async fn full_pool_evicts_the_least_recently_used_idle_session() {
    let mut server = server().await;
    let mut s = settings(&server);
    s.pool_max_sessions = 2;
    let pool = Pool::new(s).unwrap();
    drop(pool.lease(key("a", 0), &caps()).await.unwrap());
    drop(pool.lease(key("b", 0), &caps()).await.unwrap());
    // Using `a` again makes `b` the least recently used, although `a` was opened first.
    drop(pool.lease(key("a", 0), &caps()).await.unwrap());
    assert_eq!((server.count(inits), server.count(deletes)), (2, 0));
    let _c = pool.lease(key("c", 0), &caps()).await.unwrap();
    server.wait_for(deletes).await;
    assert_eq!(pool.stats(), PoolStats { idle: 1, leased: 1, starting: 0, warm: 0 });
    // `a` survived: leasing it opens nothing new.
    drop(pool.lease(key("a", 0), &caps()).await.unwrap());
    assert_eq!((server.count(inits), server.count(deletes)), (3, 1), "`b` was the one evicted");
}

#[tokio::test]
async fn idle_sessions_expire_and_are_deleted() {
    let mut server = server().await;
    let mut s = settings(&server);
    s.pool_idle_timeout = Duration::from_millis(100);
    let pool = Pool::new(s).unwrap();
    drop(pool.lease(key("a", 0), &caps()).await.unwrap());
    assert_eq!(pool.stats().idle, 1);
    server.wait_for(deletes).await;
    assert_eq!(pool.size(), 0);
}

#[tokio::test]
async fn poisoned_lease_is_deleted_and_replaced() {
    let mut server = server().await;
    let pool = Pool::new(settings(&server)).unwrap();
    pool.lease(key("a", 0), &caps()).await.unwrap().poison();
    server.wait_for(deletes).await;
    assert_eq!(pool.size(), 0);
    drop(pool.lease(key("a", 0), &caps()).await.unwrap());
    assert_eq!(server.count(inits), 2);
}

#[tokio::test]
async fn lease_dropped_after_a_session_error_is_not_reused() {
    let mut server = server().await;
    let pool = Pool::new(settings(&server)).unwrap();
    let lease = pool.lease(key("a", 0), &caps()).await.unwrap();
    let err = lease.request("tools/call", None).await.unwrap_err();
    assert!(matches!(err, UpstreamError::SessionExpired));
    drop(lease);
    server.wait_for(deletes).await;
    assert_eq!(pool.size(), 0);
}

#[tokio::test]
async fn failed_initialize_frees_its_reservation() {
    let server =
        TestServer::start(std::sync::Arc::new(|seen: &Seen| inits(seen).then_some(Reply::Status(500)))).await;
    let mut s = settings(&server);
    s.pool_max_sessions = 1;
    let pool = Pool::new(s).unwrap();
    for _ in 0..2 {
        let err = pool.lease(key("a", 0), &caps()).await.unwrap_err();
        assert!(matches!(err, UpstreamError::Http { .. }), "{err}");
    }
    assert_eq!(pool.size(), 0);
}

#[tokio::test]
async fn discover_opens_a_session_once_then_uses_the_cached_answer() {
    let server = server().await;
    let pool = Pool::new(settings(&server)).unwrap();
    let first = pool.discover(key("a", 0), &caps()).await.unwrap();
    let second = pool.discover(key("b", 0), &caps()).await.unwrap();
    assert!(Arc::ptr_eq(&first, &second));
    assert_eq!(first.protocol_version, "2025-11-25");
    assert_eq!(server.count(inits), 1);
    assert_eq!(pool.stats().idle, 1, "the session went back to the pool");
}
