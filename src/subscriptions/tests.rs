//! The listen bridge against the embedded demo as its legacy server: the bounds on listeners
//! and sessions and what each listener gives back when it goes, the one `resources/subscribe`
//! per URI a hub sends for all its listeners, and the URIs a principal may not read.

use std::future::Future;
use std::time::Duration;

use serde_json::json;

use super::*;
use crate::auth::Policy;
use crate::config::RuleConfig;
use crate::demo::{spawn_loopback, DemoHandle, DemoOptions};
use crate::upstream::UpstreamSettings;

const COUNTER: &str = "demo://counter";

fn config(max_listeners: usize, max_per_principal: usize, max_sessions: usize) -> SubscriptionsConfig {
    SubscriptionsConfig {
        enabled: true,
        max_listeners,
        max_per_principal,
        max_uris: 4,
        share_with_calls: false,
        max_sessions,
    }
}

fn bridge(url: &str, cfg: SubscriptionsConfig) -> Subscriptions {
    let pool = Pool::new(UpstreamSettings::new(url.parse().unwrap())).unwrap();
    Subscriptions::new(Arc::new(pool), cfg, ListenMetrics::detached().unwrap())
}

fn key(principal: &str) -> PoolKey {
    (Arc::from(principal), 0)
}

/// Waits until `done` holds, at most 5 s.
async fn eventually(what: &str, done: impl FnMut() -> bool) {
    crate::clock::eventually(what, Duration::from_secs(5), done).await
}

async fn within<T>(f: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(5), f).await.expect("within 5 s")
}

/// Longest a hub may take to notice its session lost: the health check runs every
/// `LISTEN_HEALTH_CHECK` (5 s), after a failed reconnection of the session's GET stream.
const LOSS_WAIT: Duration = Duration::from_secs(30);

#[tokio::test]
async fn the_bounds_refuse_by_name_and_each_listener_gives_its_place_back() {
    // Never contacted: no listener here opens a session.
    let subs = bridge("http://127.0.0.1:9/mcp", config(3, 2, 2));
    let a1 = subs.reserve(&key("a")).unwrap();
    let a2 = subs.reserve(&key("a")).unwrap();
    assert!(matches!(subs.reserve(&key("a")), Err(ListenError::PerPrincipal { limit: 2 })));
    let b1 = subs.reserve(&key("b")).unwrap();
    assert_eq!(subs.listeners(), 3);
    assert!(matches!(subs.reserve(&key("c")), Err(ListenError::Total { limit: 3 })));
    {
        let reg = subs.state.lock();
        assert_eq!((reg.total, reg.sessions, reg.per_principal[&key("a").0]), (3, 2, 2));
        assert_eq!(*reg.hubs[&key("a")].listeners.lock(), 2);
    }

    drop(a1);
    assert_eq!(subs.listeners(), 2);
    assert_eq!(subs.state.lock().per_principal[&key("a").0], 1);
    // Two keys hold the two sessions allowed: a third key is refused for that bound alone.
    assert!(matches!(subs.reserve(&key("c")), Err(ListenError::Sessions { limit: 2 })));
    let a3 = subs.reserve(&key("a")).unwrap();
    assert_eq!(subs.state.lock().sessions, 2, "a key with an entry needs no second session");

    drop((a2, a3));
    {
        let reg = subs.state.lock();
        assert_eq!((reg.total, reg.sessions), (1, 1));
        assert!(!reg.per_principal.contains_key(&key("a").0), "a principal with none left is forgotten");
        assert!(!reg.hubs.contains_key(&key("a")), "an entry with no listener is forgotten");
    }
    let c1 = subs.reserve(&key("c")).unwrap();
    drop((b1, c1));
    assert_eq!(subs.sessions(), 0);
    let reg = subs.state.lock();
    assert_eq!((reg.total, reg.sessions, reg.per_principal.len(), reg.hubs.len()), (0, 0, 0, 0));
}

#[tokio::test]
async fn a_stopping_bridge_takes_no_listener_and_counts_the_refusal() {
    let subs = bridge("http://127.0.0.1:9/mcp", config(3, 2, 2));
    subs.stop();
    let params = json!({"notifications": {"toolsListChanged": true}});
    let all = Grants::unrestricted();
    let refused = subs.listen(listen_request(1, "a", &params, &all)).await;
    assert!(matches!(refused, Err(ListenError::ShuttingDown)));
    assert_eq!(subs.metrics.refused.with_label_values(&["shutting_down"]).get(), 1);
    assert_eq!(subs.listeners(), 0);
}

