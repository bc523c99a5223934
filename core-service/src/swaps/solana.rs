//! Solana swaps (Jupiter): funds read on chain, the route quoted and built by the aggregator
//! for the wallet as fee payer, guarded, then signed as built (the wallet's signature is the
//! one it lacks), stored and sent. A swap is never re-signed: its blockhash bounds how long
//! the quoted price may be taken, and one that expires unseen ends FAILED.

use solana_pubkey::Pubkey;
use uuid::Uuid;

use super::{
    Swaps, bound,
    guard::{self, Refusal, SolanaTerms, SwapEffects},
    minimum, record_request,
};
use alloy::primitives::U256;

use crate::{
    error::{Result, WalletOpsError},
    requests::SwapRequest,
    transfers::{
        Prepared,
        solana::{self, Unsigned},
    },
};

use walletops_chains::{
    effects::{Foreseen, solana::asset},
    trade::{SolanaQuoteRequest, WRAPPED_SOL_MINT},
};
use walletops_domain::{DelegatedWallet, SwapTerms, TxKind};
use walletops_store::NewTransaction;

/// The programs a swap transaction invokes around its route: the route's own program is the
/// first it invokes that is none of these.
const PLUMBING: [Pubkey; 6] = [
    solana_compute_budget_interface::ID,
    solana_system_interface::program::ID,
    spl_token_interface::ID,
    spl_token_2022_interface::ID,
    spl_associated_token_account_interface::program::ID,
    spl_memo_interface::v3::ID,
];

impl Swaps {
    /// The swap of `pair` from `wallet` on Solana mainnet, built and guarded.
    pub(super) async fn solana(
        &self,
        req: &SwapRequest,
        pair: &SolanaQuoteRequest,
        wallet: &DelegatedWallet,
    ) -> Result<Prepared> {
        let chain = &req.trade.chain;
        let w = wallet.wallet();
        let from = w.address.solana().ok_or_else(|| {
            WalletOpsError::invalid("from", format!("{} is not a Solana wallet", w.address))
        })?;
        let client = self.transfers.solana.client(chain);
        let sells_sol = pair.input_mint == WRAPPED_SOL_MINT;
        let lamports = client.balance(&from).await?;
        let held = if sells_sol {
            lamports
        } else {
            client
                .holdings(&from)
                .await?
                .into_iter()
                .filter(|h| h.mint == pair.input_mint)
                .map(|h| h.amount)
                .sum()
        };
        if held < pair.amount {
            return Err(WalletOpsError::InsufficientFunds(format!(
                "wallet {} holds {held} of {}, less than the {} to swap",
                w.address, pair.input_mint, pair.amount
            )));
        }
        let aggregator = self.aggregators.solana();
        // The quote is asked apart from the swap call, and its own minimum is held to the
        // bound: a route built from it reverts only below `otherAmountThreshold`.
        let quote = aggregator.quote(pair).await?;
        let least = bound(req, Some(U256::from(quote.out_amount)))
            .max(minimum(U256::from(quote.out_amount), req.slippage));
        if U256::from(quote.other_amount_threshold) < least {
            return Err(Refusal::new(
                "minimum",
                format!(
                    "its otherAmountThreshold is {}, less than the {least} the quote, minDstAmount and slippage require",
                    quote.other_amount_threshold
                ),
            )
            .into());
        }
        let built = aggregator.build_swap(&quote, &from).await?;
        let limits = &self.limits.solana;
        let cost = guard::check_solana(
            &built.transaction,
            &SolanaTerms {
                wallet: from,
                allowed_programs: &limits.allowed_programs,
                max_fee_lamports: limits.max_fee_lamports,
                max_compute_units: limits.max_compute_units,
            },
        )?;
        let sol_out = if sells_sol { pair.amount } else { 0 };
        let needed = sol_out.saturating_add(cost.fee_lamports);
        if lamports < needed {
            return Err(WalletOpsError::InsufficientFunds(format!(
                "wallet {} holds {lamports} lamports, less than the amount sold and the fee ({needed})",
                w.address
            )));
        }
        let message = &built.transaction.message;
        let keys = message.static_account_keys();
        let programs: Vec<Pubkey> = message
            .instructions()
            .iter()
            .filter_map(|ix| keys.get(usize::from(ix.program_id_index)).copied())
            .collect();
        let route = programs
            .iter()
            .find(|p| !PLUMBING.contains(p))
            .or(programs.last())
            .copied()
            .unwrap_or(quote.output_mint);
        let terms = SwapTerms {
            from_token: quote.input_mint.to_string(),
            to_token: quote.output_mint.to_string(),
            src_amount: quote.in_amount.to_string(),
            dst_amount: quote.out_amount.to_string(),
            min_dst_amount: least.to_string(),
        };
        let valid_until = self.valid_until(&client, &built).await?;
        let record = NewTransaction {
            id: Uuid::now_v7(),
            user_id: w.user_id,
            wallet_id: w.id,
            chain: chain.slug().to_owned(),
            chain_id: chain.chain_id(),
            kind: TxKind::Swap,
            from: w.address,
            to: route.to_string(),
            asset: None,
            token: (!sells_sol).then(|| quote.input_mint.to_string()),
            amount: Some(quote.in_amount.to_string()),
            request: record_request(chain, wallet, req.slippage, &terms),
            hash: String::new(),
            nonce: None,
            signed_payload: Vec::new(),
            idempotency_key: None,
            note: Some(format!(
                "signed as the aggregator built it ({} lamports in fees, {} compute units), its blockhash valid to block height {valid_until}",
                cost.fee_lamports, cost.compute_units
            )),
            valid_until: Some(valid_until),
            held_until: None,
            simulated_effects: None,
            guarded: false,
        };
        // What the route does to the wallet, read from its simulation: exactly the amount
        // sold leaves, at least the minimum comes in, nothing else moves or changes hands.
        let (effects, _) = client.simulate(&from, &built.transaction).await?;
        match &effects {
            Foreseen::Known(seen) => {
                guard::check_effects(
                    seen,
                    &SwapEffects {
                        sold: (asset(quote.input_mint), U256::from(quote.in_amount)),
                        bought: (asset(quote.output_mint), least),
                    },
                )?;
                guard::check_sinks(seen)?;
            }
            Foreseen::Unknown(why) => {
                return Err(guard::Refusal::unreadable(why).into());
            }
        }
        Ok(Prepared::Solana(solana::Prepared {
            chain: chain.clone(),
            wallet: wallet.clone(),
            unsigned: Unsigned::Built(built.transaction),
            record,
            effects,
            fee: crate::transfers::Fee {
                max: U256::from(cost.fee_lamports),
                units: u64::from(cost.compute_units),
            },
        }))
    }

    /// The last block height at which `built` may land, read from the node: the
    /// aggregator's `lastValidBlockHeight` is believed only as far as the node allows, and a
    /// blockhash the node no longer takes refuses the swap.
    async fn valid_until(
        &self,
        client: &walletops_chains::solana::SolanaClient,
        built: &walletops_chains::trade::SolanaSwap,
    ) -> Result<u64> {
        let hash = *built.transaction.message.recent_blockhash();
        let (latest, latest_valid) = client.blockhash().await?;
        if hash == latest {
            return Ok(latest_valid);
        }
        if !client.blockhash_valid(&hash).await? {
            return Err(Refusal::new(
                "blockhash",
                format!("its blockhash {hash} is not valid on the node"),
            )
            .into());
        }
        // No blockhash valid now outlives the latest one.
        Ok(built.last_valid_block_height.min(latest_valid))
    }
}
