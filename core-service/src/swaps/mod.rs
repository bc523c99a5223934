//! Swaps: the aggregator of the request's family builds the swap for the wallet, the swap
//! guard checks what it built against the request, and the chain's write pipeline signs,
//! stores (claiming the Idempotency-Key) and sends it exactly as it does a transfer. The
//! monitor follows it to a final state like any record.
//!
//! **Invariant:** nothing is signed before the wallet's funds (and, for an ERC20 sale, its
//! allowance for the aggregator's router) were read from the chain and the guard passed the
//! transaction; every refusal before that leaves no record, no nonce used and the key free.

mod evm;
pub mod guard;
mod oneinch;
mod solana;

use std::sync::Arc;

use alloy::primitives::U256;

use crate::{
    error::Result,
    requests::{SwapRequest, TradePair},
    transfers::{Prepared, Transfers},
};

use walletops_chains::{
    Chain,
    evm::EvmClients,
    trade::{Aggregators, Slippage, TradeConfig},
};
use walletops_domain::{DelegatedWallet, SwapTerms};

/// Executes swaps.
#[derive(Debug, Clone)]
pub struct Swaps {
    aggregators: Aggregators,
    transfers: Transfers,
    evm_clients: Arc<EvmClients>,
    /// The routers, programs and caps the guard allows.
    limits: TradeConfig,
}

impl Swaps {
    /// Swaps built by `aggregators`, checked against `limits`, sent through `transfers`.
    pub fn new(
        aggregators: Aggregators,
        transfers: Transfers,
        evm_clients: Arc<EvmClients>,
        limits: TradeConfig,
    ) -> Self {
        Self {
            aggregators,
            transfers,
            evm_clients,
            limits,
        }
    }

    /// Builds the swap `req` from `wallet` through its aggregator and guards it: ready to
    /// judge and sign (`Transfers::execute`).
    /// `watch`: the tokens read around an EVM swap's simulation (`EvmPipeline::prepare`).
    pub async fn prepare(
        &self,
        req: &SwapRequest,
        wallet: &DelegatedWallet,
        watch: Option<&[alloy::primitives::Address]>,
    ) -> Result<Prepared> {
        match &req.trade.pair {
            TradePair::Evm(pair) => self.evm(req, pair, wallet, watch).await,
            TradePair::Solana(pair) => self.solana(req, pair, wallet).await,
        }
    }
}

/// `quoted` less `slippage`, rounded down: the least a swap at that slippage pays.
pub fn minimum(quoted: U256, slippage: Slippage) -> U256 {
    const BPS: u64 = 10_000;
    quoted * U256::from(BPS - u64::from(slippage.bps())) / U256::from(BPS)
}

/// The least swap `req` must guarantee, the aggregator's answer to the swap call aside: the
/// largest of its named quote less the slippage, its `minDstAmount`, and `fresh` (a quote
/// asked apart from the swap call, when it names neither) less the slippage.
fn bound(req: &SwapRequest, fresh: Option<U256>) -> U256 {
    [
        req.quoted.map(|q| minimum(q, req.slippage)),
        req.min_dst,
        fresh.map(|q| minimum(q, req.slippage)),
    ]
    .into_iter()
    .flatten()
    .max()
    .unwrap_or(U256::ZERO)
}

/// Whether a fresh quote must be asked for `req`'s bound: it names no quote and no minimum.
fn needs_fresh_quote(req: &SwapRequest) -> bool {
    req.quoted.is_none() && req.min_dst.is_none()
}

/// The request kept with a swap's record: who swapped on which chain at what slippage, and
/// the terms (`SwapTerms`, read back for GET /tx).
fn record_request(
    chain: &Chain,
    wallet: &DelegatedWallet,
    slippage: Slippage,
    terms: &SwapTerms,
) -> serde_json::Value {
    let mut request = serde_json::json!({
        "chain": chain.slug(),
        "from": wallet.wallet().address.to_string(),
        "slippage": slippage.percent(),
    });
    if let (Some(map), Ok(serde_json::Value::Object(terms))) =
        (request.as_object_mut(), serde_json::to_value(terms))
    {
        map.extend(terms);
    }
    request
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_minimum_is_the_quote_less_the_slippage_rounded_down() {
        let one = Slippage::DEFAULT;
        assert_eq!(minimum(U256::from(1_000), one), U256::from(990));
        assert_eq!(minimum(U256::from(999), one), U256::from(989));
        let half = Slippage::from_bps(5_000).expect("50%");
        assert_eq!(minimum(U256::from(7), half), U256::from(3));
    }
}
