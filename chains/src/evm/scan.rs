//! The reads of a deposit scan: blocks with their transactions (native value sent to the
//! wallets), `Transfer` logs to the wallets over a range of blocks, in ranges and address
//! sets the node accepts.

use alloy::{
    consensus::Transaction as _,
    eips::BlockNumberOrTag,
    primitives::{Address, B256, U256},
    providers::Provider,
    rpc::types::Filter,
    sol,
    sol_types::SolEvent,
};

use super::{EvmClient, timed};
use crate::ChainError;

sol! {
    /// ERC20's transfer event.
    interface Erc20 {
        event Transfer(address indexed from, address indexed to, uint256 value);
    }
}

/// A block as a scan reads it.
#[derive(Debug, Clone)]
pub struct ScannedBlock {
    /// Its number.
    pub number: u64,
    /// Its hash.
    pub hash: B256,
    /// Its top-level transactions that send value, as (hash, from, to, value).
    pub value_transfers: Vec<(B256, Address, Address, U256)>,
}

/// An ERC20 `Transfer` log.
#[derive(Debug, Clone)]
pub struct TransferLog {
    /// The token.
    pub token: Address,
    /// Sender.
    pub from: Address,
    /// Recipient.
    pub to: Address,
    /// Base units.
    pub value: U256,
    /// Its transaction.
    pub tx_hash: B256,
    /// Its block.
    pub block: u64,
    /// Its block's hash.
    pub block_hash: B256,
    /// Its place in the block.
    pub log_index: u64,
}

impl EvmClient {
    /// Block `number` with its transactions; `None`: the node has none such yet.
    pub async fn scanned_block(&self, number: u64) -> Result<Option<ScannedBlock>, ChainError> {
        let block = timed(
            "read a block",
            self.provider
                .get_block_by_number(BlockNumberOrTag::Number(number))
                .full()
                .into_future(),
        )
        .await?;
        let Some(block) = block else {
            return Ok(None);
        };
        let value_transfers = block
            .transactions
            .as_transactions()
            .unwrap_or_default()
            .iter()
            .filter_map(|tx| {
                let to = tx.to()?;
                let value = tx.value();
                (!value.is_zero()).then(|| (*tx.inner.tx_hash(), tx.inner.signer(), to, value))
            })
            .collect();
        Ok(Some(ScannedBlock {
            number,
            hash: block.header.hash,
            value_transfers,
        }))
    }

    /// The hash of block `number`; `None`: the node has none such.
    pub async fn block_hash(&self, number: u64) -> Result<Option<B256>, ChainError> {
        let block = timed(
            "read a block header",
            self.provider
                .get_block_by_number(BlockNumberOrTag::Number(number))
                .into_future(),
        )
        .await?;
        Ok(block.map(|b| b.header.hash))
    }

    /// The `Transfer` logs to any of `to` in blocks `from..=upto`.
    pub async fn transfer_logs(
        &self,
        (from, upto): (u64, u64),
        to: &[Address],
    ) -> Result<Vec<TransferLog>, ChainError> {
        let recipients: Vec<B256> = to.iter().map(|a| a.into_word()).collect();
        let filter = Filter::new()
            .from_block(from)
            .to_block(upto)
            .event_signature(Erc20::Transfer::SIGNATURE_HASH)
            .topic2(recipients);
        let logs = timed("read logs", self.provider.get_logs(&filter)).await?;
        Ok(logs
            .into_iter()
            .filter(|log| !log.removed)
            .filter_map(|log| {
                let decoded = Erc20::Transfer::decode_log(&log.inner).ok()?;
                Some(TransferLog {
                    token: log.address(),
                    from: decoded.from,
                    to: decoded.to,
                    value: decoded.value,
                    tx_hash: log.transaction_hash?,
                    block: log.block_number?,
                    block_hash: log.block_hash?,
                    log_index: log.log_index?,
                })
            })
            .collect())
    }

    /// The value moved by internal calls in block `number` (not the transactions' own), as
    /// (transaction, from, to, value), from the node's `trace_block`: calls that failed, or
    /// whose caller failed, moved nothing and are left out.
    pub async fn internal_transfers(
        &self,
        number: u64,
    ) -> Result<Vec<(B256, Address, Address, U256)>, ChainError> {
        let traces: Vec<serde_json::Value> = timed(
            "read a block's traces",
            self.provider
                .raw_request("trace_block".into(), (format!("{number:#x}"),)),
        )
        .await?;
        let path = |t: &serde_json::Value| -> Vec<u64> {
            t["traceAddress"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(serde_json::Value::as_u64)
                .collect()
        };
        // Frames that failed, per transaction: everything under them was undone.
        let failed: Vec<(String, Vec<u64>)> = traces
            .iter()
            .filter(|t| !t["error"].is_null())
            .map(|t| {
                (
                    t["transactionHash"].as_str().unwrap_or_default().to_owned(),
                    path(t),
                )
            })
            .collect();
        Ok(traces
            .iter()
            .filter(|t| t["type"] == "call" && t["action"]["callType"] == "call")
            .filter_map(|t| {
                let at = path(t);
                let tx = t["transactionHash"].as_str()?;
                if at.is_empty() || failed.iter().any(|(h, p)| h == tx && at.starts_with(p)) {
                    return None;
                }
                let action = &t["action"];
                let value: U256 = action["value"].as_str()?.parse().ok()?;
                (!value.is_zero()).then_some(())?;
                Some((
                    tx.parse().ok()?,
                    action["from"].as_str()?.parse().ok()?,
                    action["to"].as_str()?.parse().ok()?,
                    value,
                ))
            })
            .collect())
    }

    /// Whether transaction `hash` succeeded; `None`: no receipt.
    pub async fn succeeded(&self, hash: B256) -> Result<Option<bool>, ChainError> {
        Ok(self.receipt(hash).await?.map(|r| r.status()))
    }
}
