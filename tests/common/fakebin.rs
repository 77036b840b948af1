//! A `PATH` of chosen commands for running the project's shell scripts (`tests/run.sh`,
//! `.ci/run`, `deploy/check/run.sh`, the interop suite) in a test: real system tools by name,
//! and stand-ins (an `id` that says who runs, an `apt-get` that records what it was asked, a
//! `cargo` that prints a chosen result). A command left out is missing, as on a machine
//! without it, so a script is seen to stop before it needs it.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use tokio::process::Command;

use super::{bounded, HarnessError, TestResult};

/// A folder of commands, removed on drop.
pub(crate) struct FakeBin {
    dir: tempfile::TempDir,
}

// === impl FakeBin ===

impl FakeBin {
    pub(crate) fn new() -> TestResult<Self> {
        let dir = tempfile::tempdir()?;
        std::fs::create_dir(dir.path().join("bin"))?;
        Ok(Self { dir })
    }

    /// The folder the stand-ins may write to (outside `PATH`).
    pub(crate) fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The system's own `names`, found under `/usr/bin` or `/bin`.
    pub(crate) fn real(self, names: &[&str]) -> TestResult<Self> {
        for name in names {
            let found = ["/usr/bin", "/bin"].iter().map(|d| Path::new(d).join(name)).find(|p| p.exists());
            let path = found.ok_or_else(|| HarnessError::Unexpected(format!("no {name} on this machine")))?;
            std::os::unix::fs::symlink(path, self.bin(name))?;
        }
        Ok(self)
    }

    /// A stand-in `name` running the `sh` script `body`.
    pub(crate) fn script(self, name: &str, body: &str) -> TestResult<Self> {
        let path = self.bin(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n"))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
        Ok(self)
    }

    fn bin(&self, name: &str) -> PathBuf {
        self.dir.path().join("bin").join(name)
    }

    /// Runs `bash SCRIPT ARGS` (SCRIPT relative to the repository) with this folder as its
    /// whole `PATH` and no other environment than `env`, within the suite's bound.
    pub(crate) async fn run(&self, script: &str, args: &[&str], env: &[(&str, &str)]) -> TestResult<Output> {
        let child = Command::new("/bin/bash")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join(script))
            .args(args)
            .env_clear()
            .env("PATH", self.dir.path().join("bin"))
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        Ok(bounded(script, child.wait_with_output()).await??)
    }
}

/// Output bytes as text.
pub(crate) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
