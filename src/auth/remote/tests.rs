//! The refresh rate limit and single flight, against a key source that never answers (a
//! closed loopback port): what matters here is when fetches begin, not what they return.

use super::*;
use crate::config::KeySource;

fn remote(min_refresh: Duration) -> Arc<Remote> {
    let settings = RemoteKeys {
        source: KeySource::Jwks("http://127.0.0.1:9/jwks".parse().unwrap()),
        refresh: Duration::from_secs(300),
        min_refresh,
        max_stale: Duration::from_secs(60),
        timeout: Duration::from_secs(1),
        wait: Duration::from_secs(30),
        ca_file: None,
    };
    let gauge = prometheus::IntGauge::new("jwks", "open").unwrap();
    let bound = crate::outbound::Bound::new(4, 1, settings.timeout, gauge);
    let fetcher = Fetcher::new(settings.source.clone(), settings.timeout, None, &bound).unwrap();
    Remote::new(fetcher, settings, AuthMetrics::detached().unwrap())
}

#[tokio::test(start_paused = true)]
async fn one_fetch_at_a_time_and_at_most_one_per_min_refresh() {
    let r = remote(Duration::from_secs(30));
    assert_eq!(r.begin(true), Begun::Started);
    assert_eq!(r.begin(true), Begun::InFlight, "a second request joins the running fetch");
    assert_eq!(r.begin(false), Begun::InFlight, "the background refresh too");
    r.refresh.lock().in_flight = false;
    assert_eq!(r.begin(true), Begun::RateLimited);
    tokio::time::advance(Duration::from_secs(31)).await;
    assert_eq!(r.begin(true), Begun::Started);
}

#[tokio::test(start_paused = true)]
async fn the_background_refresh_is_not_rate_limited_by_requests() {
    let r = remote(Duration::from_secs(30));
    assert_eq!(r.begin(true), Begun::Started);
    r.refresh.lock().in_flight = false;
    assert_eq!(r.begin(false), Begun::Started);
}

#[tokio::test]
async fn a_failed_fetch_wakes_its_waiters_and_leaves_no_keys() {
    let r = remote(Duration::from_secs(30));
    let asked = Instant::now();
    r.refresh_for_unknown_kid().await;
    // The waiter returned because the fetch ended (failed), not because its 30 s wait ran
    // out, and not because of a hung flag.
    assert!(asked.elapsed() < Duration::from_secs(10), "{:?}", asked.elapsed());
    assert!(!r.refresh.lock().in_flight);
    assert!(!r.is_loaded());
    assert_eq!(r.metrics.key_fetches.with_label_values(&["connect"]).get(), 1);
}

#[tokio::test(start_paused = true)]
async fn keys_older_than_max_stale_are_dropped() {
    let r = remote(Duration::from_secs(30));
    let key =
        Key { kid: Some("k".into()), key: jsonwebtoken::DecodingKey::from_secret(b"s"), algorithms: vec![] };
    *r.cache.write() = Some(Cached { keys: vec![key].into(), fetched: Instant::now() });
    assert!(r.is_loaded());
    // Served for at most `max_stale` (60 s): still at exactly 60 s, no longer a moment after.
    tokio::time::advance(Duration::from_secs(60)).await;
    assert!(r.is_loaded(), "at exactly max_stale the keys are still served");
    tokio::time::advance(Duration::from_millis(1)).await;
    assert!(!r.is_loaded());
}

#[tokio::test]
async fn a_fetch_now_runs_unless_one_is_already_running() {
    let r = remote(Duration::from_secs(30));
    let fetches = || r.metrics.key_fetches.with_label_values(&["connect"]).get();
    r.fetch_now().await;
    assert_eq!(fetches(), 1);
    r.refresh.lock().in_flight = true;
    r.fetch_now().await;
    assert_eq!(fetches(), 1, "the running fetch is not doubled");
}

#[test]
fn the_next_refresh_is_sooner_while_no_keys_are_held() {
    let r = remote(Duration::from_secs(30));
    assert_eq!(r.next_refresh(), Duration::from_secs(30));
    let key = Key { kid: None, key: jsonwebtoken::DecodingKey::from_secret(b"s"), algorithms: vec![] };
    *r.cache.write() = Some(Cached { keys: vec![key].into(), fetched: Instant::now() });
    assert_eq!(r.next_refresh(), Duration::from_secs(300));
}

/// The background refresh fetches on its own, and stops when its handle is dropped (the
/// authenticator's), even while something else still holds the key cache.
#[tokio::test]
async fn the_background_refresh_runs_until_its_handle_is_dropped() {
    let r = remote(Duration::from_millis(20));
    let fetches = || r.metrics.key_fetches.with_label_values(&["connect"]).get();
    let background = r.spawn_background();
    let deadline = Instant::now() + Duration::from_secs(20);
    while fetches() < 2 {
        assert!(Instant::now() < deadline, "no background fetch");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    drop(background);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let stopped = fetches();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(fetches(), stopped);
}
