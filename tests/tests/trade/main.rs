//! The local swap venues on real nodes, called through the service's own aggregator
//! clients: the SwapPool contract and its 1inch-compatible aggregator on anvil, and the
//! Jupiter fake on the Solana test node. Swaps are signed and sent, and the balances they
//! moved are read back from the nodes.

mod evm;
mod quotes;
mod solana;

use std::time::Duration;

use walletops_core::trade::HttpPolicy;

/// Timeouts short enough that the stall tests end quickly, retries as in production.
fn policy() -> HttpPolicy {
    HttpPolicy {
        timeout: Duration::from_secs(2),
        min_backoff: Duration::from_millis(20),
        max_backoff: Duration::from_millis(100),
        ..HttpPolicy::default()
    }
}
