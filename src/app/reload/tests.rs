//! The reload task against real files: new content swaps the ring whole, bad content is refused
//! once and the ring in use stays, and a Kubernetes-style symlink swap is noticed by polling.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::*;
use crate::config::StateConfig;
use crate::defaults;

/// Bounds every wait: a broken watcher fails the test instead of hanging it.
const BOUND: Duration = Duration::from_secs(20);

fn key(label: &str, byte: u8) -> String {
    format!("{label}:{}", STANDARD.encode([byte; 32]))
}

fn state(file: &Path) -> StateConfig {
    StateConfig {
        keys: Vec::new(),
        ttl: defaults::STATE_TTL,
        clock_skew: defaults::CLOCK_SKEW,
        max_token_bytes: defaults::MAX_TOKEN_BYTES,
        single_use: None,
        redis_url: None,
        key_file: Some(file.to_path_buf()),
        key_file_poll: Duration::from_millis(10),
    }
}

/// A watcher of `file` with its ring loaded, and the ring it swaps.
fn watcher(file: &Path, poll: Duration) -> (Watcher, Arc<LiveRing>, Arc<Metrics>) {
    let source = KeySource::new(&state(file));
    let (ring, digest) = source.initial().unwrap();
    let live = Arc::new(LiveRing::new(ring));
    let metrics = Arc::new(Metrics::new().unwrap());
    let w = Watcher::new(source, live.clone(), metrics.clone(), poll, digest).unwrap();
    (w, live, metrics)
}

fn labels(live: &LiveRing) -> Vec<String> {
    ids(&live.current())
}

fn reloads(metrics: &Metrics, result: &str) -> u64 {
    metrics.key_reloads.with_label_values(&[result]).get()
}

fn write(dir: &Path, keys: &[String]) -> PathBuf {
    let path = dir.join("keys");
    std::fs::write(&path, keys.join("\n") + "\n").unwrap();
    path
}

#[tokio::test]
async fn new_content_swaps_the_ring_and_running_requests_keep_theirs() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), &[key("a", 1)]);
    let (mut w, live, metrics) = watcher(&path, Duration::from_secs(3600));
    let before = live.current();
    write(dir.path(), &[key("b", 2), key("a", 1)]);
    let ReloadOutcome::Applied { key_ids } = w.reload(Trigger::Request).await else { panic!("not applied") };
    assert_eq!(key_ids, labels(&live));
    assert_eq!(key_ids.len(), 2);
    assert_eq!(key_ids[1], ids(&before)[0], "the old sealing key is now the secondary");
    assert_eq!(before.len(), 1, "a request holding the old ring keeps it whole");
    assert_eq!((reloads(&metrics, "applied"), metrics.state_keys.get()), (1, 2));
    assert_eq!(w.reload(Trigger::Request).await, ReloadOutcome::Unchanged);
    assert_eq!(reloads(&metrics, "unchanged"), 1);
}

#[tokio::test]
async fn bad_content_is_refused_once_and_the_ring_in_use_stays() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), &[key("a", 1)]);
    let (mut w, live, metrics) = watcher(&path, Duration::from_secs(3600));
    let good = labels(&live);
    let bad: [&[String]; 3] = [&[], &["not base64!".into()], &[key("x", 1), key("x", 2)]];
    for (n, keys) in bad.iter().enumerate() {
        write(dir.path(), keys);
        let outcome = w.reload(Trigger::Poll).await;
        assert!(matches!(outcome, ReloadOutcome::Refused(_)), "{keys:?}: {outcome:?}");
        assert_eq!(w.reload(Trigger::Poll).await, ReloadOutcome::Unchanged, "logged once per content");
        assert_eq!((labels(&live), reloads(&metrics, "refused")), (good.clone(), n as u64 + 1));
    }
    // Asked for explicitly, the same bad content gets its answer again.
    assert!(matches!(w.reload(Trigger::Request).await, ReloadOutcome::Refused(_)));
    std::fs::remove_file(&path).unwrap();
    let ReloadOutcome::Refused(reason) = w.reload(Trigger::Poll).await else { panic!("missing file") };
    assert!(reason.contains("reading"), "{reason}");
    assert_eq!(labels(&live), good);
    write(dir.path(), &[key("c", 3)]);
    assert!(matches!(w.reload(Trigger::Poll).await, ReloadOutcome::Applied { .. }));
    assert_ne!(labels(&live), good);
}

#[tokio::test]
async fn refusals_never_show_a_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), &[key("a", 1)]);
    let (mut w, _live, _metrics) = watcher(&path, Duration::from_secs(3600));
    let short = STANDARD.encode([9u8; 20]);
    write(dir.path(), &[key("b", 2), short.clone()]);
    let ReloadOutcome::Refused(reason) = w.reload(Trigger::Request).await else { panic!("accepted") };
    assert!(reason.contains("line 2") && !reason.contains(&short), "{reason}");
}

/// A Secret volume: `keys` links to `..data/keys`, and `..data` is swapped to a new directory
/// by renaming a fresh link over it, as the kubelet does.
#[cfg(unix)]
fn secret_volume(root: &Path, generation: u32, keys: &[String]) {
    let data = root.join(format!("..gen{generation}"));
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("keys"), keys.join("\n")).unwrap();
    let tmp = root.join("..data_tmp");
    std::os::unix::fs::symlink(&data, &tmp).unwrap();
    std::fs::rename(&tmp, root.join("..data")).unwrap();
    if generation == 0 {
        std::os::unix::fs::symlink(root.join("..data").join("keys"), root.join("keys")).unwrap();
    }
}

#[cfg(unix)]
#[tokio::test]
async fn polling_sees_a_secret_volume_swap_and_the_handle_reloads_at_once() {
    let dir = tempfile::tempdir().unwrap();
    secret_volume(dir.path(), 0, &[key("a", 1)]);
    let (w, live, metrics) = watcher(&dir.path().join("keys"), Duration::from_millis(10));
    let (stop, stopped) = watch::channel(false);
    let mut tasks = JoinSet::new();
    let handle = w.spawn(&mut tasks, crate::app::signal(stopped));
    secret_volume(dir.path(), 1, &[key("b", 2), key("a", 1)]);
    let swapped = async {
        while live.current().len() != 2 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(BOUND, swapped).await.expect("the poll to pick up the swap");
    assert_eq!(reloads(&metrics, "applied"), 1);
    secret_volume(dir.path(), 2, &[key("b", 2)]);
    let outcome = tokio::time::timeout(BOUND, handle.reload()).await.unwrap();
    // The poll may have got there first; either way the retired key is gone.
    assert!(matches!(outcome, ReloadOutcome::Applied { .. } | ReloadOutcome::Unchanged), "{outcome:?}");
    assert_eq!(live.current().len(), 1);
    stop.send(true).unwrap();
    while tasks.join_next().await.is_some() {}
    assert_eq!(handle.reload().await, ReloadOutcome::Stopped);
    assert_eq!(ReloadHandle::none().reload().await, ReloadOutcome::NoKeyFile);
}
