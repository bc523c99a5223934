//! `getRecentPrioritizationFees`: the compute-unit prices recent blocks took, as the real
//! node answers (`[{slot, prioritizationFee}]`, at most 128 addresses asked about). The
//! prices are the ones a test sets (`litesvm_setRecentFees`), one per recent slot, oldest
//! first; none set, prices around the congestion threshold, or one slot that took no price.
//!
//! Congestion (`litesvm_setCongestion [threshold, drop_percent]`): a busy leader includes a
//! sent transaction only if its compute-unit price is at least `threshold` (the others are
//! accepted and never land), and loses `drop_percent` of sends whatever their price, spread
//! evenly (3 of every 10 at 30).

use serde_json::{Value, json};
use solana_pubkey::Pubkey;
use solana_transaction::versioned::VersionedTransaction;

use super::{
    chain::Chain,
    rpc::{Params, RpcError},
};

/// The most addresses one call may name, as on the real node.
const MOST: usize = 128;

/// `getRecentPrioritizationFees [[address…]?]`.
pub(crate) fn get_recent_prioritization_fees(
    chain: &Chain,
    params: &Params,
) -> Result<Value, RpcError> {
    let addresses: Vec<String> = params.optional(0)?.unwrap_or_default();
    if addresses.len() > MOST {
        return Err(RpcError::invalid_params(format!(
            "Too many inputs provided; max {MOST}"
        )));
    }
    for a in &addresses {
        a.parse::<Pubkey>()
            .map_err(|_| RpcError::invalid_params(format!("Invalid param: {a}")))?;
    }
    let slot = chain.slot();
    let threshold = chain.congestion.threshold;
    let around = [
        threshold / 2,
        threshold,
        threshold,
        threshold.saturating_mul(2),
    ];
    let reported: &[u64] = match (&chain.recent_fees[..], threshold) {
        ([], 0) => &[0],
        ([], _) => &around,
        (set, _) => set,
    };
    let fees: Vec<Value> = {
        let n = reported.len() as u64;
        reported
            .iter()
            .enumerate()
            .map(|(i, fee)| {
                json!({"slot": slot.saturating_sub(n - 1 - i as u64), "prioritizationFee": fee})
            })
            .collect()
    };
    Ok(Value::Array(fees))
}

/// What a test set of the cluster's business.
#[derive(Debug, Default)]
pub(crate) struct Congestion {
    /// The lowest compute-unit price a block includes.
    threshold: u64,
    /// Sends lost whatever their price, in percent.
    drop_percent: u64,
    /// Sends counted since, for spreading the losses.
    sends: u64,
}

/// `litesvm_setCongestion [threshold, drop_percent]`.
pub(crate) fn set_congestion(chain: &mut Chain, params: &Params) -> Result<Value, RpcError> {
    chain.congestion = Congestion {
        threshold: params.required(0)?,
        drop_percent: params.optional(1)?.unwrap_or(0).min(100),
        sends: 0,
    };
    Ok(Value::Null)
}

/// Whether sent `tx` is accepted and then lost: one of the next `litesvm_dropTransactions`,
/// priced under the congestion threshold, or one of the sends the congestion loses.
pub(crate) fn lost(chain: &mut Chain, tx: &VersionedTransaction) -> bool {
    if chain.drop_next > 0 {
        chain.drop_next -= 1;
        return true;
    }
    let c = &mut chain.congestion;
    if price_of(tx) < c.threshold {
        return true;
    }
    let (before, after) = (
        c.sends * c.drop_percent / 100,
        (c.sends + 1) * c.drop_percent / 100,
    );
    c.sends += 1;
    after > before
}

/// The compute-unit price `tx` offers (0 without one).
fn price_of(tx: &VersionedTransaction) -> u64 {
    let keys = tx.message.static_account_keys();
    tx.message
        .instructions()
        .iter()
        .filter(|ix| {
            keys.get(usize::from(ix.program_id_index)) == Some(&solana_compute_budget_interface::ID)
        })
        .find_map(|ix| match ix.data.split_first() {
            Some((3, rest)) => rest.try_into().ok().map(u64::from_le_bytes),
            _ => None,
        })
        .unwrap_or(0)
}
