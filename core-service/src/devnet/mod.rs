//! `walletops serve --dev`: a local playground. It starts an anvil node from the project's
//! own npm install as chain `anvil`, and the Solana test node (litesvm behind JSON-RPC, the
//! `walletops-solana-node` binary built beside `walletops`) as chain `solana-devnet`, and
//! funds the first user's wallets, so a newcomer can send real transactions in the first
//! minute, with no internet.

use std::{net::SocketAddr, path::PathBuf, process::Stdio, time::Duration};

use alloy::{
    network::TransactionBuilder as _,
    primitives::{Address, Bytes, U256},
    providers::{MULTICALL3_ADDRESS, Provider, RootProvider, bindings::IMulticall3},
    rpc::types::TransactionRequest,
    sol_types::{SolCall as _, SolConstructor as _},
};
use anyhow::{Context, bail};
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
};

use crate::{
    Config, Core,
    bootstrap::FIRST_USER,
    chains::ChainConfig,
    domain::{ChainFamily, WalletFilter},
};

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

/// The test ERC20's and the Counter's solcjs artifacts, committed beside their sources in
/// `tests/contracts`: the playground deploys them, so the README's token and contract
/// examples run on a fresh machine with no Solidity tooling.
const TEST_TOKEN_ARTIFACT: &str = include_str!("../../tests/contracts/build/TestToken.json");
const COUNTER_ARTIFACT: &str = include_str!("../../tests/contracts/build/Counter.json");
/// What the first user's EVM wallet is minted of the dev token: 1,000,000 WDT.
const DEV_TOKEN_MINT: u128 = 1_000_000_000_000_000_000_000_000;

alloy::sol! {
    /// The part of `tests/contracts/TestToken.sol` the playground calls.
    contract DevToken {
        constructor(string name_, string symbol_, uint8 decimals_);
        function mint(address to, uint256 amount) external;
    }
}

/// The creation bytecode of a solcjs artifact.
fn creation_code(artifact: &str) -> anyhow::Result<Bytes> {
    let json: serde_json::Value = serde_json::from_str(artifact)?;
    json["bytecode"]
        .as_str()
        .context("artifact has no bytecode")?
        .parse()
        .context("artifact bytecode")
}

/// What `serve --dev` deploys on its anvil.
#[derive(Debug, Clone, Copy)]
pub struct DevContracts {
    /// The dev ERC20 (WDT, 18 decimals).
    pub token: Address,
    /// The Counter contract: `add(uint256)`, `deposit()` (payable), `fail()`.
    pub counter: Address,
}

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

    /// A client of this (EVM) node.
    fn provider(&self) -> anyhow::Result<RootProvider> {
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

    /// Puts Multicall3 in place where this anvil lacks it (balances read through it, as on
    /// the main networks), deploys the dev token, mints 1,000,000 of it to `wallet`, and
    /// deploys the Counter, all from anvil's first unlocked account.
    pub async fn deploy_samples(&self, wallet: &str) -> anyhow::Result<DevContracts> {
        let wallet: Address = wallet.parse().context("dev wallet address")?;
        let provider = self.provider()?;
        let deployer = *provider
            .get_accounts()
            .await?
            .first()
            .context("anvil has no unlocked account")?;
        let send = async |to: Option<Address>, input: Bytes| -> anyhow::Result<Option<Address>> {
            let mut tx = TransactionRequest::default()
                .from(deployer)
                .input(input.into());
            tx = match to {
                Some(to) => tx.to(to),
                None => tx.into_create(),
            };
            let receipt = provider
                .send_transaction(tx)
                .await?
                .with_timeout(Some(Duration::from_secs(30)))
                .get_receipt()
                .await
                .context("a dev contract transaction")?;
            anyhow::ensure!(receipt.status(), "a dev contract transaction reverted");
            Ok(receipt.contract_address)
        };
        if provider.get_code_at(MULTICALL3_ADDRESS).await?.is_empty() {
            let deployed = send(None, IMulticall3::BYTECODE.clone())
                .await?
                .context("no Multicall3 address")?;
            let code = provider.get_code_at(deployed).await?;
            let _: serde_json::Value = provider
                .raw_request("anvil_setCode".into(), (MULTICALL3_ADDRESS, code))
                .await
                .context("putting Multicall3 in place")?;
        }
        let mut code = creation_code(TEST_TOKEN_ARTIFACT)?.to_vec();
        code.extend(
            DevToken::constructorCall {
                name_: "WalletOps Dev Token".to_owned(),
                symbol_: "WDT".to_owned(),
                decimals_: 18,
            }
            .abi_encode(),
        );
        let token = send(None, code.into())
            .await?
            .context("no dev token address")?;
        let mint = DevToken::mintCall {
            to: wallet,
            amount: U256::from(DEV_TOKEN_MINT),
        };
        send(Some(token), mint.abi_encode().into()).await?;
        let counter = send(None, creation_code(COUNTER_ARTIFACT)?)
            .await?
            .context("no Counter address")?;
        Ok(DevContracts { token, counter })
    }
}

/// The playground of `serve --dev`: its nodes, which stop when it is dropped, and the first
/// user's wallets it funded on them.
#[derive(Debug)]
pub struct Playground {
    anvil: DevNode,
    solana: Option<DevNode>,
    /// The first user's default EVM wallet, funded on anvil.
    evm_wallet: Option<String>,
    /// The first user's default Solana wallet, funded on the Solana test node.
    solana_wallet: Option<String>,
}

impl Playground {
    /// Starts anvil as chain `anvil` and, when its binary was built, the Solana test node as
    /// chain `solana-devnet`, and points `config`'s chains at them; before the core opens.
    pub async fn start(config: &mut Config) -> anyhow::Result<Self> {
        let anvil = DevNode::start_anvil().await?;
        config.chains.insert(ANVIL_SLUG.to_owned(), anvil.chain());
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
        if let Some(wallet) = &self.evm_wallet {
            let DevContracts { token, counter } = self.anvil.deploy_samples(wallet).await?;
            println!(
                "Dev token WDT (18 decimals) at {token}, 1000000 WDT minted to the wallet; dev contract Counter at {counter} (add(uint256), deposit(), fail())"
            );
            println!("export TOKEN={token} CONTRACT={counter}");
        }
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
        println!("Dev playground ready.");
    }
}

/// The first user's default wallet of `family`, if any.
async fn first_wallet(core: &Core, family: ChainFamily) -> anyhow::Result<Option<String>> {
    let Ok(owner) = core.find_user(FIRST_USER).await else {
        return Ok(None);
    };
    let filter = WalletFilter {
        family: Some(family),
        default_only: true,
        automation_only: false,
    };
    Ok(core
        .wallets
        .list(owner.id, filter)
        .await?
        .into_iter()
        .next()
        .map(|w| w.address.to_string()))
}
