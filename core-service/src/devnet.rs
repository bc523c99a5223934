//! `walletops serve --dev`: a local playground. It starts an anvil node from the project's
//! own npm install as chain `anvil`, and the Solana test node (litesvm behind JSON-RPC, the
//! `walletops-solana-node` binary built beside `walletops`) as chain `solana-devnet`, and
//! funds the first user's wallets, so a newcomer can send real transactions in the first
//! minute, with no internet.

use std::{path::PathBuf, process::Stdio, time::Duration};

use alloy::{
    primitives::{Address, U256},
    providers::{Provider, RootProvider},
};
use anyhow::{Context, bail};
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
};

use crate::chains::{ChainConfig, ChainFamily};

/// Slug of the local EVM chain.
pub const ANVIL_SLUG: &str = "anvil";
/// Slug the local Solana node stands in for.
pub const SOLANA_SLUG: &str = "solana-devnet";
/// What the first user's Solana wallet is funded with: 100 SOL.
const FUNDING_LAMPORTS: u64 = 100_000_000_000;
/// Chain id anvil uses.
const ANVIL_CHAIN_ID: i64 = 31337;
/// What the first user's EVM wallet is funded with: 1000 ETH.
const FUNDING_WEI: u128 = 1_000_000_000_000_000_000_000;

/// A running local node, stopped when dropped.
#[derive(Debug)]
pub struct DevNode {
    _child: Child,
    url: String,
}

/// The anvil binary: `WALLETOPS_ANVIL_BIN`, else `node_modules/.bin/anvil` in the current
/// directory or one of its parents (where `npm install` put it).
fn anvil_bin() -> anyhow::Result<PathBuf> {
    if let Some(bin) = std::env::var_os("WALLETOPS_ANVIL_BIN") {
        return Ok(PathBuf::from(bin));
    }
    let cwd = std::env::current_dir()?;
    cwd.ancestors()
        .map(|d| d.join("node_modules/.bin/anvil"))
        .find(|p| p.exists())
        .with_context(|| {
            format!(
                "anvil not found under {}: run `npm install` in the WalletOps checkout (scripts/dev does) or set WALLETOPS_ANVIL_BIN",
                cwd.display()
            )
        })
}

/// The Solana test node binary: `WALLETOPS_SOLANA_NODE_BIN`, else `walletops-solana-node`
/// beside this executable (`cargo build --workspace --bins` builds both).
fn solana_node_bin() -> Option<PathBuf> {
    if let Some(bin) = std::env::var_os("WALLETOPS_SOLANA_NODE_BIN") {
        return Some(PathBuf::from(bin));
    }
    let beside = std::env::current_exe()
        .ok()?
        .parent()?
        .join("walletops-solana-node");
    beside.exists().then_some(beside)
}

/// Spawns `cmd` and waits for the line that starts with `prefix`; returns the child and the
/// rest of that line.
async fn spawn_until(
    mut cmd: Command,
    what: &str,
    prefix: &str,
) -> anyhow::Result<(Child, String)> {
    die_with_parent(&mut cmd);
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {what}"))?;
    let stdout = child.stdout.take().context("no stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let rest = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await? {
            if let Some(rest) = line.strip_prefix(prefix) {
                return Ok::<_, anyhow::Error>(rest.trim().to_owned());
            }
        }
        bail!("{what} exited before it was listening")
    })
    .await
    .with_context(|| format!("waiting for {what}"))??;
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok((child, rest))
}

