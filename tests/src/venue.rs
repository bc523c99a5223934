//! A local EVM swap venue: a dev token and a SwapPool for it on anvil, and the pool's
//! 1inch-compatible aggregator (`walletops-devnet-aggregator`) served on a loopback port, for
//! the tests and the bench that swap through the service.

use alloy::primitives::{Address, U256};
use tokio::task::JoinHandle;
use walletops_devnet_aggregator::{DevAggregator, add_liquidity, deploy_pool};

use crate::anvil::{Anvil, DEV_ACCOUNT};

/// A pool of ETH and a token on the node and its aggregator, serving until dropped.
#[derive(Debug)]
pub struct Venue {
    /// The pool's token (18 decimals).
    pub token: Address,
    /// The pool: the router the service must allow.
    pub pool: Address,
    /// The node's chain id.
    pub chain_id: u64,
    /// Where the aggregator listens: the service's `trade.evm.base_url`.
    pub url: String,
    server: JoinHandle<std::io::Result<()>>,
}

impl Drop for Venue {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl Venue {
    /// Deploys token `symbol` and a pool of `eth` ETH against 2,000 times as many tokens on
    /// `anvil`, and serves its aggregator.
    pub async fn open(anvil: &Anvil, symbol: &str, eth: u64) -> anyhow::Result<Self> {
        let whole = U256::from(10u64).pow(U256::from(18));
        let tokens = U256::from(eth) * U256::from(2_000) * whole;
        let token = anvil.deploy_token(symbol, 18).await?;
        anvil.mint(token, DEV_ACCOUNT, tokens).await?;
        let pool = deploy_pool(anvil.url(), DEV_ACCOUNT, token).await?;
        add_liquidity(
            anvil.url(),
            DEV_ACCOUNT,
            pool,
            U256::from(eth) * whole,
            tokens,
        )
        .await?;
        let aggregator = DevAggregator::connect(anvil.url(), pool).await?;
        let chain_id = aggregator.chain_id();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let server = tokio::spawn(aggregator.serve(listener));
        Ok(Self {
            token,
            pool,
            chain_id,
            url,
            server,
        })
    }

    /// The `[trade.evm]` section of a service swapping here.
    pub fn toml(&self) -> String {
        format!(
            "[trade.evm]\nbase_url = \"{}\"\napi_key = \"any\"\nallowed_routers = [\"{}\"]\n",
            self.url, self.pool
        )
    }
}
