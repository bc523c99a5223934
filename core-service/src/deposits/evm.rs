//! One step of an EVM chain's deposit scan:
//!
//! 1. The newest block kept is checked against the node: a different hash is a
//!    reorganization; the kept blocks are walked back to where they agree, the deposits
//!    from there are reverted and the next step scans from there again.
//! 2. The next blocks (at most `BLOCKS_PER_STEP`) are read with their transactions (native
//!    value to a wallet, in a transaction that succeeded) and their `Transfer` logs to the
//!    wallets (`eth_getLogs`, the wallets as topic filters, `ADDRESSES_PER_FILTER` at a
//!    time). A log whose block hash is not the block's read is the chain moving under the
//!    scan: the step is dropped and made again.
//! 3. The deposits, the blocks' hashes and the cursor commit in one database transaction.
//! 4. Pending deposits as deep as the chain's `confirmations` are confirmed.
//!
//! Where the node serves `trace_block` (or `deposits.traces = true` requires it), each block's
//! traces add the value internal calls moved to a wallet (a contract forwarding coin);
//! elsewhere only transactions' own value counts.

use std::collections::HashMap;

use alloy::primitives::{Address, B256, U256};
use futures::{StreamExt as _, TryStreamExt as _};

use super::{Found, scanner::Scan};
use crate::error::WalletOpsError;
use walletops_chains::{
    Chain,
    evm::{EvmClient, ScannedBlock},
};
use walletops_domain::{ChainFamily, NATIVE_ASSET, Wallet};
use walletops_store::ScanStep;

/// Blocks whose hashes are kept: the deepest reorganization found.
const KEEP_BLOCKS: u64 = 128;
/// Blocks read in one step.
const BLOCKS_PER_STEP: u64 = 50;
/// The first scan of a chain starts this far below its head, so that what arrived while the
/// scan was being turned on is not missed.
const LOOKBACK: u64 = 64;
/// Wallet addresses in one `eth_getLogs` filter.
const ADDRESSES_PER_FILTER: usize = 100;
/// Blocks read at once.
const BLOCKS_IN_FLIGHT: usize = 8;

/// One step of `chain`'s scan from block `next` (`None`: its first).
pub(super) async fn step(
    scan: &Scan,
    chain: &Chain,
    next: Option<u64>,
) -> Result<(), WalletOpsError> {
    if chain.deposits().is_none() {
        return Ok(());
    }
    let client = scan.evm.get(chain)?;
    let head = client.block_number().await?;
    let start = next.unwrap_or_else(|| head.saturating_sub(LOOKBACK));
    if let Some(fork) = fork_point(scan, chain, &client, start).await? {
        let reverted = scan
            .store
            .revert_deposits_from(chain.slug(), scan.owner, fork)
            .await?;
        tracing::warn!(
            chain = chain.slug(),
            fork,
            reverted = reverted.unwrap_or_default(),
            "a reorganization: deposits from the fork on are reverted and scanned again",
        );
        return Ok(());
    }
    let mut scanned_to = start.checked_sub(1);
    if start <= head {
        let upto = head.min(start + BLOCKS_PER_STEP - 1);
        if !scan_blocks(scan, chain, &client, (start, upto)).await? {
            return Ok(());
        }
        scanned_to = Some(upto);
    }
    // The including block counts as the first confirmation.
    let deep = (head + 1).checked_sub(chain.confirmations());
    if let Some(upto) = deep.zip(scanned_to).map(|(d, s)| d.min(s)) {
        scan.store
            .confirm_deposits(chain.slug(), Some(upto), None)
            .await?;
    }
    Ok(())
}

