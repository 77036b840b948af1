//! Two gateway processes that share only a key file: a chain started on one finishes on the
//! other, which is what lets replicas sit behind any load balancer.

use serde_json::json;

use super::form_only;
use crate::common::answers::NAME;
use crate::common::client::Call;
use crate::common::harness::test_key;
use crate::common::process::GatewayProcess;
use crate::common::{answer_all, Harness, TestResult};

fn call(process: &GatewayProcess) -> Call<'_> {
    process.client.call_tool("confirm_twice", json!({})).caps(form_only())
}

#[tokio::test]
async fn two_processes_sharing_a_key_file_continue_each_others_rounds() -> TestResult {
    let h = Harness::start().await?;
    let dir = tempfile::tempdir()?;
    let key_file = dir.path().join("state-keys");
    std::fs::write(&key_file, format!("# shared by every replica\n{}\n", test_key("shared", 0x5a)))?;
    let a = GatewayProcess::spawn(&h.demo.url(), &key_file).await?;
    let b = GatewayProcess::spawn(&h.demo.url(), &key_file).await?;

    let (q1, s1) = call(&a).send().await?.input_required()?;
    let (q2, s2) = call(&b).state(&s1).responses(answer_all(&q1)).send().await?.input_required()?;
    let done = call(&a).state(&s2).responses(answer_all(&q2)).send().await?;
    assert_eq!(done.text()?, format!("Confirmed {NAME}: true"));
    assert_eq!(h.demo.stats.tool_calls("confirm_twice"), 3);
    drop((a, b));
    h.stop().await
}
