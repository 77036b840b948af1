//! Restarts: a conversation outlives the gateway process that started it, because every round's
//! continuation is in the client's `requestState` and the keys come from a file. A rolling
//! restart of two replicas under load loses no conversation: the replica being replaced is
//! taken out of rotation, then sent SIGTERM, and drains what it was already serving.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use serde_json::json;
use tokio::task::JoinSet;

use super::form_only;
use crate::common::answers::NAME;
use crate::common::client::Call;
use crate::common::harness::test_key;
use crate::common::process::GatewayProcess;
use crate::common::{answer_all, bounded, Client, Harness, HarnessError, TestResult};

/// Conversations (three calls each) run through the rolling restart.
const CONVERSATIONS: usize = 48;
/// Conversations in flight at once.
const CONCURRENCY: usize = 8;
/// Pause between a conversation's rounds, so rounds straddle the restarts.
const THINK_TIME: Duration = Duration::from_millis(15);

fn confirm(client: &Client) -> Call<'_> {
    client.call_tool("confirm_twice", json!({})).caps(form_only())
}

fn key_file(dir: &Path) -> TestResult<PathBuf> {
    let path = dir.join("state-keys");
    std::fs::write(&path, format!("{}\n", test_key("shared", 0x6b)))?;
    Ok(path)
}

#[tokio::test]
async fn a_conversation_started_before_a_restart_completes_after_it() -> TestResult {
    let h = Harness::start().await?;
    let dir = tempfile::tempdir()?;
    let keys = key_file(dir.path())?;
    let before = GatewayProcess::spawn(&h.demo.url(), &keys).await?;
    let (q1, s1) = confirm(&before.client).send().await?.input_required()?;
    before.terminate().await?;

    let after = GatewayProcess::spawn(&h.demo.url(), &keys).await?;
    let (q2, s2) =
        confirm(&after.client).state(&s1).responses(answer_all(&q1)).send().await?.input_required()?;
    let done = confirm(&after.client).state(&s2).responses(answer_all(&q2)).send().await?;
    assert_eq!(done.text()?, format!("Confirmed {NAME}: true"));
    drop(after);
    h.stop().await
}

/// The load balancer of the test: the replicas in rotation, picked round robin.
#[derive(Default)]
struct Rotation {
    replicas: RwLock<Vec<(usize, Client)>>,
    next: AtomicUsize,
    /// Rounds whose state was sealed by a replica other than the one that took the retry.
    crossed: AtomicUsize,
}

impl Rotation {
    fn pick(&self) -> (usize, Client) {
        let replicas = self.replicas.read();
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        replicas[n % replicas.len()].clone()
    }

    fn set(&self, slot: usize, client: Option<Client>) {
        let mut replicas = self.replicas.write();
        replicas.retain(|(s, _)| *s != slot);
        replicas.extend(client.map(|c| (slot, c)));
    }
}

/// One three-call conversation, each call on whichever replica the rotation gives.
async fn conversation(rotation: Arc<Rotation>) -> TestResult {
    let (first, client) = rotation.pick();
    let (q1, s1) = confirm(&client).send().await?.input_required()?;
    tokio::time::sleep(THINK_TIME).await;
    let (second, client) = rotation.pick();
    let (q2, s2) = confirm(&client).state(&s1).responses(answer_all(&q1)).send().await?.input_required()?;
    tokio::time::sleep(THINK_TIME).await;
    let (third, client) = rotation.pick();
    let done = confirm(&client).state(&s2).responses(answer_all(&q2)).send().await?;
    let crossed = usize::from(first != second) + usize::from(second != third);
    rotation.crossed.fetch_add(crossed, Ordering::Relaxed);
    match done.text()? {
        text if text == format!("Confirmed {NAME}: true") => Ok(()),
        other => Err(HarnessError::Unexpected(format!("conversation ended with {other:?}"))),
    }
}

#[tokio::test]
async fn a_rolling_restart_of_two_replicas_under_load_loses_no_conversation() -> TestResult {
    let h = Harness::start().await?;
    let dir = tempfile::tempdir()?;
    let keys = key_file(dir.path())?;
    let mut replicas = vec![
        GatewayProcess::spawn(&h.demo.url(), &keys).await?,
        GatewayProcess::spawn(&h.demo.url(), &keys).await?,
    ];
    let rotation = Arc::new(Rotation::default());
    for (slot, replica) in replicas.iter().enumerate() {
        rotation.set(slot, Some(replica.client.clone()));
    }

    let done = Arc::new(AtomicUsize::new(0));
    let mut load = JoinSet::new();
    for worker in 0..CONCURRENCY {
        let (rotation, done) = (rotation.clone(), done.clone());
        load.spawn(async move {
            for _ in (worker..CONVERSATIONS).step_by(CONCURRENCY) {
                conversation(rotation.clone()).await?;
                done.fetch_add(1, Ordering::Relaxed);
            }
            TestResult::Ok(())
        });
    }

    // Replace each replica in turn while the conversations run.
    for (slot, replica) in replicas.iter_mut().enumerate() {
        tokio::time::sleep(THINK_TIME * 4).await;
        rotation.set(slot, None);
        let fresh = GatewayProcess::spawn(&h.demo.url(), &keys).await?;
        rotation.set(slot, Some(fresh.client.clone()));
        std::mem::replace(replica, fresh).terminate().await?;
    }

    bounded("the conversations to finish", async {
        while let Some(joined) = load.join_next().await {
            joined.map_err(|e| HarnessError::Unexpected(format!("load task: {e}")))??;
        }
        TestResult::Ok(())
    })
    .await??;
    assert_eq!(done.load(Ordering::Relaxed), CONVERSATIONS);
    assert!(rotation.crossed.load(Ordering::Relaxed) > 0, "some rounds continued on the other replica");
    drop(replicas);
    h.stop().await
}
