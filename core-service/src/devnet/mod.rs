//! `walletops serve --dev`: a local playground. It starts an anvil node from the project's
//! own npm install as chain `anvil`, and the Solana test node (litesvm behind JSON-RPC, the
//! `walletops-solana-node` binary built beside `walletops`) as chain `solana-devnet`, and
//! funds the first user's wallets, so a newcomer can send real transactions in the first
//! minute, with no internet. On anvil it deploys a dev token (WDT), a sample contract, and a
//! constant-product pool of WDT against the native coin, priced and routed by a
//! 1inch-compatible aggregator served in-process on a loopback port: quotes and swaps on
//! chain `anvil` work as they do on a main network.

use std::{net::SocketAddr, path::PathBuf, process::Stdio, time::Duration};

use alloy::{
    primitives::{Address, U256},
    providers::{Provider, RootProvider},
};
use anyhow::{Context, bail};
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
};

use crate::{Config, Core, bootstrap::FIRST_USER};

use walletops_chains::{ChainConfig, trade::LocalEvmAggregator};
use walletops_domain::ChainFamily;

mod samples;

pub use samples::DevContracts;
use samples::{DEV_TOKEN_MINT, DevVenue};

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

/// The anvil binary: `WALLETOPS_ANVIL_BIN`, else `anvil` on `PATH`, else
/// `node_modules/.bin/anvil` (where `npm install` puts it) in the checkout this executable
/// was built in (found from its own location) or in the current directory or a parent.
fn anvil_bin() -> anyhow::Result<PathBuf> {
    if let Some(bin) = std::env::var_os("WALLETOPS_ANVIL_BIN") {
        return Ok(PathBuf::from(bin));
    }
    let on_path = std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .map(|dir| dir.join("anvil"));
    let exe = std::env::current_exe().ok();
    let cwd = std::env::current_dir().ok();
    let in_checkouts = [exe.as_deref(), cwd.as_deref()]
        .into_iter()
        .flatten()
        .flat_map(|start| start.ancestors())
        .map(|dir| dir.join("node_modules/.bin/anvil"));
    on_path.chain(in_checkouts).find(|p| p.is_file()).context(
        "anvil not found: set WALLETOPS_ANVIL_BIN, put anvil on PATH, or run `npm install` in the WalletOps checkout (scripts/dev does)",
    )
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
            rpc_urls: None,
            native_symbol: None,
            confirmations: None,
            // The playground's wallets see what arrives at them.
            deposits: Some(walletops_chains::DepositSettings::default()),
            ..ChainConfig::default()
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
            rpc_urls: None,
            native_symbol: Some("ETH".to_owned()),
            confirmations: None,
            deposits: Some(walletops_chains::DepositSettings::default()),
            ..ChainConfig::default()
        }
    }

    /// The node's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A client of this (EVM) node.
    pub(crate) fn provider(&self) -> anyhow::Result<RootProvider> {
        Ok(RootProvider::new_http(self.url.parse()?))
    }

    /// Gives `address` 1000 ETH.
    pub async fn fund(&self, address: &str) -> anyhow::Result<()> {
        let address: Address = address.parse().context("funding address")?;
        let _: serde_json::Value = self
            .provider()?
            .raw_request(
                "anvil_setBalance".into(),
                (address, U256::from(FUNDING_WEI)),
            )
            .await
            .context("funding the wallet")?;
        Ok(())
    }
}

/// The playground of `serve --dev`: its nodes, which stop when it is dropped, and the first
/// user's wallets it funded on them.
#[derive(Debug)]
pub struct Playground {
    anvil: DevNode,
    solana: Option<DevNode>,
    contracts: DevContracts,
    venue: DevVenue,
    /// The first user's default EVM wallet, funded on anvil.
    evm_wallet: Option<String>,
    /// The first user's default Solana wallet, funded on the Solana test node.
    solana_wallet: Option<String>,
}

impl Playground {
    /// Starts anvil as chain `anvil`, deploys the samples and the dev pool on it and serves
    /// the pool's aggregator, and, when its binary was built, starts the Solana test node as
    /// chain `solana-devnet`; points `config`'s chains (and chain `anvil`'s trades) at them,
    /// and serves metrics on 127.0.0.1:9090 unless configured otherwise. Before the core
    /// opens.
    pub async fn start(config: &mut Config) -> anyhow::Result<Self> {
        config
            .metrics_addr
            .get_or_insert(std::net::SocketAddr::from(([127, 0, 0, 1], 9090)));
        let anvil = DevNode::start_anvil().await?;
        config.chains.insert(ANVIL_SLUG.to_owned(), anvil.chain());
        let contracts = anvil.deploy_samples().await?;
        let venue = DevVenue::serve(&anvil, contracts.pool).await?;
        config.trade.local_evm.push(LocalEvmAggregator {
            chain_id: ANVIL_CHAIN_ID.unsigned_abs(),
            base_url: venue.url.parse().context("the dev aggregator's URL")?,
            router: contracts.pool,
        });
        let solana = DevNode::start_solana().await?;
        match &solana {
            Some(s) => {
                config
                    .chains
                    .insert(SOLANA_SLUG.to_owned(), s.solana_chain());
            }
            None => println!(
                "The Solana test node is not built (cargo build --workspace --bins): Solana chains keep their public RPC URLs."
            ),
        }
        Ok(Self {
            anvil,
            solana,
            contracts,
            venue,
            evm_wallet: None,
            solana_wallet: None,
        })
    }

