//! The Solana side of trading: what the service asks of a Solana swap aggregator, and what
//! it gets back.

use async_trait::async_trait;
use serde_json::Value;
use solana_pubkey::Pubkey;
use solana_transaction::versioned::VersionedTransaction;

use super::{Slippage, TradeError};

/// The wrapped SOL mint: what the spec's `NATIVE` resolves to on Solana, and how aggregators
/// name native SOL.
pub const WRAPPED_SOL_MINT: Pubkey = crate::effects::solana::WRAPPED_SOL;

/// A price request: sell `amount` of `input_mint` for `output_mint`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SolanaQuoteRequest {
    /// The mint sold; `WRAPPED_SOL_MINT` for SOL.
    pub input_mint: Pubkey,
    /// The mint bought; `WRAPPED_SOL_MINT` for SOL.
    pub output_mint: Pubkey,
    /// How much is sold, in base units.
    pub amount: u64,
    /// How far below the quote the output may fall; part of the quote, as the swap built
    /// from it enforces it.
    pub slippage: Slippage,
    /// Only these venues (aggregator labels); empty: all.
    pub dexes: Vec<String>,
    /// Never these venues.
    pub exclude_dexes: Vec<String>,
}

/// A price, which a swap is then built from.
#[derive(Debug, Clone, PartialEq)]
pub struct SolanaQuote {
    /// The mint sold.
    pub input_mint: Pubkey,
    /// The mint bought.
    pub output_mint: Pubkey,
    /// How much is sold, in base units.
    pub in_amount: u64,
    /// What it buys, before slippage.
    pub out_amount: u64,
    /// The least it buys after slippage: the swap fails on chain below this.
    pub other_amount_threshold: u64,
    /// The aggregator's answer as it came: the swap build sends it back unmodified.
    pub raw: Value,
}

/// A built swap: a transaction the wallet still has to sign.
#[derive(Debug, Clone, PartialEq)]
pub struct SolanaSwap {
    /// The transaction, with the wallet as fee payer and its signature slot empty. Nothing
    /// in it is checked yet.
    pub transaction: VersionedTransaction,
    /// The last block height at which its blockhash is valid.
    pub last_valid_block_height: u64,
    /// The priority fee it pays, in lamports.
    pub prioritization_fee_lamports: u64,
    /// The compute unit limit it sets.
    pub compute_unit_limit: u32,
    /// The aggregator's answer as it came.
    pub raw: Value,
}

/// A Solana swap aggregator: Jupiter.
#[async_trait]
pub trait SolanaAggregator: Send + Sync {
    /// Prices `request`. Retried on transient failures: a quote moves nothing.
    async fn quote(&self, request: &SolanaQuoteRequest) -> Result<SolanaQuote, TradeError>;

    /// Builds the swap of `quote` for `user`, who pays the fee and signs. Not retried once
    /// the aggregator has answered.
    async fn build_swap(
        &self,
        quote: &SolanaQuote,
        user: &Pubkey,
    ) -> Result<SolanaSwap, TradeError>;
}

/// Keeps `SolanaAggregator` usable as a trait object.
struct _ObjectSafe(Box<dyn SolanaAggregator>);