/// Makes the node die with this process. `kill_on_drop` stops it on a clean exit, but not
/// when this process is killed outright (SIGKILL, the OOM killer): then the kernel sends it
/// SIGKILL too, instead of leaving it running with nobody to stop it.
#[cfg(target_os = "linux")]
fn die_with_parent(cmd: &mut Command) {
    let parent = std::process::id();
    // SAFETY: between fork and exec the closure only makes two async-signal-safe calls
    // (prctl, getppid) and allocates nothing. The signal follows the death of the thread
    // that forks: a runtime thread, which lives as long as the process.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have died before the request was made.
            if u32::try_from(libc::getppid()) != Ok(parent) {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

/// Elsewhere only `kill_on_drop` stops the node.
#[cfg(not(target_os = "linux"))]
fn die_with_parent(_: &mut Command) {}

impl DevNode {
    /// Starts anvil on a free loopback port. It mines each transaction as it arrives and a
    /// block every second besides: automine alone can leave a ready transaction unmined when
    /// one sender's nonces arrive out of order, as concurrent sends from one wallet do
    /// (foundry-rs/foundry#10122), and the playground would then wait for the monitor's
    /// replacement (which it still does in the rarer case that anvil keeps one queued).
    pub async fn start_anvil() -> anyhow::Result<Self> {
        let mut cmd = Command::new(anvil_bin()?);
        cmd.args(["--host", "127.0.0.1", "--port", "0"]).args([
            "--mixed-mining",
            "--block-time",
            "1",
        ]);
        let (child, addr) = spawn_until(cmd, "anvil", "Listening on ").await?;
        Ok(Self {
            _child: child,
            url: format!("http://{addr}"),
        })
    }

    /// Starts the Solana test node on a free loopback port, when its binary was built.
    pub async fn start_solana() -> anyhow::Result<Option<Self>> {
        let Some(bin) = solana_node_bin() else {
            return Ok(None);
        };
        let mut cmd = Command::new(bin);
        cmd.args(["--addr", "127.0.0.1:0"]);
        let (child, url) =
            spawn_until(cmd, "the Solana test node", "Solana JSON-RPC listening on ").await?;
        Ok(Some(Self { _child: child, url }))
    }

    /// The chain entry that points `solana-devnet` at this (Solana) node, with explorer
    /// links to the explorer's custom-cluster view of it.
    pub fn solana_chain(&self) -> ChainConfig {
        ChainConfig {
            family: Some(ChainFamily::Solana),
            chain_id: None,
            name: Some("Solana Devnet (local)".to_owned()),
            explorer_tx_url: Some(format!(
                "https://explorer.solana.com/tx/{{hash}}?cluster=custom&customUrl={}",
                self.url
            )),
            rpc_url: Some(self.url.clone()),
            native_symbol: None,
            confirmations: None,
        }
    }

    /// Gives Solana `address` 100 SOL, through the node's `requestAirdrop`.
    pub async fn airdrop(&self, address: &str) -> anyhow::Result<()> {
        let pubkey: solana_pubkey::Pubkey = address.parse().context("funding address")?;
        let rpc = solana_rpc_client::nonblocking::rpc_client::RpcClient::new(self.url.clone());
        rpc.request_airdrop(&pubkey, FUNDING_LAMPORTS)
            .await
            .context("funding the Solana wallet")?;
        Ok(())
    }

    /// The chain entry that points `anvil` at this node.
    pub fn chain(&self) -> ChainConfig {
        ChainConfig {
            family: Some(ChainFamily::Evm),
            chain_id: Some(ANVIL_CHAIN_ID),
            name: Some("Anvil (local)".to_owned()),
            explorer_tx_url: None,
            rpc_url: Some(self.url.clone()),
            native_symbol: Some("ETH".to_owned()),
            confirmations: None,
        }
    }

    /// The node's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Gives `address` 1000 ETH.
    pub async fn fund(&self, address: &str) -> anyhow::Result<()> {
        let address: Address = address.parse().context("funding address")?;
        let provider = RootProvider::<alloy::network::Ethereum>::new_http(self.url.parse()?);
        let _: serde_json::Value = provider
            .raw_request(
                "anvil_setBalance".into(),
                (address, U256::from(FUNDING_WEI)),
            )
            .await
            .context("funding the wallet")?;
        Ok(())
    }
}
