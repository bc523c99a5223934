//! A batch of writes of one key on one chain judged before any is made (a payout): each
//! write against the most per write, and the batch's total per asset against the 24-hour
//! budget and the approval threshold, with the words a single write is refused in. Each
//! write is judged again, on its simulated effects, when it is made (`policy/`).

use alloy::primitives::U256;
use walletops_domain::{SpendStanding, WalletAddress, asset_name};

use super::{over_budget, over_per_write};
use crate::error::{Result, WalletOpsError};

/// What a batch moves: each write's asset (`None`: the native coin) and amount, in order,
/// and the totals per asset, `rent` lamports of new token accounts counted as native coin.
#[derive(Debug)]
pub(crate) struct Batch<'a> {
    /// The chain's slug.
    pub(crate) chain: &'a str,
    /// Each write's asset and amount.
    pub(crate) writes: Vec<(Option<WalletAddress>, U256)>,
    /// The total per asset.
    pub(crate) totals: Vec<(Option<WalletAddress>, U256)>,
    /// Lamports of rent the batch pays besides (0 elsewhere).
    pub(crate) rent: u64,
}

/// Refuses `batch` when `limits` (a limited key's, with what they hold now) would refuse it:
/// a write above the most per write (named `items[i]`), an asset the key has no limit on, a
/// total above what the budget has left, or a total above the key's approval threshold
/// (each write below it would otherwise pass unapproved: a person makes such a batch).
pub(crate) fn judge(limits: &[SpendStanding], batch: &Batch<'_>) -> Result<()> {
    let chain = batch.chain;
    let standing = |token: Option<&WalletAddress>| {
        let asset = asset_name(token.copied());
        let rent = if token.is_none() && batch.rent > 0 {
            format!(
                " (the payout pays {} lamports of rent for its recipients' new token accounts)",
                batch.rent
            )
        } else {
            String::new()
        };
        limits
            .iter()
            .find(|s| s.limit.chain == chain && s.limit.asset == asset)
            .ok_or_else(|| {
                WalletOpsError::Forbidden(format!(
                    "spend limit: this key moves only assets it has a limit on, and has none on {asset} on {chain}{rent}"
                ))
            })
    };
    for (i, (token, amount)) in batch.writes.iter().enumerate() {
        if let Some(refusal) = over_per_write(&standing(token.as_ref())?.limit, *amount) {
            return Err(WalletOpsError::Forbidden(format!("items[{i}]: {refusal}")));
        }
    }
    for (token, total) in &batch.totals {
        let s = standing(token.as_ref())?;
        if let Some(refusal) = over_budget(&s.limit, s.spent_24h, *total) {
            return Err(WalletOpsError::Forbidden(format!(
                "the payout's total: {refusal}"
            )));
        }
        if let Some(threshold) = s.limit.approval_above.filter(|t| total > t) {
            return Err(WalletOpsError::Forbidden(format!(
                "the payout moves {total} of {} on {chain} in all, above this key's approval threshold of {threshold}: a person makes it in the dashboard or with `walletops payouts create`",
                s.limit.asset
            )));
        }
    }
    Ok(())
}