/// Reads blocks `start..=upto` of `chain` and commits their deposits, their hashes and the
/// cursor past them (steps 2 and 3); `false` when another core took the scan meanwhile.
async fn scan_blocks(
    scan: &Scan,
    chain: &Chain,
    client: &EvmClient,
    (start, upto): (u64, u64),
) -> Result<bool, WalletOpsError> {
    let wallets: HashMap<Address, Wallet> = scan
        .store
        .wallets_of_family(ChainFamily::Evm)
        .await?
        .into_iter()
        .filter_map(|w| Some((w.address.evm()?, w)))
        .collect();
    let blocks: Vec<ScannedBlock> = futures::stream::iter(start..=upto)
        .map(|n| async move {
            client.scanned_block(n).await?.ok_or_else(|| {
                WalletOpsError::ProviderRpcError(format!(
                    "block {n} is not on the node's chain now"
                ))
            })
        })
        .buffered(BLOCKS_IN_FLIGHT)
        .try_collect()
        .await?;
    let mut credits = native_credits(client, &blocks, &wallets).await?;
    if traces_read(scan, chain, client, upto).await? {
        for block in &blocks {
            for (tx, from, to, amount) in client.internal_transfers(block.number).await? {
                if wallets.contains_key(&to) {
                    credits.push(Credit::native(block, (tx, from, to, amount)));
                }
            }
        }
    }
    credits.extend(token_credits(client, &blocks, &wallets, (start, upto)).await?);
    let step = ScanStep {
        deposits: found(chain, &wallets, credits),
        blocks: blocks
            .iter()
            .map(|b| (b.number, format!("{:#x}", b.hash)))
            .collect(),
        next_block: Some(upto + 1),
        forget_below: Some((upto + 1).saturating_sub(KEEP_BLOCKS)),
        signatures: Vec::new(),
    };
    Ok(scan
        .store
        .record_scan(chain.slug(), scan.owner, step)
        .await?)
}

/// The coin `blocks`' transactions sent to `wallets`. Value sent to a wallet counts only if
/// its transaction succeeded: receipts are read for those alone, several at once.
async fn native_credits(
    client: &EvmClient,
    blocks: &[ScannedBlock],
    wallets: &HashMap<Address, Wallet>,
) -> Result<Vec<Credit>, WalletOpsError> {
    let candidates: Vec<Credit> = blocks
        .iter()
        .flat_map(|block| {
            block
                .value_transfers
                .iter()
                .filter(|(_, _, to, _)| wallets.contains_key(to))
                .map(|&moved| Credit::native(block, moved))
        })
        .collect();
    futures::stream::iter(candidates)
        .map(|c| async move {
            Ok::<_, WalletOpsError>((client.succeeded(c.tx).await? == Some(true)).then_some(c))
        })
        .buffered(BLOCKS_IN_FLIGHT)
        .try_filter_map(|c| async move { Ok(c) })
        .try_collect()
        .await
}

/// The `Transfer` logs of blocks `start..=upto` to `wallets`, in chain order; a log whose
/// block hash is not that of the block read fails the step (the chain moved under it).
async fn token_credits(
    client: &EvmClient,
    blocks: &[ScannedBlock],
    wallets: &HashMap<Address, Wallet>,
    (start, upto): (u64, u64),
) -> Result<Vec<Credit>, WalletOpsError> {
    let hashes: HashMap<u64, B256> = blocks.iter().map(|b| (b.number, b.hash)).collect();
    let addresses: Vec<Address> = wallets.keys().copied().collect();
    let mut logs = Vec::new();
    for some in addresses.chunks(ADDRESSES_PER_FILTER) {
        logs.extend(client.transfer_logs((start, upto), some).await?);
    }
    logs.sort_by_key(|l| (l.block, l.log_index));
    logs.into_iter()
        .map(|log| {
            if hashes.get(&log.block) != Some(&log.block_hash) {
                return Err(WalletOpsError::ProviderRpcError(format!(
                    "block {} changed while it was scanned",
                    log.block
                )));
            }
            Ok(Credit {
                tx: log.tx_hash,
                asset: format!("{:#x}", log.token),
                from: log.from,
                to: log.to,
                amount: log.value,
                block: log.block,
                block_hash: log.block_hash,
            })
        })
        .collect()
}

