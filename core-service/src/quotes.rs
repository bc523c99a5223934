//! Quotes: the aggregator of the request's family prices the pair, and for an EVM ERC20
//! source with a `from` wallet, the chain itself says whether the aggregator's router may
//! already spend the amount (`allowance(from, spender)`), so the caller knows to approve it
//! first with POST /token/approve.
//!
//! Every quote given is kept with its id (`quoteId`) for 60 seconds, bound to the key that
//! asked: a swap naming it must pay at least its `dstAmount` less the swap's slippage,
//! whatever the aggregator says when it builds the swap.

use std::sync::Arc;

use alloy::primitives::{Address, U256};

use crate::{
    auth::Caller,
    error::{Result, WalletOpsError},
    requests::{QuoteRequest, SwapRequest, TradePair},
    wallets::Wallets,
};

use uuid::Uuid;
use walletops_chains::{
    evm::EvmClients,
    trade::{Aggregators, EvmChainId, NATIVE_TOKEN, TradeConfig},
};
use walletops_domain::WalletAddress;
use walletops_store::{QuoteRecord, Store};

/// How long a swap may name a quote.
pub const QUOTE_VALIDITY: chrono::Duration = chrono::Duration::seconds(60);

/// A quote as the contract gives it.
#[derive(Debug, Clone, PartialEq)]
pub struct Quote {
    /// Its id, which a swap may name as `quoteId` (`QUOTE_VALIDITY`); nil until kept.
    pub id: Uuid,
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
    store: Store,
}

/// What a quote prices, as kept and compared: the chain, the tokens and the amount sold.
fn priced(req: &QuoteRequest) -> (String, String, String, String) {
    let (from, to, amount) = match &req.pair {
        TradePair::Evm(p) => (
            WalletAddress::Evm(p.src),
            WalletAddress::Evm(p.dst),
            p.amount.to_string(),
        ),
        TradePair::Solana(p) => (
            WalletAddress::Solana(p.input_mint),
            WalletAddress::Solana(p.output_mint),
            p.amount.to_string(),
        ),
    };
    (
        req.chain.slug().to_owned(),
        from.to_string(),
        to.to_string(),
        amount,
    )
}

impl Quotes {
    /// Quotes from `aggregators`, whose spenders must be routers `trade` allows, allowances
    /// read through `evm_clients`.
    pub fn new(
        (aggregators, trade): (Aggregators, TradeConfig),
        evm_clients: Arc<EvmClients>,
        (wallets, store): (Wallets, Store),
    ) -> Self {
        Self {
            aggregators,
            trade,
            evm_clients,
            wallets,
            store,
        }
    }

    /// `quote` for `caller`, who must own the wallet it names as `from`, if any; kept under
    /// its id for a swap of `caller`'s to name.
    pub async fn quote_for(&self, caller: &Caller, req: &QuoteRequest) -> Result<Quote> {
        if let Some(from) = &req.from {
            self.wallets
                .resolve_owned(
                    caller.user_id,
                    req.chain.family(),
                    Some(from),
                    "from",
                    false,
                )
                .await?;
        }
        let mut quote = self.quote(req).await?;
        let (chain, from_token, to_token, amount) = priced(req);
        let now = crate::clock::now();
        let record = QuoteRecord {
            id: Uuid::now_v7(),
            user_id: caller.user_id,
            key_id: caller.key_id(),
            chain,
            from_token,
            to_token,
            amount,
            dst_amount: quote.dst_amount.clone(),
            expires_at: now + QUOTE_VALIDITY,
        };
        self.store.insert_quote(&record, now).await?;
        quote.id = record.id;
        Ok(quote)
    }

    /// The amount quoted to come in by the quote `req` names (`quoteId`), once it is known
    /// to be `caller`'s (same key), still valid (unless `held`: an approved swap is judged
    /// after its approval), and of this very trade; `None` when it names none.
    pub async fn named_by(
        &self,
        caller: &Caller,
        req: &SwapRequest,
        held: bool,
    ) -> Result<Option<U256>> {
        let Some(id) = req.quote_id else {
            return Ok(None);
        };
        let bad = |why: String| WalletOpsError::invalid("quoteId", why);
        let record = self
            .store
            .quote(caller.user_id, id)
            .await?
            .ok_or_else(|| bad(format!("no quote of yours has the id {id}")))?;
        if record.key_id != caller.key_id() {
            return Err(bad(format!(
                "quote {id} was given to another API key: a swap names only the quotes of its own key"
            )));
        }
        if !held && record.expires_at < crate::clock::now() {
            return Err(bad(format!(
                "quote {id} expired at {} (a quote may be named for {} seconds): ask for a new one",
                record
                    .expires_at
                    .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                QUOTE_VALIDITY.num_seconds()
            )));
        }
        let (chain, from_token, to_token, amount) = priced(&req.trade);
        if (
            &record.chain,
            &record.from_token,
            &record.to_token,
            &record.amount,
        ) != (&chain, &from_token, &to_token, &amount)
        {
            return Err(bad(format!(
                "quote {id} priced {} of {} for {} on {}, not this swap's {amount} of {from_token} for {to_token} on {chain}",
                record.amount, record.from_token, record.to_token, record.chain
            )));
        }
        record.dst_amount.parse().map(Some).map_err(|_| {
            WalletOpsError::Internal(anyhow::anyhow!("quote {id}'s dst_amount is unreadable"))
        })
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
                    id: Uuid::nil(),
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
                    id: Uuid::nil(),
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
