//! `getRecentPrioritizationFees`: the compute-unit prices recent blocks took, as the real
//! node answers (`[{slot, prioritizationFee}]`, at most 128 addresses asked about). The
//! prices are the ones a test sets (`litesvm_setRecentFees`), one per recent slot, oldest
//! first; none set, the node reports one slot that took no price.

use serde_json::{Value, json};
use solana_pubkey::Pubkey;

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
    let fees: Vec<Value> = if chain.recent_fees.is_empty() {
        vec![json!({"slot": slot, "prioritizationFee": 0})]
    } else {
        let n = chain.recent_fees.len() as u64;
        chain
            .recent_fees
            .iter()
            .enumerate()
            .map(|(i, fee)| {
                json!({"slot": slot.saturating_sub(n - 1 - i as u64), "prioritizationFee": fee})
            })
            .collect()
    };
    Ok(Value::Array(fees))
}
