//! Where the binaries the tests run are: the `walletops` under test and the tools the test
//! command installs.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The `walletops` binary: `WALLETOPS_BIN`, else the one beside this test binary. The test
/// command builds it first (`cargo build --workspace --bins`).
pub fn walletops_bin() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("WALLETOPS_BIN") {
        return Ok(PathBuf::from(path));
    }
    built_bin("walletops")
}

/// The workspace's binary `name`, beside this test binary (or this binary).
pub(crate) fn built_bin(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    // A bin runs from target/<profile>/, a test from target/<profile>/deps/.
    let beside = exe.parent().context("locating the target directory")?;
    let candidates = [Some(beside), beside.parent()];
    candidates
        .into_iter()
        .flatten()
        .map(|dir| dir.join(name))
        .find(|bin| bin.exists())
        .with_context(|| {
            format!(
                "no {name} binary beside {}: build it with `cargo build --workspace --bins` (scripts/test does)",
                exe.display()
            )
        })
}

/// The grpcurl the test command installs into `.venv`.
pub fn grpcurl_bin() -> anyhow::Result<PathBuf> {
    venv_bin("grpcurl")
}

/// The schemathesis the test command installs into `.venv`.
pub fn schemathesis_bin() -> anyhow::Result<PathBuf> {
    venv_bin("schemathesis")
}

/// The Python the test command installs into `.venv`, with the `standardwebhooks` library.
pub fn venv_python() -> anyhow::Result<PathBuf> {
    venv_bin("python")
}

fn venv_bin(name: &str) -> anyhow::Result<PathBuf> {
    let bin = workspace_root().join(".venv/bin").join(name);
    if !bin.exists() {
        bail!("{} is missing: scripts/test installs it", bin.display());
    }
    Ok(bin)
}
