//! `getSignaturesForAddress`: the landed transactions that name an address among their
//! account keys, newest first, as the real node's transaction-history index answers.

use serde_json::{Value, json};
use solana_pubkey::Pubkey;

use super::{
    chain::Chain,
    rpc::{Params, RpcError},
};

/// The most signatures one call answers, as on the real node.
const MOST: usize = 1000;

/// `getSignaturesForAddress [address, {limit?, before?, until?}]`.
pub(crate) fn get_signatures_for_address(
    chain: &Chain,
    params: &Params,
) -> Result<Value, RpcError> {
    let address: String = params.required(0)?;
    let address: Pubkey = address
        .parse()
        .map_err(|_| RpcError::invalid_params("Invalid param: Invalid".to_owned()))?;
    let config: Value = params.optional(1)?.unwrap_or(Value::Null);
    let limit = config["limit"].as_u64().map_or(MOST, |l| l as usize);
    if limit == 0 || limit > MOST {
        return Err(RpcError::invalid_params(format!(
            "Invalid limit; max {MOST}"
        )));
    }
    let mut named = chain.landed_naming(&address);
    // Newest first; within a slot (one transaction per slot here) by signature.
    named.sort_by(|a, b| b.1.slot.cmp(&a.1.slot).then(b.0.cmp(&a.0)));
    let before = config["before"].as_str();
    let until = config["until"].as_str();
    let mut out = Vec::new();
    let mut started = before.is_none();
    for (signature, landed) in named {
        let text = signature.to_string();
        if !started {
            started = Some(text.as_str()) == before;
            continue;
        }
        if Some(text.as_str()) == until || out.len() == limit {
            break;
        }
        out.push(json!({
            "signature": text,
            "slot": landed.slot,
            "err": landed.err.as_ref().map(|e| serde_json::to_value(e).unwrap_or(Value::Null)),
            "memo": null,
            "blockTime": landed.block_time,
            "confirmationStatus": "finalized",
        }));
    }
    Ok(Value::Array(out))
}
