//! A limited key's write from a guarded wallet (`guard`): signed as the wallet's call to
//! itself, `execute`, with the checks its reservation sets, its gas estimated as wrapped.

use alloy::primitives::{Address, Bytes, U256};
use walletops_domain::Effects;

use super::EvmIntent;
use crate::{
    error::{Result, WalletOpsError},
    guard,
};
use walletops_chains::{
    Chain,
    evm::{EvmClient, Fees},
};

/// A guarded write as it is signed.
#[derive(Debug)]
pub(super) struct Wrapped {
    /// The wallet's call to itself.
    pub(super) input: Bytes,
    /// Its gas limit, with headroom.
    pub(super) gas: u64,
}

/// `intent` from `from` wrapped in the guard's `execute` with the checks `effects` and
/// `watch` set, at `fees`, for a wallet holding `balance` wei. Refused when the wallet's
/// code is not the delegation to the guard (removed outside the service): a call to an
/// account without code would do nothing and succeed; and when the wallet cannot pay the
/// value and the wrapped transaction's most fee.
pub(super) async fn wrap(
    client: &EvmClient,
    chain: &Chain,
    (from, intent): (Address, &EvmIntent),
    ((effects, watch), fees, balance): ((&Effects, &[Address]), Fees, U256),
) -> Result<Wrapped> {
    let checks = guard::checks(effects, watch, intent.to);
    let input = guard::execute(intent.to, intent.value, &intent.input, checks);
    let (code, guard_there, estimated) = tokio::join!(
        client.code_at(from),
        client.has_code(guard::guard_address()),
        client.estimate_gas(from, from, U256::ZERO, &input, fees),
    );
    let code = code?;
    // A delegation to an address without code leaves the wallet's calls doing nothing.
    if code != guard::delegation_code(guard::guard_address()) || !guard_there? {
        return Err(WalletOpsError::SendFailed(format!(
            "guard: wallet {} is guarded on {}, but its code on chain is {code}, not the delegation to the guard {}; run `walletops wallets guard enable` again, or `disable`",
            from.to_checksum(None),
            chain.slug(),
            guard::guard_address().to_checksum(None)
        )));
    }
    let estimated = estimated?;
    let gas = estimated.saturating_add(estimated / 5);
    let cost = intent
        .value
        .saturating_add(U256::from(gas).saturating_mul(U256::from(fees.max_fee_per_gas)));
    if balance < cost {
        return Err(WalletOpsError::InsufficientFunds(format!(
            "wallet {} holds {balance} wei, less than value plus maximum fee through its guard ({cost} wei)",
            from.to_checksum(None)
        )));
    }
    Ok(Wrapped { input, gas })
}
