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
use crate::error::WalletOpsError;

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
    pub async fn scanned_block(&self, number: u64) -> Result<Option<ScannedBlock>, WalletOpsError> {
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
    pub async fn block_hash(&self, number: u64) -> Result<Option<B256>, WalletOpsError> {
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
    ) -> Result<Vec<TransferLog>, WalletOpsError> {
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

    /// Whether transaction `hash` succeeded; `None`: no receipt.
    pub async fn succeeded(&self, hash: B256) -> Result<Option<bool>, WalletOpsError> {
        Ok(self.receipt(hash).await?.map(|r| r.status()))
    }
}
