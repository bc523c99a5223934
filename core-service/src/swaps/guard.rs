//! The swap guard: the transaction an aggregator built is checked against the request before
//! anything signs it. An aggregator (or whoever answers at its address) decides what the
//! wallet signs; the guard makes sure that what it decided is the swap that was asked for.
//!
//! **Invariant:** a swap transaction is signed only after `check_evm` or `check_solana`
//! passed on exactly the bytes that are signed. A refusal names the check that failed.

use alloy::primitives::{Address, U256};
use borsh::BorshDeserialize as _;
use solana_compute_budget_interface::ComputeBudgetInstruction;
use solana_pubkey::Pubkey;
use solana_signature::Signature;
use solana_transaction::versioned::VersionedTransaction;

use walletops_domain::{Asset, Effects, WalletAddress};

use crate::error::WalletOpsError;

use walletops_chains::trade::{EvmSwapTx, NATIVE_TOKEN};

/// A check the aggregator's transaction failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The check: `from`, `spender`, `router`, `value`, `data`, `calldata`, `receiver`,
    /// `executor`, `minimum`, `effects`, `fee payer`, `signatures`, `programs`, `nonce`,
    /// `blockhash`, `compute budget` or `fee`.
    pub check: &'static str,
    /// What the transaction does instead.
    pub why: String,
}

impl Refusal {
    pub(super) fn new(check: &'static str, why: String) -> Self {
        Self { check, why }
    }

    /// The effects check's refusal of a swap whose effects cannot be read.
    pub fn unreadable(why: &str) -> Self {
        Self::new("effects", format!("what it does cannot be read: {why}"))
    }
}

/// A refused swap is SEND_FAILED: the request was fine, the transaction built for it is not.
impl From<Refusal> for WalletOpsError {
    fn from(r: Refusal) -> Self {
        WalletOpsError::SendFailed(format!(
            "the swap guard refused the aggregator's transaction ({} check): {}; nothing was signed",
            r.check, r.why
        ))
    }
}

/// What an EVM swap transaction must be.
#[derive(Debug, Clone, Copy)]
pub struct EvmTerms<'a> {
    /// The wallet that signs it.
    pub wallet: Address,
    /// The token sold (`NATIVE_TOKEN` for the native coin).
    pub src: Address,
    /// How much is sold.
    pub amount: U256,
    /// The router the aggregator names as spender for the request's chain.
    pub spender: Address,
    /// The routers allowed on the chain: built in, on `trade.evm.allowed_routers`, or the
    /// chain's own aggregator's (`TradeConfig::evm_routers`).
    pub routers: &'a [Address],
}

/// Refuses a spender the aggregator names that is not an allowed router: a wallet would be
/// told to approve it, and a swap would let it take the tokens sold.
pub fn check_spender(spender: Address, routers: &[Address]) -> Result<(), Refusal> {
    if routers.contains(&spender) {
        return Ok(());
    }
    Err(Refusal::new(
        "spender",
        format!(
            "the aggregator names {spender} as its router, which is neither a built-in router of this chain (1inch v6) nor on trade.evm.allowed_routers"
        ),
    ))
}

/// Checks an EVM swap transaction: built for the wallet, its spender and the contract it
/// calls both allowed routers, with call data, sending the amount sold when that is the native coin and
/// nothing otherwise. The chain needs no check of the transaction: the service signs it with
/// the request's chain id (EIP-155), so it cannot be valid anywhere else.
pub fn check_evm(tx: &EvmSwapTx, terms: &EvmTerms<'_>) -> Result<(), Refusal> {
    if tx.from != terms.wallet {
        return Err(Refusal::new(
            "from",
            format!(
                "it was built for {}, not for the wallet {}",
                tx.from, terms.wallet
            ),
        ));
    }
    check_spender(terms.spender, terms.routers)?;
    if !terms.routers.contains(&tx.to) {
        return Err(Refusal::new(
            "router",
            format!(
                "it calls {}, which is neither a built-in router of this chain (1inch v6) nor on trade.evm.allowed_routers",
                tx.to
            ),
        ));
    }
    let expected = if terms.src == NATIVE_TOKEN {
        terms.amount
    } else {
        U256::ZERO
    };
    if tx.value != expected {
        return Err(Refusal::new(
            "value",
            format!(
                "it sends {} wei along; a swap of this source must send {expected}",
                tx.value
            ),
        ));
    }
    if tx.data.is_empty() {
        return Err(Refusal::new(
            "data",
            "it carries no call data: it would be a plain transfer to the router".to_owned(),
        ));
    }
    Ok(())
}

