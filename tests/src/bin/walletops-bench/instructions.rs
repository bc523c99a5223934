//! Instructions per send and per cached read: a service run under valgrind's callgrind
//! (performance counters are not exposed on every machine, and instructions, unlike seconds,
//! repeat from run to run on a noisy one). Its counters are zeroed after a warm-up, `n` REST
//! sends are made, mined and confirmed by the monitor, and the count of every instruction the
//! service executed meanwhile (its threads, the monitor's share included) is divided by `n`;
//! then the same for `n` cached `GET /api/v1/wallets/balances` reads, which no record's
//! settling then falls into.

use std::{path::Path, process::Stdio};

use alloy::primitives::Address;
use anyhow::{Context, ensure};
use tokio::process::Command;
use walletops_tests::{
    OPEN_RECORDS, Rest, anvil::Anvil, first_api_key, gateway::Gateway, launch_logging_to,
    poll_until_within,
};

use crate::{
    ETH,
    drive::{all_ok, drive},
    load::installed,
    sends::Sender,
};

/// Untimed sends before the counters are zeroed, at the run's concurrency: a long-running
/// service has every pooled connection open and its statements prepared, which ten sends
/// one at a time left to the measured ones.
pub(crate) const WARMUP: u64 = 100;

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

/// A service of one binary on SQLite, reaching the node through a gateway that counts its
/// requests, its default wallet funded and `WARMUP` sends made and mined.
pub(crate) struct Served {
    launched: walletops_tests::Launched,
    pub(crate) api: Rest,
    pub(crate) wallet: Address,
    pub(crate) gateway: Gateway,
    dir: tempfile::TempDir,
}

impl Served {
    /// Starts `bin` (under `valgrind`'s callgrind when given, its dumps in its data folder's
    /// parent) on `anvil` and warms it up at `concurrency`.
    pub(crate) async fn start(
        anvil: &Anvil,
        bin: &Path,
        valgrind: Option<&Path>,
        concurrency: usize,
    ) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let gateway = Gateway::start(anvil.url()).await?;
        let config = dir.path().join("walletops.toml");
        std::fs::write(
            &config,
            format!(
                "{}\n[rate_limits]\nwrites_per_minute = 1000000\nreads_per_minute = 1000000\n[monitor]\nstuck_after_secs = 60\n",
                anvil.chain_toml().replace(anvil.url(), gateway.url())
            ),
        )?;
        let mut cmd = match valgrind {
            Some(valgrind) => {
                let mut cmd = Command::new(valgrind);
                cmd.arg("--tool=callgrind")
                    .arg(format!(
                        "--callgrind-out-file={}/callgrind.out.%p",
                        dir.path().display()
                    ))
                    .arg(bin);
                cmd
            }
            None => Command::new(bin),
        };
        cmd.args(["serve", "--config"])
            .arg(&config)
            .env("WALLETOPS_DATA_DIR", dir.path().join("data"))
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
        let api = Rest::new(&launched.http()?, &first_api_key(&dir.path().join("data"))?);
        let wallet = anvil
            .fund_default_wallet(&api, alloy::primitives::U256::from(1000 * ETH))
            .await?;
        let served = Self {
            launched,
            api,
            wallet,
            gateway,
            dir,
        };
        served.sends(anvil, 0, WARMUP, concurrency).await?;
        Ok(served)
    }

    /// The service's process id.
    pub(crate) fn pid(&self) -> anyhow::Result<u32> {
        self.launched.child.id().context("the service exited")
    }

    /// `n` REST sends at `concurrency` after `before` of the wallet's, mined and every record
    /// final.
    pub(crate) async fn sends(
        &self,
        anvil: &Anvil,
        before: u64,
        n: u64,
        concurrency: usize,
    ) -> anyhow::Result<()> {
        let sender = Sender::Rest(self.api.clone());
        let (_, results) = drive(n, concurrency, move |_| {
            let sender = sender.clone();
            async move { sender.send().await }
        })
        .await?;
        all_ok(results, "sends")?;
        anvil
            .wait_for_nonce("the sends to be mined", self.wallet, before + n)
            .await?;
        self.settled().await
    }

    /// Waits until the monitor has taken every record to a final state, reading the
    /// service's database from this process (which the service's counters do not see).
    async fn settled(&self) -> anyhow::Result<()> {
        use sea_orm::{ConnectionTrait as _, Statement};
        let url = format!(
            "sqlite://{}?mode=ro",
            self.dir.path().join("data/walletops.db").display()
        );
        let db = sea_orm::Database::connect(url).await?;
        let open = Statement::from_string(
            db.get_database_backend(),
            format!("SELECT COUNT(*) AS n FROM transactions WHERE {OPEN_RECORDS}"),
        );
        // Under callgrind the monitor runs some fifty times slower.
        let within = std::time::Duration::from_secs(600);
        poll_until_within("the monitor to settle every send", within, || async {
            let row = db.query_one_raw(open.clone()).await?.context("no count")?;
            Ok((row.try_get::<i64>("", "n")? == 0).then_some(()))
        })
        .await
    }
}

/// What a send and a cached read cost the service, counted under callgrind.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Counted {
    pub(crate) per_send: f64,
    pub(crate) per_read: f64,
    /// HTTP requests the service made to the node a send, from the first send until the
    /// last is mined (a JSON-RPC batch is one).
    pub(crate) node_requests_per_send: f64,
}

/// Instructions `bin` executes per REST send on SQLite, and per cached balance read over
/// REST, over `n` of each at `concurrency` on `anvil`; the profiles are copied to `keep`
/// (the sends') and `keep` with `.reads` added (read them with
/// `callgrind_annotate --inclusive=yes`).
pub(crate) async fn per_send_and_read(
    anvil: &Anvil,
    bin: &Path,
    (n, concurrency): (u64, usize),
    keep: Option<&Path>,
) -> anyhow::Result<Counted> {
    let valgrind = installed("valgrind", "valgrind").await?;
    let served = Served::start(anvil, bin, Some(&valgrind), concurrency).await?;
    let pid = served.pid()?;
    let dumps = served.dir.path().to_owned();
    control(pid, &["-z"]).await?;
    let asked = served.gateway.requests();
    served.sends(anvil, WARMUP, n, concurrency).await?;
    let asked = served.gateway.requests() - asked;
    control(pid, &["-d"]).await?;
    let (dump, sends) = dumped_total(&dumps)?;
    keep_profile(&dump, keep, "")?;
    // The first read fills the balance cache; the measured ones find it there.
    let reader = served.api.clone();
    read(&reader).await?;
    control(pid, &["-z"]).await?;
    let (_, results) = drive(n, concurrency, move |_| {
        let reader = reader.clone();
        async move { read(&reader).await }
    })
    .await?;
    all_ok(results, "reads under callgrind")?;
    control(pid, &["-d"]).await?;
    let (dump, reads) = dumped_total(&dumps)?;
    keep_profile(&dump, keep, ".reads")?;
    drop(served);
    Ok(Counted {
        per_send: sends as f64 / n as f64,
        per_read: reads as f64 / n as f64,
        node_requests_per_send: asked as f64 / n as f64,
    })
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
