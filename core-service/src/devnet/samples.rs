//! What the playground puts on its anvil: Multicall3 where it is missing, the dev token
//! (WDT), the Counter sample contract and the dev pool of WDT against the native coin, and
//! the 1inch-compatible aggregator serving the pool on a loopback port.

use std::time::Duration;

use alloy::{
    network::TransactionBuilder as _,
    primitives::{Address, Bytes, U256},
    providers::{MULTICALL3_ADDRESS, Provider, bindings::IMulticall3},
    rpc::types::TransactionRequest,
    sol_types::{SolCall as _, SolConstructor as _},
};
use anyhow::Context;
use walletops_devnet_aggregator::{DevAggregator, add_liquidity, deploy_pool};

use super::DevNode;

/// The test ERC20's and the Counter's solcjs artifacts, committed beside their sources in
/// `tests/contracts`: the playground deploys them, so the README's token and contract
/// examples run on a fresh machine with no Solidity tooling.
const TEST_TOKEN_ARTIFACT: &str = include_str!("../../../tests/contracts/build/TestToken.json");
const COUNTER_ARTIFACT: &str = include_str!("../../../tests/contracts/build/Counter.json");
/// What the first user's EVM wallet is minted of the dev token: 1,000,000 WDT.
pub(super) const DEV_TOKEN_MINT: u128 = 1_000_000_000_000_000_000_000_000;
/// The dev pool's liquidity: 100 ETH against 200,000 WDT (2,000 WDT per ETH).
const POOL_WEI: u128 = 100_000_000_000_000_000_000;
const POOL_WDT: u128 = 200_000_000_000_000_000_000_000;

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
    /// The SwapPool of WDT against the native coin: the router swaps call, and the spender
    /// an ERC20 sale approves.
    pub pool: Address,
}

impl DevNode {
    /// Puts Multicall3 in place where this anvil lacks it (balances read through it, as on
    /// the main networks), deploys the dev token, the Counter and the dev pool, and seeds the
    /// pool with 100 ETH and 200,000 WDT, all from anvil's first unlocked account.
    pub async fn deploy_samples(&self) -> anyhow::Result<DevContracts> {
        let provider = self.provider()?;
        if provider.get_code_at(MULTICALL3_ADDRESS).await?.is_empty() {
            let deployed = self
                .transact(None, IMulticall3::BYTECODE.clone())
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
        let token = self
            .transact(None, code.into())
            .await?
            .context("no dev token address")?;
        let counter = self
            .transact(None, creation_code(COUNTER_ARTIFACT)?)
            .await?
            .context("no Counter address")?;
        let deployer = self.deployer().await?;
        self.mint(token, deployer, U256::from(POOL_WDT)).await?;
        let pool = deploy_pool(self.url(), deployer, token).await?;
        add_liquidity(
            self.url(),
            deployer,
            pool,
            U256::from(POOL_WEI),
            U256::from(POOL_WDT),
        )
        .await
        .context("seeding the dev pool")?;
        Ok(DevContracts {
            token,
            counter,
            pool,
        })
    }

    /// Mints `amount` of dev token `token` to `to`.
    pub async fn mint(&self, token: Address, to: Address, amount: U256) -> anyhow::Result<()> {
        let mint = DevToken::mintCall { to, amount };
        self.transact(Some(token), mint.abi_encode().into())
            .await
            .context("minting the dev token")?;
        Ok(())
    }

    /// anvil's first unlocked account, which deploys and mints.
    async fn deployer(&self) -> anyhow::Result<Address> {
        self.provider()?
            .get_accounts()
            .await?
            .first()
            .copied()
            .context("anvil has no unlocked account")
    }

    /// Sends `input` to `to` (none: a deployment) from the deployer and waits for it to
    /// succeed; the deployed contract's address, for a deployment.
    async fn transact(&self, to: Option<Address>, input: Bytes) -> anyhow::Result<Option<Address>> {
        let mut tx = TransactionRequest::default()
            .from(self.deployer().await?)
            .input(input.into());
        tx = match to {
            Some(to) => tx.to(to),
            None => tx.into_create(),
        };
        let receipt = self
            .provider()?
            .send_transaction(tx)
            .await?
            .with_timeout(Some(Duration::from_secs(30)))
            .get_receipt()
            .await
            .context("a dev contract transaction")?;
        anyhow::ensure!(receipt.status(), "a dev contract transaction reverted");
        Ok(receipt.contract_address)
    }
}

/// The playground's 1inch-compatible aggregator over the dev pool, serving on a loopback
/// port until dropped.
#[derive(Debug)]
pub(super) struct DevVenue {
    pub(super) url: String,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Drop for DevVenue {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl DevVenue {
    pub(super) async fn serve(node: &DevNode, pool: Address) -> anyhow::Result<Self> {
        let aggregator = DevAggregator::connect(node.url(), pool).await?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .context("binding the dev aggregator")?;
        let url = format!("http://{}", listener.local_addr()?);
        let server = tokio::spawn(aggregator.serve(listener));
        Ok(Self { url, server })
    }
}
