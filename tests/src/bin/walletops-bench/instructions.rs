//! Instructions per send and per cached read: a service run under valgrind's callgrind
//! (performance counters are not exposed on every machine, and instructions, unlike seconds,
//! repeat from run to run on a noisy one). Its counters are zeroed after a warm-up, `n` REST
//! sends are made and mined, and the count of every instruction the service executed
//! meanwhile (its threads, the monitor's share included) is divided by `n`; then the same for
//! `n` cached `GET /api/v1/wallets/balances` reads.

use std::{path::Path, process::Stdio};

use anyhow::{Context, ensure};
use tokio::process::Command;
use walletops_tests::{Rest, anvil::Anvil, first_api_key, launch_logging_to, walletops_bin};

use crate::{
    ETH,
    drive::{all_ok, drive},
    load::installed,
    sends::Sender,
};

/// Untimed sends before the counters are zeroed, at the run's concurrency: a long-running
/// service has every pooled connection open and its statements prepared, which ten sends
/// one at a time left to the measured ones.
const WARMUP: u64 = 100;

/// The newest callgrind dump in `dir`, and its total.
fn dumped_total(dir: &Path) -> anyhow::Result<(std::path::PathBuf, u64)> {
    let newest = std::fs::read_dir(dir)?
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("callgrind.out.")
        })
        .max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok())
        .context("no callgrind dump")?;
    let text = std::fs::read_to_string(newest.path())?;
    let total = text
        .lines()
        .find_map(|l| l.strip_prefix("totals:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .context("no totals in the callgrind dump")?;
    Ok((newest.path(), total))
}

/// Runs `callgrind_control` with `args` on process `pid`.
async fn control(pid: u32, args: &[&str]) -> anyhow::Result<()> {
    let done = Command::new("callgrind_control")
        .args(args)
        .arg(pid.to_string())
        .stdout(Stdio::null())
        .status()
        .await?;
    ensure!(done.success(), "callgrind_control {args:?} failed");
    Ok(())
}

/// Instructions the service executes per REST send on SQLite, and per cached balance read
/// over REST, over `n` of each at `concurrency` on `anvil`; the profiles are copied to `keep`
/// (the sends') and `keep` with `.reads` added (read them with
/// `callgrind_annotate --inclusive=yes`).
pub(crate) async fn per_send_and_read(
    anvil: &Anvil,
    n: u64,
    concurrency: usize,
    keep: Option<&Path>,
) -> anyhow::Result<(f64, f64)> {
    let valgrind = installed("valgrind", "valgrind").await?;
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("walletops.toml");
    std::fs::write(
        &config,
        format!(
            "{}\n[rate_limits]\nwrites_per_minute = 1000000\nreads_per_minute = 1000000\n[monitor]\nstuck_after_secs = 60\n",
            anvil.chain_toml()
        ),
    )?;
    let data = dir.path().join("data");
    let mut cmd = Command::new(valgrind);
    cmd.arg("--tool=callgrind")
        .arg(format!(
            "--callgrind-out-file={}/callgrind.out.%p",
            dir.path().display()
        ))
        .arg(walletops_bin()?)
        .args(["serve", "--config"])
        .arg(&config)
        .env("WALLETOPS_DATA_DIR", &data)
        .env("WALLETOPS_HTTP_ADDR", "127.0.0.1:0")
        .env("WALLETOPS_GRPC_ADDR", "127.0.0.1:0")
        .env("RUST_LOG", "warn")
        .env_remove("DATABASE_URL")
        .env_remove("WALLETOPS_DATABASE_URL");
    let launched = launch_logging_to(
        cmd,
        &["REST listening on ", "gRPC listening on "],
        Stdio::null(),
    )
    .await?;
    let pid = launched.child.id().context("callgrind exited")?;
    let api = Rest::new(&launched.http()?, &first_api_key(&data)?);
    let wallet = anvil
        .fund_default_wallet(&api, alloy::primitives::U256::from(1000 * ETH))
        .await?;
    let reader = api.clone();
    let sender = Sender::Rest(api);
    let warm = sender.clone();
    let (_, results) = drive(WARMUP, concurrency, move |_| {
        let sender = warm.clone();
        async move { sender.send().await }
    })
    .await?;
    all_ok(results, "warm-up sends")?;
    anvil
        .wait_for_nonce("the warm-up sends to be mined", wallet, WARMUP)
        .await?;
    control(pid, &["-z"]).await?;
    let (_, results) = drive(n, concurrency, move |_| {
        let sender = sender.clone();
        async move { sender.send().await }
    })
    .await?;
    all_ok(results, "sends under callgrind")?;
    anvil
        .wait_for_nonce("the sends under callgrind to be mined", wallet, WARMUP + n)
        .await?;
    control(pid, &["-d"]).await?;
    let (dump, sends) = dumped_total(dir.path())?;
    keep_profile(&dump, keep, "")?;
    // The first read fills the balance cache; the measured ones find it there.
    read(&reader).await?;
    control(pid, &["-z"]).await?;
    let (_, results) = drive(n, concurrency, move |_| {
        let reader = reader.clone();
        async move { read(&reader).await }
    })
    .await?;
    all_ok(results, "reads under callgrind")?;
    control(pid, &["-d"]).await?;
    let (dump, reads) = dumped_total(dir.path())?;
    keep_profile(&dump, keep, ".reads")?;
    drop(launched);
    Ok((sends as f64 / n as f64, reads as f64 / n as f64))
}

/// One cached balance read, which must succeed.
async fn read(api: &Rest) -> anyhow::Result<()> {
    let reply = api.get("/wallets/balances?chain=anvil").await?;
    ensure!(reply.status == 200, "a balance read failed: {}", reply.text);
    Ok(())
}

/// Copies `dump` to `keep` with `suffix` added, when `keep` is given.
fn keep_profile(dump: &Path, keep: Option<&Path>, suffix: &str) -> anyhow::Result<()> {
    if let Some(keep) = keep {
        let mut to = keep.as_os_str().to_owned();
        to.push(suffix);
        std::fs::copy(dump, &to).with_context(|| format!("copying the profile to {to:?}"))?;
    }
    Ok(())
}
