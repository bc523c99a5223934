//! Quotes: the aggregator of the request's family prices the pair, and for an EVM ERC20
//! source with a `from` wallet, the chain itself says whether the aggregator's router may
//! already spend the amount (`allowance(from, spender)`), so the caller knows to approve it
//! first with POST /token/approve.

use std::sync::Arc;

use alloy::primitives::{Address, U256};

use crate::{
    chains::evm::EvmClients,
    error::{Result, WalletOpsError},
    requests::{QuoteRequest, TradePair},
    trade::{Aggregators, EvmChainId, NATIVE_TOKEN, TradeConfig},
    wallets::Wallets,
};
use uuid::Uuid;
use walletops_domain::WalletAddress;

/// A quote as the contract gives it.
#[derive(Debug, Clone, PartialEq)]
pub struct Quote {
    /// Source amount, base units.
    pub src_amount: String,
    /// Quoted destination amount, base units.
    pub dst_amount: String,
    /// The source token as the aggregator names it (never `NATIVE`).
    pub from_token: String,
    /// The destination token as the aggregator names it.
    pub to_token: String,
    /// For an EVM ERC20 source with `from`: whether an approval is needed, and of whom.
    pub approval: Option<Approval>,
    /// The aggregator's answer as it came.
    pub raw: serde_json::Value,
}

/// What a swap of an ERC20 source needs approved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Approval {
    /// The allowance is below the amount.
    pub needed: bool,
    /// The aggregator's router, which pulls the tokens.
    pub spender: Address,
}

/// Prices trades.
#[derive(Debug, Clone)]
pub struct Quotes {
    aggregators: Aggregators,
    /// Which routers a quote may name as spender (`TradeConfig::evm_routers`).
    trade: TradeConfig,
    evm_clients: Arc<EvmClients>,
    wallets: Wallets,
}

impl Quotes {
    /// Quotes from `aggregators`, whose spenders must be routers `trade` allows, allowances
    /// read through `evm_clients`.
    pub fn new(
        (aggregators, trade): (Aggregators, TradeConfig),
        evm_clients: Arc<EvmClients>,
        wallets: Wallets,
    ) -> Self {
        Self {
            aggregators,
            trade,
            evm_clients,
            wallets,
        }
    }

    /// `quote` for `user_id`, who must own the wallet it names as `from`, if any.
    pub async fn quote_for(&self, user_id: Uuid, req: &QuoteRequest) -> Result<Quote> {
        if let Some(from) = &req.from {
            self.wallets
                .resolve_owned(user_id, req.chain.family(), Some(from), "from", false)
                .await?;
        }
        self.quote(req).await
    }

    /// The quote of `req`. Every refusal or failure of the aggregator is QUOTE_FAILED with
    /// its own words; an aggregator not configured is SERVICE_UNAVAILABLE naming the option.
    pub async fn quote(&self, req: &QuoteRequest) -> Result<Quote> {
        match &req.pair {
            TradePair::Evm(pair) => {
                let id = EvmChainId::of(&req.chain).ok_or_else(|| {
                    WalletOpsError::invalid("chain", "has no positive EVM chain id")
                })?;
                let aggregator = self.aggregators.evm(id)?;
                let owner = req.from.as_ref().and_then(WalletAddress::evm);
                let owner = owner.filter(|_| pair.src != NATIVE_TOKEN);
                let spender = async {
                    if owner.is_none() {
                        return Ok(None);
                    }
                    let spender = aggregator.spender(id).await?;
                    if !self.trade.evm_routers(id.get()).contains(&spender) {
                        return Err(WalletOpsError::QuoteFailed(format!(
                            "the aggregator names {spender} as its router, which is neither a built-in router of this chain (1inch v6) nor on trade.evm.allowed_routers: it is not shown as a spender to approve"
                        )));
                    }
                    Ok(Some(spender))
                };
                let priced = async { Ok::<_, WalletOpsError>(aggregator.quote(id, pair).await?) };
                // The price and the spender asked at once; a router that may not be shown as a
                // spender is the answer whatever the price says (the same refusal every time),
                // and a refused price does not wait for the allowance's read.
                let (quote, spender) = futures::join!(priced, spender);
                let spender = spender?;
                let quote = quote?;
                let approval = match (owner, spender) {
                    (Some(owner), Some(spender)) => {
                        let client = self.evm_clients.get(&req.chain)?;
                        let allowance = client
                            .allowance(pair.src, owner, spender)
                            .await?
                            .unwrap_or(U256::ZERO);
                        Some(Approval {
                            needed: allowance < pair.amount,
                            spender,
                        })
                    }
                    _ => None,
                };
                Ok(Quote {
                    src_amount: pair.amount.to_string(),
                    dst_amount: quote.dst_amount.to_string(),
                    from_token: pair.src.to_checksum(None),
                    to_token: pair.dst.to_checksum(None),
                    approval,
                    raw: quote.raw,
                })
            }
            TradePair::Solana(pair) => {
                let quote = self.aggregators.solana().quote(pair).await?;
                Ok(Quote {
                    src_amount: quote.in_amount.to_string(),
                    dst_amount: quote.out_amount.to_string(),
                    from_token: quote.input_mint.to_string(),
                    to_token: quote.output_mint.to_string(),
                    approval: None,
                    raw: quote.raw,
                })
            }
        }
    }
}
