//! The limiters on a fake clock: bursts, refills, per-tool buckets, the check order and the
//! sweep of quiet principals.

use std::num::NonZeroU32;

use governor::clock::FakeRelativeClock;

use super::*;

fn rate(per_sec: f64, burst: u32) -> Rate {
    Rate { period: Duration::from_secs_f64(1.0 / per_sec), burst: NonZeroU32::new(burst).unwrap() }
}

fn limits(cfg: LimitsConfig) -> (Limits<FakeRelativeClock>, FakeRelativeClock) {
    let clock = FakeRelativeClock::default();
    (Limits::with_clock(&cfg, clock.clone()), clock)
}

fn p(name: &str) -> Arc<str> {
    Arc::from(name)
}

#[test]
fn off_by_default_takes_nothing() {
    let (l, _) = limits(LimitsConfig::default());
    assert!(l.is_off());
    for _ in 0..10_000 {
        l.check(&p("a"), Some("t")).unwrap();
    }
    assert_eq!(l.keys(), 0);
}

#[test]
fn principal_burst_then_refused_until_a_token_refills() {
    let (l, clock) = limits(LimitsConfig { principal: Some(rate(0.5, 2)), tools: vec![] });
    l.check(&p("a"), None).unwrap();
    l.check(&p("a"), None).unwrap();
    let e = l.check(&p("a"), None).unwrap_err();
    assert_eq!(e.limit, Limit::Principal);
    assert_eq!(e.retry_after, Duration::from_secs(2));
    assert_eq!(e.retry_after_secs(), 2);
    // Another principal has its own bucket.
    l.check(&p("b"), None).unwrap();
    clock.advance(Duration::from_millis(1500));
    let e = l.check(&p("a"), None).unwrap_err();
    assert_eq!(e.retry_after, Duration::from_millis(500));
    assert_eq!(e.retry_after_secs(), 1, "rounded up");
    clock.advance(Duration::from_millis(500));
    l.check(&p("a"), None).unwrap();
}

#[test]
fn tool_limits_apply_to_their_tool_only() {
    let (l, _) = limits(LimitsConfig { principal: None, tools: vec![("slow".into(), rate(1.0, 1))] });
    l.check(&p("a"), Some("slow")).unwrap();
    let e = l.check(&p("a"), Some("slow")).unwrap_err();
    assert_eq!(e.limit, Limit::Tool(Arc::from("slow")));
    assert_eq!(e.limit.label(), "tool:slow");
    assert_eq!(e.to_string(), r#"rate limit exceeded: tool "slow""#);
    l.check(&p("a"), Some("fast")).unwrap();
    l.check(&p("a"), None).unwrap();
    l.check(&p("b"), Some("slow")).unwrap();
}

#[test]
fn the_principal_limit_is_checked_before_the_tool_limit() {
    let cfg = LimitsConfig { principal: Some(rate(1.0, 1)), tools: vec![("t".into(), rate(1.0, 1))] };
    let (l, _) = limits(cfg);
    l.check(&p("a"), Some("t")).unwrap();
    assert_eq!(l.check(&p("a"), Some("t")).unwrap_err().limit, Limit::Principal);
}

#[test]
fn quiet_principals_are_swept_and_busy_ones_kept() {
    let (l, clock) = limits(LimitsConfig { principal: Some(rate(1.0, 2)), tools: vec![] });
    for i in 0..500 {
        l.check(&p(&format!("quiet-{i}")), None).unwrap();
    }
    l.check(&p("busy"), None).unwrap();
    clock.advance(Duration::from_secs(5));
    l.check(&p("busy"), None).unwrap();
    l.check(&p("busy"), None).unwrap();
    assert_eq!(l.keys(), 501);
    l.sweep();
    assert_eq!(l.keys(), 1, "only the principal whose bucket is not full again stays");
    assert!(l.check(&p("busy"), None).is_err(), "sweeping kept its state");
}

#[test]
fn the_request_path_sweeps_every_so_often() {
    let (l, clock) = limits(LimitsConfig { principal: Some(rate(1000.0, 1000)), tools: vec![] });
    let n = defaults::LIMIT_SWEEP_EVERY - 1;
    for i in 0..n {
        l.check(&p(&format!("p-{i}")), None).unwrap();
    }
    assert_eq!(l.keys() as u64, n);
    clock.advance(Duration::from_secs(10));
    l.check(&p("last"), None).unwrap();
    assert_eq!(
        l.keys(),
        1,
        "the sweep on the {}th check dropped every quiet key",
        defaults::LIMIT_SWEEP_EVERY
    );
}