#[test]
fn each_refusal_is_counted_under_the_label_the_metrics_reference_names() {
    for (e, label) in [
        (ListenError::Invalid("x".into()), "invalid"),
        (ListenError::TooManyUris { limit: 1 }, "too_many_uris"),
        (ListenError::PerPrincipal { limit: 1 }, "per_principal"),
        (ListenError::Total { limit: 1 }, "total"),
        (ListenError::Sessions { limit: 1 }, "sessions"),
        (ListenError::ShuttingDown, "shutting_down"),
        (ListenError::Upstream(crate::upstream::UpstreamError::StreamEnded), "upstream"),
    ] {
        assert_eq!(e.label(), label);
    }
}

fn listen_request<'a>(id: i64, principal: &str, params: &'a Value, grants: &'a Grants) -> ListenRequest<'a> {
    static CAPS: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    ListenRequest {
        id: RequestId::Number(id),
        key: key(principal),
        capabilities: CAPS.get_or_init(|| json!({})),
        params: Some(params),
        grants,
    }
}

/// The next frame of a listen stream (the acknowledgement first), as JSON.
async fn frame(body: &mut mpsc::Receiver<Bytes>) -> Value {
    let frame = within(body.recv()).await.expect("a frame");
    let text = std::str::from_utf8(&frame).unwrap();
    let data = text.lines().find_map(|l| l.strip_prefix("data: ")).expect("an SSE data line");
    serde_json::from_str(data).unwrap()
}

/// The hub `principal`'s listeners share.
fn hub_of(subs: &Subscriptions, principal: &str) -> Arc<hub::Hub> {
    subs.state.lock().hubs[&key(principal)].hub.get().cloned().expect("the key's hub")
}

/// One listener of principal "a" to `params`, past its acknowledgement, with its key's hub.
async fn listener_and_hub(subs: &Subscriptions, params: Value) -> (Listening, Arc<hub::Hub>) {
    let all = Grants::unrestricted();
    let mut listening = within(subs.listen(listen_request(1, "a", &params, &all))).await.unwrap();
    frame(&mut listening.body).await;
    let hub = hub_of(subs, "a");
    (listening, hub)
}

async fn demo() -> DemoHandle {
    spawn_loopback(DemoOptions::default()).unwrap()
}

#[tokio::test]
async fn listeners_of_one_key_share_its_session_and_each_uri_is_subscribed_once() {
    let demo = demo().await;
    let subs = bridge(&demo.url(), config(8, 8, 8));
    let params = json!({"notifications": {"resourceSubscriptions": [COUNTER]}});
    let all = Grants::unrestricted();
    let mut first = within(subs.listen(listen_request(1, "a", &params, &all))).await.unwrap();
    let ack = frame(&mut first.body).await;
    assert_eq!(ack["params"]["notifications"]["resourceSubscriptions"], json!([COUNTER]), "{ack}");
    let mut second = within(subs.listen(listen_request(2, "a", &params, &all))).await.unwrap();
    frame(&mut second.body).await;
    let hub = hub_of(&subs, "a");
    assert_eq!((subs.listeners(), subs.sessions()), (2, 1));
    assert_eq!((demo.stats.subscribes(), demo.stats.initializes()), (1, 1));
    assert_eq!(subs.metrics.listeners.get(), 2);

    drop(first.body);
    assert_eq!(within(first.ended).await.unwrap(), Ended::ClientClosed);
    eventually("the first listener's place given back", || subs.listeners() == 1).await;
    assert_eq!(hub.listener_count(), 1, "the first listener left the hub");
    eventually("the URI counted once less", || hub.holders(COUNTER) == Some(1)).await;
    assert_eq!(demo.stats.unsubscribes(), 0, "the second listener still holds the URI");
    assert_eq!(subs.sessions(), 1);

    drop(second.body);
    assert_eq!(within(second.ended).await.unwrap(), Ended::ClientClosed);
    eventually("the URI unsubscribed after its last listener", || demo.stats.unsubscribes() == 1).await;
    eventually("the session closed", || subs.state.lock().sessions == 0).await;
    assert_eq!((subs.listeners(), subs.sessions(), subs.metrics.listeners.get()), (0, 0, 0));
    assert_eq!(subs.metrics.sessions.get(), 0);
    assert!(!hub.is_alive(), "a closed hub takes no listener, though its server is up");
}

