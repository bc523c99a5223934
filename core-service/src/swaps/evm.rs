//! EVM swaps (1inch): funds and allowance read on chain, the swap built by the aggregator for
//! the wallet, guarded, then signed through the wallet's signing lane with the service's own
//! nonce, gas estimate and EIP-1559 fees; the aggregator's gas and gas price are not used.

use alloy::primitives::{Address, U256};

use super::{
    Swaps, bound,
    guard::{self, EvmTerms, SwapEffects},
    minimum, needs_fresh_quote,
    oneinch::{self, RouterTerms},
    record_request,
};
use crate::{
    error::{Result, WalletOpsError},
    requests::SwapRequest,
    transfers::{Prepared, evm::EvmIntent},
};
use walletops_chains::{
    effects::Foreseen,
    evm::EvmClient,
    trade::{
        EvmAggregator, EvmChainId, EvmQuoteRequest, EvmSwap, EvmSwapRequest, NATIVE_TOKEN,
        TradeError,
    },
};
use walletops_domain::{Asset, DelegatedWallet, SwapTerms, TxKind, WalletAddress};

/// The QUOTE_FAILED of an ERC20 sale the router may not spend yet.
fn allowance_shortfall(
    token: Address,
    spender: Address,
    allowed: Option<U256>,
    amount: U256,
) -> WalletOpsError {
    let allowed = allowed.map_or("no".to_owned(), |a| a.to_string());
    WalletOpsError::QuoteFailed(format!(
        "not enough allowance: the aggregator's router {spender} may spend {allowed} of token {token}, less than the amount {amount}; approve it first with POST /token/approve (token {token}, spender {spender})"
    ))
}

impl Swaps {
    /// The swap of `pair` from `wallet` on an EVM chain, built, simulated and guarded.
    pub(super) async fn evm(
        &self,
        req: &SwapRequest,
        pair: &EvmQuoteRequest,
        wallet: &DelegatedWallet,
        watch: Option<&[Address]>,
    ) -> Result<Prepared> {
        let chain = &req.trade.chain;
        let id = EvmChainId::of(chain)
            .ok_or_else(|| WalletOpsError::invalid("chain", "has no positive EVM chain id"))?;
        let aggregator = self.aggregators.evm(id)?;
        let address = wallet.wallet().address;
        let from = address.evm().ok_or_else(|| {
            WalletOpsError::invalid("from", format!("{address} is not an EVM wallet"))
        })?;
        let client = self.evm_clients.get(chain)?;
        let spender = aggregator.spender(id).await?;
        let routers = self.limits.evm_routers(id.get());
        guard::check_spender(spender, &routers)?;
        // Read before the aggregator is asked: a short balance is the caller's
        // INSUFFICIENT_FUNDS, and a missing allowance names what to approve, whatever words
        // the aggregator would have used.
        funds_and_allowance(&client, pair, (address, from), spender).await?;
        let (built, least) = built_and_bound(aggregator, (id, req, pair), from, spender).await?;
        guard::check_evm(
            &built.tx,
            &EvmTerms {
                wallet: from,
                src: pair.src,
                amount: pair.amount,
                spender,
                routers: &routers,
            },
        )?;
        oneinch::check_call(
            &built.tx.data,
            &RouterTerms {
                wallet: from,
                src: pair.src,
                dst: pair.dst,
                amount: pair.amount,
                bound: least,
                executors: &self.limits.evm_executors(id.get()),
            },
        )?;
        let terms = SwapTerms {
            from_token: pair.src.to_checksum(None),
            to_token: pair.dst.to_checksum(None),
            src_amount: pair.amount.to_string(),
            dst_amount: built.dst_amount.to_string(),
            min_dst_amount: least.to_string(),
        };
        let intent = EvmIntent {
            kind: TxKind::Swap,
            to: built.tx.to,
            value: built.tx.value,
            input: built.tx.data,
            asset: None,
            token: (pair.src != NATIVE_TOKEN).then_some(pair.src),
            amount: Some(pair.amount),
            beneficiary: None,
            token_debit: None,
            request: record_request(chain, wallet, req.slippage, &terms),
        };
        let prepared = self
            .transfers
            .evm
            .prepare(chain, wallet, intent, watch)
            .await?;
        // A swap signs only on effects that show it is the swap asked for.
        let effects = match &prepared.effects {
            Foreseen::Known(effects) => effects,
            Foreseen::Unknown(why) => return Err(guard::Refusal::unreadable(why).into()),
        };
        let asset = |token: Address| {
            if token == NATIVE_TOKEN {
                Asset::Native
            } else {
                Asset::Token(WalletAddress::Evm(token))
            }
        };
        guard::check_effects(
            effects,
            &SwapEffects {
                sold: (asset(pair.src), pair.amount),
                bought: (asset(pair.dst), least),
            },
        )?;
        Ok(Prepared::Evm(prepared))
    }
}

/// Refuses `pair`'s sale from the wallet at `address` (`from`) when the wallet holds less
/// than the amount, or, for an ERC20, lets `spender` take less of it.
async fn funds_and_allowance(
    client: &EvmClient,
    pair: &EvmQuoteRequest,
    (address, from): (WalletAddress, Address),
    spender: Address,
) -> Result<()> {
    if pair.src == NATIVE_TOKEN {
        let held = client.balance(from).await?;
        if held < pair.amount {
            return Err(WalletOpsError::InsufficientFunds(format!(
                "wallet {address} holds {held} wei, less than the {} to swap",
                pair.amount
            )));
        }
        return Ok(());
    }
    let (held, allowed) = futures::try_join!(
        client.token_balance(pair.src, from),
        client.allowance(pair.src, from, spender),
    )?;
    if let Some(held) = held
        && held < pair.amount
    {
        return Err(WalletOpsError::InsufficientFunds(format!(
            "wallet {address} holds {held} of token {}, less than the {} to swap",
            pair.src, pair.amount
        )));
    }
    if allowed.is_some_and(|a| a < pair.amount) {
        return Err(allowance_shortfall(pair.src, spender, allowed, pair.amount));
    }
    Ok(())
}

/// The swap of `req` (`pair` on chain `id`) built by `aggregator` for `from`, and the least
/// it must pay: the bound asked apart from the swap call (`bound`), which what the swap
/// call answers as its `dstAmount` only ever raises.
async fn built_and_bound(
    aggregator: &dyn EvmAggregator,
    (id, req, pair): (EvmChainId, &SwapRequest, &EvmQuoteRequest),
    from: Address,
    spender: Address,
) -> Result<(EvmSwap, U256)> {
    let request = EvmSwapRequest {
        trade: pair.clone(),
        from,
        slippage: req.slippage,
        disable_estimate: false,
    };
    let build = async {
        aggregator
            .build_swap(id, &request)
            .await
            .map_err(|e| match e {
                TradeError::Rejected { message, .. }
                    if message.to_ascii_lowercase().contains("allowance") =>
                {
                    allowance_shortfall(pair.src, spender, None, pair.amount)
                }
                e => e.into(),
            })
    };
    let fresh = async {
        if needs_fresh_quote(req) {
            Ok::<_, WalletOpsError>(Some(aggregator.quote(id, pair).await?.dst_amount))
        } else {
            Ok(None)
        }
    };
    let (built, fresh) = futures::try_join!(build, fresh)?;
    let least = bound(req, fresh).max(minimum(built.dst_amount, req.slippage));
    Ok((built, least))
}