/// What an EVM swap's simulation must show it does to the wallet.
#[derive(Debug, Clone, Copy)]
pub struct SwapEffects {
    /// The asset sold and how much.
    pub sold: (Asset, U256),
    /// The asset bought and the least that must come in.
    pub bought: (Asset, U256),
}

/// Checks what a swap does, read from its simulation, against its terms: exactly the sold
/// amount leaves the wallet and nothing else does, at least the minimum of the bought asset
/// comes in, and no allowance, delegation or authority is granted. The aggregator's calldata
/// is judged by what it does, however it is encoded.
pub fn check_effects(effects: &Effects, terms: &SwapEffects) -> Result<(), Refusal> {
    let (sold, amount) = terms.sold;
    if let Some(other) = effects.outflows.iter().find(|f| f.asset != sold) {
        return Err(Refusal::new(
            "effects",
            format!(
                "it also sends {} of {} to {}",
                other.amount,
                other.asset.name(),
                other.counterparty
            ),
        ));
    }
    let out = effects.outflow_of(sold);
    if out != amount {
        return Err(Refusal::new(
            "effects",
            format!(
                "it takes {out} of {} from the wallet, not the {amount} sold",
                sold.name()
            ),
        ));
    }
    if let Some(grant) = effects.grants.first() {
        return Err(Refusal::new(
            "effects",
            format!(
                "it lets {} take {} of {}",
                grant.spender,
                grant.amount.map_or("all".to_owned(), |a| a.to_string()),
                grant.asset.name()
            ),
        ));
    }
    let (bought, least) = terms.bought;
    let got = effects.inflow_of(bought);
    if got < least {
        return Err(Refusal::new(
            "effects",
            format!(
                "it pays the wallet {got} of {}, less than the minimum {least}",
                bought.name()
            ),
        ));
    }
    Ok(())
}

/// Refuses a Solana swap that sends what it sells to an account a key holds. A pool takes
/// what it is sold into vaults at program-derived addresses, off the ed25519 curve, which
/// only their program moves; an address on the curve is someone's key, and a route paying it
/// moves the wallet's funds out of every program's reach. (What comes back is held to the
/// bound by `check_effects`; this keeps the route itself honest.)
pub fn check_sinks(effects: &Effects) -> Result<(), Refusal> {
    for flow in &effects.outflows {
        if let WalletAddress::Solana(to) = flow.counterparty
            && to.is_on_curve()
        {
            return Err(Refusal::new(
                "route",
                format!(
                    "it sends the {} of {} sold to {to}, an account a key holds, not a program's",
                    flow.amount,
                    flow.asset.name()
                ),
            ));
        }
    }
    Ok(())
}

/// What a Solana swap transaction may do.
#[derive(Debug, Clone, Copy)]
pub struct SolanaTerms<'a> {
    /// The wallet that pays the fee and signs.
    pub wallet: Pubkey,
    /// The programs it may invoke (`trade.solana.allowed_programs`).
    pub allowed_programs: &'a [Pubkey],
    /// The most it may cost in fees, base and priority (`trade.solana.max_fee_lamports`).
    pub max_fee_lamports: u64,
    /// The highest compute unit limit it may set (`trade.solana.max_compute_units`).
    pub max_compute_units: u32,
}

/// What a checked Solana swap costs its fee payer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SolanaCost {
    /// Base fee (per signature) and priority fee, in lamports.
    pub fee_lamports: u64,
    /// The compute unit limit it runs under.
    pub compute_units: u32,
}

/// One signature's base fee, in lamports.
const LAMPORTS_PER_SIGNATURE: u64 = 5_000;
/// The compute units an instruction gets when the transaction sets no limit.
const DEFAULT_UNITS_PER_INSTRUCTION: u32 = 200_000;
/// The most compute units a transaction may use.
const MAX_UNITS: u32 = 1_400_000;
const MICRO_LAMPORTS_PER_LAMPORT: u128 = 1_000_000;
/// System `AdvanceNonceAccount`'s tag (a little-endian u32).
const ADVANCE_NONCE_ACCOUNT: [u8; 4] = [4, 0, 0, 0];

