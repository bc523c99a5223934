//! What a payout is checked against before it is stored: the wallet's funds and the
//! spend limits of the key that makes it, for every item and for the items' total. On
//! Solana the rent of the recipients' new token accounts is SOL the payout sends (it goes
//! to whoever may close them): counted in the funds and against the key's SOL limit.

use alloy::primitives::U256;

use crate::{
    Core,
    auth::Caller,
    error::{Result, WalletOpsError},
    limits::batch::{self, Batch},
    requests::{Transfer, payouts::PayoutRequest},
};
use solana_pubkey::Pubkey;
use walletops_domain::WalletAddress;

/// What one item moves: its token (`None`: the native coin) and amount.
fn moved(transfer: &Transfer) -> (Option<WalletAddress>, U256) {
    match *transfer {
        Transfer::Evm { token, amount, .. } => (token.map(WalletAddress::Evm), amount),
        Transfer::Solana { mint, amount, .. } => {
            (mint.map(WalletAddress::Solana), U256::from(amount))
        }
    }
}

/// What `parsed`'s items move together, per asset (a payout moves few assets), the native
/// coin counting `rent` too.
fn totals(parsed: &PayoutRequest, rent: u64) -> Vec<(Option<WalletAddress>, U256)> {
    let mut totals: Vec<(Option<WalletAddress>, U256)> = Vec::new();
    let rent = (rent > 0).then(|| (None, U256::from(rent)));
    for (token, amount) in parsed
        .items
        .iter()
        .map(|(_, send, _)| moved(&send.transfer))
        .chain(rent)
    {
        match totals.iter_mut().find(|(t, _)| *t == token) {
            Some((_, total)) => *total = total.saturating_add(amount),
            None => totals.push((token, amount)),
        }
    }
    totals
}

impl Core {
    /// The lamports a Solana token payout `parsed` pays as the rent of its recipients' new
    /// token accounts; 0 for any other payout.
    pub(super) async fn payout_rent(&self, parsed: &PayoutRequest) -> Result<u64> {
        let chain = &parsed.items[0].1.chain;
        let mut by_mint: Vec<(Pubkey, Vec<Pubkey>)> = Vec::new();
        for (_, send, _) in &parsed.items {
            if let Transfer::Solana {
                to,
                mint: Some(mint),
                ..
            } = send.transfer
            {
                match by_mint.iter_mut().find(|(m, _)| *m == mint) {
                    Some((_, payees)) => payees.push(to),
                    None => by_mint.push((mint, vec![to])),
                }
            }
        }
        if by_mint.is_empty() {
            return Ok(0);
        }
        let solana = &self.transfers.solana;
        let client = solana.client(chain);
        let mints: Vec<Pubkey> = by_mint.iter().map(|(m, _)| *m).collect();
        let infos = client.mints(&mints).await?;
        let mut rent = 0u64;
        // A mint that is not one is left to the item's own check, which names it.
        for ((mint, payees), info) in by_mint.iter().zip(infos) {
            if let Some(info) = info {
                let more = solana.rent_for(&client, *mint, &info, payees).await?;
                rent = rent.saturating_add(more);
            }
        }
        Ok(rent)
    }

    /// Whether `wallet` holds, per asset, at least what `parsed`'s items move together,
    /// `rent` lamports besides.
    pub(super) async fn funds_cover(
        &self,
        parsed: &PayoutRequest,
        rent: u64,
        wallet: &walletops_domain::Wallet,
    ) -> Result<()> {
        let chain = &parsed.items[0].1.chain;
        let totals = totals(parsed, rent);
        let tokens: Vec<WalletAddress> = totals.iter().filter_map(|(t, _)| *t).collect();
        let held = self
            .balances
            .read(chain, wallet, &tokens, true, true)
            .await?;
        let mut short = Vec::new();
        for (token, needed) in &totals {
            let name = token.as_ref().map(ToString::to_string);
            let has = held
                .iter()
                .find(|b| match (&name, &b.token) {
                    (None, None) => true,
                    (Some(t), Some(h)) => t.eq_ignore_ascii_case(h),
                    _ => false,
                })
                .map_or(U256::ZERO, |b| b.raw);
            if has < *needed {
                short.push(format!(
                    "{}: the items move {needed}, the wallet holds {has}",
                    name.as_deref().unwrap_or("native")
                ));
            }
        }
        if short.is_empty() {
            Ok(())
        } else {
            Err(WalletOpsError::InsufficientFunds(format!(
                "the payout needs more than {} holds: {}",
                wallet.address,
                short.join("; ")
            )))
        }
    }

    /// Refuses a payout of a limited key that its limits would refuse, before anything is
    /// stored (`limits::batch`); a frozen key's, at once. The `rent` lamports of new token
    /// accounts count as SOL sent. Each item is judged again, on its simulated effects,
    /// when it is made.
    pub(super) async fn within_limits(
        &self,
        caller: &Caller,
        parsed: &PayoutRequest,
        rent: u64,
    ) -> Result<()> {
        let Some(key_id) = caller.key_id().filter(|_| caller.limited()) else {
            return Ok(());
        };
        if let Some(why) = self.policy.frozen(caller).await? {
            return Err(WalletOpsError::Forbidden(why));
        }
        let batch = Batch {
            chain: parsed.items[0].1.chain.slug(),
            writes: parsed
                .items
                .iter()
                .map(|(_, send, _)| moved(&send.transfer))
                .collect(),
            totals: totals(parsed, rent),
            rent,
        };
        batch::judge(&self.limits.of_key(key_id).await?, &batch)
    }
}
