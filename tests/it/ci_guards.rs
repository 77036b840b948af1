//! CI cannot pass by skipping: `.ci/run` fails a filtered test run that ran other than the
//! tests it names, refuses a narrowed conformance run, and stops at its time limit; the
//! interop suite says loudly that a run is narrowed; the deployment check fails, saying what to
//! install, when promtool is missing or not the pinned version. Each script runs for real,
//! with a `PATH` of chosen commands, and is seen to stop where it must.

use crate::common::fakebin::{text, FakeBin};
use crate::common::TestResult;

/// What `.ci/run` needs before its first step: itself again under `timeout`.
const CI_TOOLS: [&str; 6] = ["bash", "dirname", "timeout", "sed", "awk", "grep"];

/// A `cargo` whose every `cargo test` passes `$PASSED` tests, and whose other commands succeed.
const CARGO: &str = "if [ \"$1\" = test ]; then
  echo \"test result: ok. $PASSED passed; 0 failed; 0 ignored; 0 measured; 9 filtered out; finished in 0.01s\"
fi
exit 0";

#[tokio::test]
async fn ci_refuses_a_narrowed_conformance_run_before_any_step() -> TestResult {
    let bin = FakeBin::new()?.real(&CI_TOOLS)?.script("cargo", "echo cargo ran >&2; exit 1")?;
    for narrowed in ["input-required-result-basic", ""] {
        let out = bin.run(".ci/run", &[], &[("CONFORMANCE_SCENARIOS", narrowed)]).await?;
        assert_eq!(out.status.code(), Some(1));
        assert_eq!(
            text(&out.stderr),
            format!(
                "CI runs every conformance scenario: unset CONFORMANCE_SCENARIOS (set to '{narrowed}')\n"
            )
        );
        assert_eq!(text(&out.stdout), "", "no step ran");
    }
    Ok(())
}

#[tokio::test]
async fn ci_fails_a_filtered_test_run_that_ran_other_than_its_tests() -> TestResult {
    let bin = FakeBin::new()?.real(&CI_TOOLS)?.script("cargo", CARGO)?;
    let out = bin.run(".ci/run", &[], &[("PASSED", "0")]).await?;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "cargo test --test integration it::layering: 0 tests ran and passed, 2 expected\n"
    );
    // Two passing where one is named is a failure too: the count is exact.
    let out = bin.run(".ci/run", &[], &[("PASSED", "2")]).await?;
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stdout).contains("== layering"), "the layering step passed with its 2");
    assert_eq!(
        text(&out.stderr),
        "cargo test --lib --features fuzzing mrtr::codec::fuzzing: 2 tests ran and passed, 1 expected\n"
    );
    Ok(())
}

#[tokio::test]
async fn ci_stops_at_its_time_limit() -> TestResult {
    let bin = FakeBin::new()?.real(&CI_TOOLS)?.real(&["sleep"])?.script("cargo", "exec sleep 60")?;
    let started = std::time::Instant::now();
    // 0.02 minutes: 1.2 s.
    let out = bin.run(".ci/run", &[], &[("CI_MINUTES", "0.02")]).await?;
    assert_eq!(out.status.code(), Some(124));
    assert_eq!(text(&out.stderr), "CI stopped: the run took longer than its limit of 0.02 minutes\n");
    assert!(started.elapsed().as_secs() < 8, "the sleeping step was stopped, not waited for");
    Ok(())
}

#[tokio::test]
async fn a_narrowed_interop_run_says_so_loudly() -> TestResult {
    let bin = FakeBin::new()?.real(&["dirname"])?;
    let env = [("CONFORMANCE_SCENARIOS", "a,b")];
    let out = bin.run("tests/interop/run.sh", &[], &env).await?;
    assert_eq!(out.status.code(), Some(64), "no gateway named: usage");
    assert_eq!(
        text(&out.stderr),
        "!!! NARROWED RUN: CONFORMANCE_SCENARIOS=a,b\n\
         !!! The 2026-07-28 conformance runs check these scenarios only, not every required one;\n\
         !!! the count below is not the full suite's. CI (.ci/run) refuses a narrowed run.\n\
         usage: run.sh GATEWAY_BIN | run.sh --no-gateway\n"
    );
    let out = bin.run("tests/interop/run.sh", &[], &[]).await?;
    assert_eq!(
        text(&out.stderr),
        "usage: run.sh GATEWAY_BIN | run.sh --no-gateway\n",
        "not narrowed: no notice"
    );
    Ok(())
}

/// What `deploy/check/run.sh` needs before it checks for promtool, and an `id` saying `uid`.
fn deploy_tools(uid: u32) -> TestResult<FakeBin> {
    FakeBin::new()?
        .real(&["dirname", "sha256sum", "cut", "sed", "head"])?
        .script("id", &format!("echo {uid}"))
}

#[tokio::test]
async fn the_deployment_check_fails_without_the_pinned_promtool() -> TestResult {
    let bin = deploy_tools(1000)?.script("apt-get", "echo apt-get ran >&2; exit 1")?;
    let home = bin.dir().display().to_string();
    let env = [("HOME", home.as_str())];
    let out = bin.run("deploy/check/run.sh", &[], &env).await?;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "deploy: promtool is not installed, and the alert rules are checked with it (pinned: 2.42.0).\n\
         deploy: Install it as root, then run deploy/check/run.sh again:\n\
         deploy:     sudo apt-get install --no-install-recommends prometheus    (Debian 12 ships promtool 2.42.0)\n\
         deploy: This script does not run sudo itself.\n"
    );

    let bin = deploy_tools(1000)?.script("promtool", "echo 'promtool, version 2.53.1 (branch: HEAD)'")?;
    let out = bin.run("deploy/check/run.sh", &[], &env).await?;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).starts_with(
            "deploy: promtool 2.53.1 is installed; the rules check is pinned to 2.42.0.\n\
             deploy: Install that version"
        ),
        "{out:?}"
    );

    // As root with apt-get, it installs the package, saying so, and fails if that brought none.
    let logs = tempfile::tempdir()?;
    let log = logs.path().join("apt-get.log");
    let bin = deploy_tools(0)?.script("apt-get", &format!("echo \"$@\" >> {}", log.display()))?;
    let out = bin.run("deploy/check/run.sh", &[], &env).await?;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "deploy: promtool is missing: installing the Debian package prometheus with apt-get (running as root)\n\
         deploy: apt-get installed prometheus, yet there is no promtool on PATH\n"
    );
    assert_eq!(
        std::fs::read_to_string(&log)?,
        "update -qq\ninstall -y -qq --no-install-recommends prometheus\n"
    );
    Ok(())
}
