//! The EVM side of trading: what the service asks of an EVM swap aggregator, and what it
//! gets back.

use alloy::primitives::{Address, Bytes, U256, address};
use async_trait::async_trait;
use serde_json::Value;

use super::{Slippage, TradeError};
use crate::Chain;
use walletops_domain::ChainFamily;

/// The address aggregators use for a chain's native coin, in `src`, `dst` and in the
/// quote's `fromToken`/`toToken` (what the spec's `NATIVE` resolves to).
pub const NATIVE_TOKEN: Address = address!("EeeeeEeeeEeEeeEeEeEeeEEEeeeeEeeeeeeeEEeE");

/// The id of an EVM chain, as aggregators put it in their paths: positive, from a resolved
/// chain of the EVM family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EvmChainId(u64);

impl EvmChainId {
    /// The id of `chain`, if it is an EVM chain.
    pub fn of(chain: &Chain) -> Option<Self> {
        match chain.family() {
            ChainFamily::Evm => u64::try_from(chain.chain_id())
                .ok()
                .filter(|id| *id > 0)
                .map(Self),
            ChainFamily::Solana => None,
        }
    }

    /// A chain id known to be an EVM one (tests, the local playground).
    pub const fn new(id: u64) -> Self {
        Self(id)
    }

    /// The id.
    pub fn get(self) -> u64 {
        self.0
    }
}

/// A price request: sell `amount` of `src` for `dst`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvmQuoteRequest {
    /// The token sold; `NATIVE_TOKEN` for the native coin.
    pub src: Address,
    /// The token bought; `NATIVE_TOKEN` for the native coin.
    pub dst: Address,
    /// How much of `src` is sold, in base units.
    pub amount: U256,
    /// Whether the answer should include a gas estimate.
    pub include_gas: bool,
    /// Only these liquidity sources (aggregator ids); empty: all.
    pub protocols: Vec<String>,
    /// Never these liquidity sources.
    pub excluded_protocols: Vec<String>,
}

/// A price.
#[derive(Debug, Clone, PartialEq)]
pub struct EvmQuote {
    /// What `amount` of `src` buys of `dst`, in base units, before slippage.
    pub dst_amount: U256,
    /// Estimated gas of the swap, when asked for.
    pub gas: Option<u64>,
    /// The aggregator's answer as it came (the contract returns it as `raw`).
    pub raw: Value,
}

/// A swap build request: the trade, and who makes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvmSwapRequest {
    /// What is sold for what.
    pub trade: EvmQuoteRequest,
    /// The wallet that signs and sends the swap, and receives `dst`.
    pub from: Address,
    /// How far below the quote the output may fall before the swap reverts.
    pub slippage: Slippage,
    /// Skip the aggregator's simulation. Then it checks neither balance nor allowance, and
    /// a swap short of either fails on chain instead of being refused here: leave it off
    /// unless the caller has checked both.
    pub disable_estimate: bool,
}

/// A built swap, not yet signed.
#[derive(Debug, Clone, PartialEq)]
pub struct EvmSwap {
    /// The quoted output, before slippage.
    pub dst_amount: U256,
    /// The transaction to sign.
    pub tx: EvmSwapTx,
    /// The aggregator's answer as it came.
    pub raw: Value,
}

/// The transaction of a built swap, as the aggregator made it: nothing here is checked yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvmSwapTx {
    /// The sender the aggregator built for.
    pub from: Address,
    /// The contract called: the router (the spender) for a real aggregator.
    pub to: Address,
    /// The call data.
    pub data: Bytes,
    /// Native coin sent along: the amount when selling the native coin, else zero.
    pub value: U256,
    /// The aggregator's gas estimate (0 when it did not estimate).
    pub gas: u64,
    /// The gas price the aggregator assumed, in wei.
    pub gas_price: U256,
}

/// Whether a wallet must approve before it can sell a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Approval {
    /// The address to approve: the aggregator's router.
    pub spender: Address,
    /// What the wallet has approved it for now.
    pub allowance: U256,
    /// Whether that is less than the amount to sell.
    pub needed: bool,
}

/// An EVM swap aggregator: 1inch, or a server speaking its API (the playground's local pool).
#[async_trait]
pub trait EvmAggregator: Send + Sync {
    /// Prices `request` on `chain`, without building anything. Retried on transient
    /// failures: a quote moves nothing.
    async fn quote(
        &self,
        chain: EvmChainId,
        request: &EvmQuoteRequest,
    ) -> Result<EvmQuote, TradeError>;

    /// Builds the swap transaction for `request.from`. Not retried once the aggregator has
    /// answered. An ERC20 sale without enough allowance is `Rejected` with the aggregator's
    /// `Not enough allowance` message (unless `disable_estimate` is set).
    async fn build_swap(
        &self,
        chain: EvmChainId,
        request: &EvmSwapRequest,
    ) -> Result<EvmSwap, TradeError>;

    /// The address a wallet must approve before selling an ERC20: the router.
    async fn spender(&self, chain: EvmChainId) -> Result<Address, TradeError>;

    /// What `wallet` has approved the spender for, of `token`.
    async fn allowance(
        &self,
        chain: EvmChainId,
        token: Address,
        wallet: Address,
    ) -> Result<U256, TradeError>;

    /// Whether selling `amount` of `token` from `wallet` needs an approval first, and of
    /// whom: the spec's `approvalNeeded` and `spender`. Asks for both at once.
    async fn approval(
        &self,
        chain: EvmChainId,
        token: Address,
        wallet: Address,
        amount: U256,
    ) -> Result<Approval, TradeError> {
        let (spender, allowance) =
            futures::try_join!(self.spender(chain), self.allowance(chain, token, wallet))?;
        Ok(Approval {
            spender,
            allowance,
            needed: allowance < amount,
        })
    }
}

/// Keeps `EvmAggregator` usable as a trait object.
struct _ObjectSafe(Box<dyn EvmAggregator>);