#[tokio::test]
async fn a_uri_the_principal_may_not_read_is_not_subscribed() {
    let demo = demo().await;
    let subs = bridge(&demo.url(), config(8, 8, 8));
    let rule = RuleConfig {
        methods: vec!["resources/read".into()],
        resources: vec!["demo://docs/*".into()],
        ..RuleConfig::default()
    };
    let policy = Policy::compile_anonymous(&[rule]).unwrap();
    let grants = policy.grants(&serde_json::Map::new());
    let params = json!({"notifications": {"resourceSubscriptions": [COUNTER]}});
    let mut listening = within(subs.listen(listen_request(1, "a", &params, &grants))).await.unwrap();
    let ack = frame(&mut listening.body).await;
    assert_eq!(ack["params"]["notifications"], json!({}), "none honoured: {ack}");
    assert_eq!(demo.stats.subscribes(), 0);
}

#[tokio::test]
async fn shutdown_ends_every_stream_with_the_graceful_response() {
    let demo = demo().await;
    let subs = bridge(&demo.url(), config(8, 8, 8));
    let params = json!({"notifications": {"toolsListChanged": true, "resourcesListChanged": true}});
    let all = Grants::unrestricted();
    let mut listening = within(subs.listen(listen_request(7, "a", &params, &all))).await.unwrap();
    let ack = frame(&mut listening.body).await;
    // The demo offers resource list changes only.
    assert_eq!(ack["params"]["notifications"], json!({"resourcesListChanged": true}), "{ack}");
    subs.stop();
    assert_eq!(within(listening.ended).await.unwrap(), Ended::Shutdown);
    let closing = frame(&mut listening.body).await;
    assert_eq!(closing["id"], 7, "{closing}");
    within(subs.close_sessions()).await;
    eventually("the session closed", || subs.metrics.sessions.get() == 0).await;
}