    /// Readies the nodes for `core`, once it is open: forgets their chains' earlier runs,
    /// funds the first user's default wallets on them, and deploys the sample contracts,
    /// saying so as it goes.
    pub async fn prepare(&mut self, core: &Core) -> anyhow::Result<()> {
        // The dev nodes start empty: a nonce ledger or open records of an earlier run on them
        // would have the first send wait for a gap filler, and old records sent again.
        let started = [Some(ANVIL_SLUG), self.solana.as_ref().map(|_| SOLANA_SLUG)];
        for slug in started.into_iter().flatten() {
            let ended = core.forget_dev_chain(slug).await?;
            if ended > 0 {
                println!(
                    "Dev chain `{slug}` starts empty: {ended} transactions still open on its last run end DROPPED"
                );
            }
        }
        if let Some(node) = &self.solana
            && let Some(wallet) = first_wallet(core, ChainFamily::Solana).await?
        {
            node.airdrop(&wallet).await?;
            println!(
                "Dev chain `solana-devnet` (litesvm) at {}; wallet {wallet} funded with 100 SOL",
                node.url()
            );
            self.solana_wallet = Some(wallet);
        }
        self.evm_wallet = first_wallet(core, ChainFamily::Evm).await?;
        if let Some(wallet) = &self.evm_wallet {
            self.anvil.fund(wallet).await?;
        }
        println!(
            "Dev chain `anvil` (chain id 31337) at {}{}",
            self.anvil.url(),
            self.evm_wallet
                .as_ref()
                .map(|w| format!("; wallet {w} funded with 1000 ETH"))
                .unwrap_or_default()
        );
        let DevContracts {
            token,
            counter,
            pool,
        } = self.contracts;
        if let Some(wallet) = &self.evm_wallet {
            let to = wallet.parse().context("dev wallet address")?;
            self.anvil
                .mint(token, to, U256::from(DEV_TOKEN_MINT))
                .await?;
            println!(
                "Dev token WDT (18 decimals) at {token}, 1000000 WDT minted to the wallet; dev contract Counter at {counter} (add(uint256), deposit(), fail())"
            );
        }
        println!(
            "Dev pool ETH/WDT at {pool} (100 ETH, 200000 WDT): quotes and swaps on chain `anvil` go to its 1inch-compatible aggregator at {}",
            self.venue.url
        );
        println!("export TOKEN={token} CONTRACT={counter} POOL={pool}");
        Ok(())
    }

    /// Prints a ready send on each funded dev chain through the REST edge at `http`, with
    /// the first user's `key` when this start made it (else `$KEY`), once the EVM wallet is
    /// funded.
    pub fn print_try(&self, http: SocketAddr, key: Option<&str>) {
        if self.evm_wallet.is_none() {
            return;
        }
        let key = key.unwrap_or("$KEY");
        let body = r#"{"chain":"anvil","to":"0x1111111111111111111111111111111111111111","asset":"native","amount":"1000000000000000"}"#;
        println!("Try a send on the dev chain:");
        println!(
            "curl -s -X POST http://{http}/api/v1/send -H \"x-api-key: {key}\" -H \"Idempotency-Key: $(cat /proc/sys/kernel/random/uuid)\" -H 'content-type: application/json' -d '{body}'"
        );
        if self.solana_wallet.is_some() {
            let body = r#"{"chain":"solana-devnet","to":"11111111111111111111111111111112","asset":"native","amount":"1000000"}"#;
            println!(
                "curl -s -X POST http://{http}/api/v1/send -H \"x-api-key: {key}\" -H \"Idempotency-Key: $(cat /proc/sys/kernel/random/uuid)\" -H 'content-type: application/json' -d '{body}'"
            );
        }
        let body = r#"{"chain":"anvil","fromToken":"NATIVE","toToken":"TOKEN","amount":"1000000000000000000"}"#
            .replace("TOKEN", &self.contracts.token.to_string());
        println!("Quote and swap 1 ETH for WDT on the dev pool:");
        println!(
            "curl -s -X POST http://{http}/api/v1/trade/quote -H \"x-api-key: {key}\" -H 'content-type: application/json' -d '{body}'"
        );
        println!(
            "curl -s -X POST http://{http}/api/v1/trade/swap -H \"x-api-key: {key}\" -H \"Idempotency-Key: $(cat /proc/sys/kernel/random/uuid)\" -H 'content-type: application/json' -d '{body}'"
        );
        println!("Dev playground ready.");
    }
}

/// The first user's default wallet of `family`, if any.
async fn first_wallet(core: &Core, family: ChainFamily) -> anyhow::Result<Option<String>> {
    let Ok(owner) = core.users().find(FIRST_USER).await else {
        return Ok(None);
    };
    Ok(core
        .store
        .default_wallet(owner.id, family)
        .await?
        .map(|w| w.address.to_string()))
}