/// Checks a Solana swap transaction: the wallet pays the fee and is the only signature it
/// still lacks (every other one present and valid), every program it invokes is allowed, and
/// its fee and compute unit limit stay under the caps. Returns what it costs.
pub fn check_solana(
    tx: &VersionedTransaction,
    terms: &SolanaTerms<'_>,
) -> Result<SolanaCost, Refusal> {
    let message = &tx.message;
    let keys = message.static_account_keys();
    let required = usize::from(message.header().num_required_signatures);
    if keys.first() != Some(&terms.wallet) {
        return Err(Refusal::new(
            "fee payer",
            format!(
                "its fee payer is {}, not the wallet {}",
                keys.first()
                    .map_or("nobody".to_owned(), ToString::to_string),
                terms.wallet
            ),
        ));
    }
    if tx.signatures.len() != required || required == 0 || keys.len() < required {
        return Err(Refusal::new(
            "signatures",
            format!(
                "it has {} signature slots for {required} required signers",
                tx.signatures.len()
            ),
        ));
    }
    if tx.signatures[0] != Signature::default() {
        return Err(Refusal::new(
            "signatures",
            "the wallet's signature slot is filled already".to_owned(),
        ));
    }
    let bytes = message.serialize();
    for (signature, key) in tx.signatures.iter().zip(keys).skip(1) {
        if !signature.verify(key.as_ref(), &bytes) {
            return Err(Refusal::new(
                "signatures",
                format!(
                    "it also lacks a valid signature of {key}: the wallet must be the only one missing"
                ),
            ));
        }
    }
    let mut limit = None;
    let mut price: u64 = 0;
    let mut others: u32 = 0;
    for ix in message.instructions() {
        let program = keys.get(usize::from(ix.program_id_index)).ok_or_else(|| {
            Refusal::new(
                "programs",
                "it invokes a program that is not among its static accounts".to_owned(),
            )
        })?;
        if !terms.allowed_programs.contains(program) {
            return Err(Refusal::new(
                "programs",
                format!("it invokes {program}, which is not on trade.solana.allowed_programs"),
            ));
        }
        // A durable nonce would keep the swap valid long after its quote: its validity must
        // come from a blockhash.
        if *program == solana_system_interface::program::ID
            && ix.data.get(..4) == Some(&ADVANCE_NONCE_ACCOUNT)
        {
            return Err(Refusal::new(
                "nonce",
                "it advances a durable nonce, which would keep it valid past its quote".to_owned(),
            ));
        }
        if *program != solana_compute_budget_interface::ID {
            others += 1;
            continue;
        }
        match ComputeBudgetInstruction::try_from_slice(&ix.data) {
            Ok(ComputeBudgetInstruction::SetComputeUnitLimit(units)) => limit = Some(units),
            Ok(ComputeBudgetInstruction::SetComputeUnitPrice(micro)) => price = micro,
            Ok(_) => {}
            Err(_) => {
                return Err(Refusal::new(
                    "compute budget",
                    "it carries a compute budget instruction that does not decode".to_owned(),
                ));
            }
        }
    }
    let units = limit
        .unwrap_or_else(|| others.saturating_mul(DEFAULT_UNITS_PER_INSTRUCTION))
        .min(MAX_UNITS);
    if units > terms.max_compute_units {
        return Err(Refusal::new(
            "compute budget",
            format!(
                "it sets a limit of {units} compute units, above trade.solana.max_compute_units ({})",
                terms.max_compute_units
            ),
        ));
    }
    let priority = (u128::from(price) * u128::from(units)).div_ceil(MICRO_LAMPORTS_PER_LAMPORT);
    let fee = u128::from(LAMPORTS_PER_SIGNATURE) * required as u128 + priority;
    if fee > u128::from(terms.max_fee_lamports) {
        return Err(Refusal::new(
            "fee",
            format!(
                "it costs {fee} lamports in fees, above trade.solana.max_fee_lamports ({})",
                terms.max_fee_lamports
            ),
        ));
    }
    Ok(SolanaCost {
        // At most `max_fee_lamports` after the check above.
        fee_lamports: fee as u64,
        compute_units: units,
    })
}

#[cfg(test)]
#[path = "guard_tests.rs"]
mod tests;
