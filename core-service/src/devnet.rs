//! `walletops serve --dev`: a local playground. It starts an anvil node from the project's
//! own npm install as chain `anvil` and funds the first user's EVM wallet, so a newcomer can
//! send a real transaction in the first minute, with no internet.

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

impl DevNode {
    /// Starts anvil on a free loopback port.
    pub async fn start_anvil() -> anyhow::Result<Self> {
        let mut child = Command::new(anvil_bin()?)
            .args(["--host", "127.0.0.1", "--port", "0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context("starting anvil")?;
        let stdout = child.stdout.take().context("anvil has no stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let addr = tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(line) = lines.next_line().await? {
                if let Some(addr) = line.strip_prefix("Listening on ") {
                    return Ok::<_, anyhow::Error>(addr.trim().to_owned());
                }
            }
            bail!("anvil exited before it was listening")
        })
        .await
        .context("waiting for anvil")??;
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok(Self {
            _child: child,
            url: format!("http://{addr}"),
        })
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