#[tokio::test]
async fn a_resource_update_reaches_only_the_listeners_of_its_uri() {
    let demo = demo().await;
    let subs = bridge(&demo.url(), config(8, 8, 8));
    let all = Grants::unrestricted();
    let counter = json!({"notifications": {"resourceSubscriptions": [COUNTER]}});
    let tools = json!({"notifications": {"toolsListChanged": true}});
    let mut subscribed = within(subs.listen(listen_request(1, "a", &counter, &all))).await.unwrap();
    let mut other = within(subs.listen(listen_request(2, "a", &tools, &all))).await.unwrap();
    frame(&mut subscribed.body).await;
    frame(&mut other.body).await;
    // Another principal's session bumps the counter; the server tells every session subscribed.
    let caller = within(subs.pool.lease(key("b"), &json!({}))).await.unwrap();
    let bump =
        caller.session().request(methods::TOOLS_CALL, Some(json!({"name": "bump_counter", "arguments": {}})));
    assert!(matches!(within(bump).await.unwrap(), crate::protocol::jsonrpc::Outcome::Result(_)));
    let update = frame(&mut subscribed.body).await;
    assert_eq!(update["method"], methods::RESOURCES_UPDATED, "{update}");
    assert_eq!(update["params"]["uri"], COUNTER, "{update}");
    assert_eq!(update["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 1, "{update}");
    // One notification is written to every listener that wants it at once: had the other
    // wanted it, it would be queued by now.
    assert!(other.body.try_recv().is_err(), "a listener that did not subscribe hears nothing");
    assert_eq!(subs.metrics.delivered.with_label_values(&[methods::RESOURCES_UPDATED]).get(), 1);
}

#[tokio::test]
async fn a_lost_upstream_ends_its_streams_without_the_graceful_response() {
    // The demo forgets a session idle for a second: the listening one (it only listens) too.
    let options = DemoOptions { session_idle_timeout: Duration::from_secs(1), ..DemoOptions::default() };
    let demo = spawn_loopback(options).unwrap();
    let subs = bridge(&demo.url(), config(8, 8, 8));
    let (mut listening, hub) =
        listener_and_hub(&subs, json!({"notifications": {"toolsListChanged": true}})).await;
    assert!(hub.is_alive());
    let ended = tokio::time::timeout(LOSS_WAIT, listening.ended).await.expect("the loss noticed");
    assert_eq!(ended.unwrap(), Ended::Dropped);
    assert!(within(listening.body.recv()).await.is_none(), "no closing response: the client listens again");
    assert_eq!(subs.metrics.ended.with_label_values(&["upstream_lost"]).get(), 1);
    assert!(!hub.is_alive());
    eventually("the lost session given back", || subs.state.lock().sessions == 0).await;
}

#[tokio::test]
async fn a_shared_listen_session_serves_its_keys_calls_and_ends_after_its_last_listener() {
    let demo = demo().await;
    let subs = bridge(&demo.url(), SubscriptionsConfig { share_with_calls: true, ..config(8, 8, 8) });
    let params = json!({"notifications": {"toolsListChanged": true}});
    let all = Grants::unrestricted();
    let mut listening = within(subs.listen(listen_request(1, "a", &params, &all))).await.unwrap();
    frame(&mut listening.body).await;
    {
        let lease = within(subs.pool.lease(key("a"), &json!({}))).await.unwrap();
        let echo = lease
            .session()
            .request(methods::TOOLS_CALL, Some(json!({"name": "echo", "arguments": {"message": "hi"}})));
        assert!(matches!(within(echo).await.unwrap(), crate::protocol::jsonrpc::Outcome::Result(_)));
    }
    assert_eq!(demo.stats.initializes(), 1, "the key's call ran on the listen session");
    drop(listening.body);
    assert_eq!(within(listening.ended).await.unwrap(), Ended::ClientClosed);
    eventually("the listen session ended upstream", || demo.stats.deletes() == 1).await;
}

#[tokio::test]
async fn closing_the_sessions_ends_them_upstream_before_it_returns() {
    let demo = demo().await;
    let subs = bridge(&demo.url(), config(8, 8, 8));
    let params = json!({"notifications": {"toolsListChanged": true}});
    let all = Grants::unrestricted();
    let mut listening = within(subs.listen(listen_request(1, "a", &params, &all))).await.unwrap();
    frame(&mut listening.body).await;
    within(subs.close_sessions()).await;
    assert_eq!(demo.stats.deletes(), 1, "the session was ended upstream");
    assert_eq!(subs.sessions(), 0);
    assert_eq!(within(listening.ended).await.unwrap(), Ended::Dropped);
}

#[tokio::test]
async fn a_server_without_resource_subscriptions_is_never_asked_for_one() {
    let options = DemoOptions { resource_subscriptions: false, ..DemoOptions::default() };
    let demo = spawn_loopback(options).unwrap();
    let subs = bridge(&demo.url(), config(8, 8, 8));
    let params = json!({"notifications": {"resourceSubscriptions": [COUNTER], "resourcesListChanged": true}});
    let all = Grants::unrestricted();
    let mut listening = within(subs.listen(listen_request(1, "a", &params, &all))).await.unwrap();
    let ack = frame(&mut listening.body).await;
    assert_eq!(ack["params"]["notifications"], json!({"resourcesListChanged": true}), "{ack}");
    let hub = hub_of(&subs, "a");
    assert!(hub.hold(&[COUNTER.to_owned()]).await.is_empty());
    assert_eq!((demo.stats.subscribes(), demo.stats.refused_subscribes()), (0, 0), "nothing sent upstream");
}

#[tokio::test]
async fn the_keepalive_pings_the_listen_session_upstream() {
    let demo = demo().await;
    let subs = bridge(&demo.url(), config(8, 8, 8));
    let (_listening, hub) =
        listener_and_hub(&subs, json!({"notifications": {"toolsListChanged": true}})).await;
    assert_eq!(demo.stats.pings(), 0);
    within(hub.ping()).await;
    assert_eq!(demo.stats.pings(), 1);
}

#[tokio::test]
async fn a_hub_whose_notifications_failed_takes_no_listener_though_its_session_answers() {
    let demo = demo().await;
    let subs = bridge(&demo.url(), config(8, 8, 8));
    let (listening, hub) =
        listener_and_hub(&subs, json!({"notifications": {"toolsListChanged": true}})).await;
    assert!(hub.is_alive());
    // No await between these: on this single-threaded runtime, nothing closes the session
    // before the checks.
    hub.lose_notifications();
    assert!(hub.session_is_healthy(), "the session itself still answers");
    assert!(!hub.is_alive(), "a new listener needs a new hub");
    assert_eq!(within(listening.ended).await.unwrap(), Ended::Dropped);
}
