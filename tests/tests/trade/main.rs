//! The local swap venues on real nodes, called through the service's own aggregator
//! clients: the SwapPool contract and its 1inch-compatible aggregator on anvil, and the
//! Jupiter fake on the Solana test node. Swaps are signed and sent, and the balances they
//! moved are read back from the nodes.

mod bounds;
mod desk;
mod evm;
mod mcp;
mod quotes;
mod records;
mod solana;
mod solana_swaps;
mod swaps;

use std::time::Duration;

use alloy::primitives::{Address, U256, utils::parse_ether};
use walletops_chains::trade::HttpPolicy;
use walletops_devnet_aggregator::{add_liquidity, deploy_pool};
use walletops_tests::anvil::{Anvil, DEV_ACCOUNT};

/// `whole` tokens of 18 decimals, in base units.
fn tokens(whole: u64) -> U256 {
    U256::from(whole) * U256::from(10u64).pow(U256::from(18))
}

/// A dev token on `anvil` and a SwapPool for it holding 100 ETH and 200,000 tokens: the
/// token and the pool.
async fn funded_pool(anvil: &Anvil) -> anyhow::Result<(Address, Address)> {
    let token = anvil.deploy_token("WDT", 18).await?;
    anvil.mint(token, DEV_ACCOUNT, tokens(1_000_000)).await?;
    let pool = deploy_pool(anvil.url(), DEV_ACCOUNT, token).await?;
    add_liquidity(
        anvil.url(),
        DEV_ACCOUNT,
        pool,
        parse_ether("100")?,
        tokens(200_000),
    )
    .await?;
    Ok((token, pool))
}

/// Timeouts short enough that the stall tests end quickly, retries as in production.
fn policy() -> HttpPolicy {
    HttpPolicy {
        timeout: Duration::from_secs(2),
        min_backoff: Duration::from_millis(20),
        max_backoff: Duration::from_millis(100),
        ..HttpPolicy::default()
    }
}