/// `credits` to `wallets` as deposits, each ranked among its transaction's credits of the
/// same asset to the same wallet.
fn found(
    chain: &Chain,
    wallets: &HashMap<Address, Wallet>,
    credits: Vec<Credit>,
) -> Vec<walletops_domain::Deposit> {
    let mut ranks: HashMap<(B256, String, Address), u32> = HashMap::new();
    let now = crate::clock::now();
    credits
        .into_iter()
        .filter_map(|c| {
            let wallet = wallets.get(&c.to)?;
            let rank = ranks.entry((c.tx, c.asset.clone(), c.to)).or_default();
            let found = Found {
                chain,
                wallet,
                tx: format!("{:#x}", c.tx),
                asset: c.asset,
                amount: c.amount,
                from: Some(c.from.to_checksum(None)),
                block: c.block,
                block_hash: Some(format!("{:#x}", c.block_hash)),
                rank: *rank,
            };
            *rank += 1;
            Some(found.deposit(now))
        })
        .collect()
}

/// Whether `chain`'s scan reads traces: as its settings say, or, left to the node, whether it
/// serves `trace_block` (asked once, of block `at`). A node that fails otherwise fails the
/// step, which is made again: a passing failure must not turn traces off for good.
async fn traces_read(
    scan: &Scan,
    chain: &Chain,
    client: &EvmClient,
    at: u64,
) -> Result<bool, WalletOpsError> {
    if let Some(set) = chain.deposits().and_then(|d| d.traces) {
        return Ok(set);
    }
    let known = |scan: &Scan| {
        scan.traced
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(chain.slug())
            .copied()
    };
    if let Some(known) = known(scan) {
        return Ok(known);
    }
    let served = match client.internal_transfers(at).await {
        Ok(_) => true,
        Err(e) if not_served(&e.to_string()) => {
            tracing::info!(
                chain = chain.slug(),
                "the node does not serve trace_block: value moved by internal calls is not scanned"
            );
            false
        }
        Err(e) => return Err(e.into()),
    };
    scan.traced
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert(chain.slug().to_owned(), served);
    Ok(served)
}

/// Whether a node's error says it has no such method (JSON-RPC -32601, or its words).
fn not_served(error: &str) -> bool {
    let error = error.to_ascii_lowercase();
    [
        "-32601",
        "method not found",
        "does not exist",
        "not supported",
        "unsupported method",
        "not available",
    ]
    .iter()
    .any(|words| error.contains(words))
}

/// A credit found in a block, before it is matched to its wallet.
struct Credit {
    tx: B256,
    asset: String,
    from: Address,
    to: Address,
    amount: U256,
    block: u64,
    block_hash: B256,
}

impl Credit {
    /// The coin `(tx, from, to, amount)` moved in `block`.
    fn native(
        block: &ScannedBlock,
        (tx, from, to, amount): (B256, Address, Address, U256),
    ) -> Self {
        Self {
            tx,
            asset: NATIVE_ASSET.to_owned(),
            from,
            to,
            amount,
            block: block.number,
            block_hash: block.hash,
        }
    }
}

/// Where the node's chain and the kept blocks below `start` part: the first block to scan
/// again; `None` when the newest kept block is still the node's.
async fn fork_point(
    scan: &Scan,
    chain: &Chain,
    client: &EvmClient,
    start: u64,
) -> Result<Option<u64>, WalletOpsError> {
    let kept = scan
        .store
        .deposit_blocks(chain.slug(), start.saturating_sub(KEEP_BLOCKS))
        .await?;
    let kept: Vec<_> = kept.into_iter().filter(|(n, _)| *n < start).collect();
    let Some(&(newest, _)) = kept.last() else {
        return Ok(None);
    };
    for (n, hash) in kept.iter().rev() {
        let theirs = client.block_hash(*n).await?;
        if theirs.is_some_and(|h| format!("{h:#x}") == *hash) {
            return Ok((*n != newest).then_some(n + 1));
        }
    }
    // Deeper than the blocks kept: everything kept is scanned again.
    Ok(kept.first().map(|(n, _)| *n))
}

#[cfg(test)]
mod tests {
    use super::not_served;

    #[test]
    fn a_missing_method_is_told_from_a_failing_node() {
        assert!(not_served(
            "the chain node failed to read a block's traces: server returned an error response: error code -32601: the method trace_block does not exist/is not available"
        ));
        assert!(not_served("Method not found"));
        assert!(!not_served(
            "the chain node failed to read a block's traces: timed out"
        ));
        assert!(!not_served("error code -32000: header not found"));
    }
}
