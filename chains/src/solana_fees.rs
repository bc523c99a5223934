//! How a Solana chain's own transfers pay to land: a compute-unit limit from the
//! simulation's units consumed plus a margin, and a compute-unit price at a percentile of
//! the prices recent blocks took for the accounts the transfer writes, never above a cap
//! (`chains.<slug>.compute_unit_margin`, `priority_fee_percentile`,
//! `max_priority_fee_micro_lamports`); and how often an unseen one is sent again
//! (`resend_interval_ms`).

use solana_compute_budget_interface::ComputeBudgetInstruction;
use solana_message::{Instruction, Message};
use solana_pubkey::Pubkey;

use super::ChainConfig;

/// Most compute units one transaction may ask for.
pub const MAX_UNITS: u32 = 1_400_000;

/// A Solana chain's compute budget settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SolanaFees {
    /// Compute units asked beyond those the simulation consumed, in percent.
    pub margin_percent: u32,
    /// The percentile of recent prices paid (nearest rank, 1 to 100).
    pub percentile: u8,
    /// The most micro-lamports per compute unit paid.
    pub max_price: u64,
    /// How often a transfer not yet seen is sent again while its blockhash is valid, in ms.
    pub resend_interval_ms: u64,
}

impl Default for SolanaFees {
    fn default() -> Self {
        Self {
            margin_percent: 10,
            percentile: 75,
            // One lamport a compute unit: a transfer's few thousand units at most double its
            // signature fee; a payout's pack a few times.
            max_price: 1_000_000,
            resend_interval_ms: 2_000,
        }
    }
}

impl SolanaFees {
    /// The settings `cfg` of chain `slug` gives, over the defaults.
    pub fn of(slug: &str, cfg: &ChainConfig) -> anyhow::Result<Self> {
        let base = Self::default();
        let fees = Self {
            margin_percent: cfg.compute_unit_margin.unwrap_or(base.margin_percent),
            percentile: cfg.priority_fee_percentile.unwrap_or(base.percentile),
            max_price: cfg
                .max_priority_fee_micro_lamports
                .unwrap_or(base.max_price),
            resend_interval_ms: cfg.resend_interval_ms.unwrap_or(base.resend_interval_ms),
        };
        if fees.resend_interval_ms < 100 {
            anyhow::bail!("chain {slug}: `resend_interval_ms` must be at least 100");
        }
        if fees.margin_percent > 100 {
            anyhow::bail!("chain {slug}: `compute_unit_margin` is a percentage from 0 to 100");
        }
        if !(1..=100).contains(&fees.percentile) {
            anyhow::bail!("chain {slug}: `priority_fee_percentile` must be 1 to 100");
        }
        Ok(fees)
    }

    /// The limit to ask for a transaction whose simulation consumed `units`.
    pub fn limit(&self, units: u64) -> u32 {
        let with_margin = units
            .saturating_mul(100 + u64::from(self.margin_percent))
            .div_ceil(100);
        u32::try_from(with_margin).map_or(MAX_UNITS, |u| u.clamp(1, MAX_UNITS))
    }

    /// The price to pay given the prices of recent blocks (`recent`, any order), and
    /// whether the cap cut it.
    pub fn price(&self, mut recent: Vec<u64>) -> (u64, bool) {
        if recent.is_empty() {
            return (0, false);
        }
        recent.sort_unstable();
        let rank = (usize::from(self.percentile) * recent.len()).div_ceil(100);
        let wanted = recent[rank.clamp(1, recent.len()) - 1];
        (wanted.min(self.max_price), wanted > self.max_price)
    }

    /// What `price` for `limit` units costs on top of the signature fee, in lamports.
    pub fn priority_lamports(price: u64, limit: u32) -> u64 {
        u64::try_from((u128::from(price) * u128::from(limit)).div_ceil(1_000_000))
            .unwrap_or(u64::MAX)
    }
}

/// `instructions` after a compute-unit limit of `limit` and a price of `price`.
pub fn with_budget(instructions: &[Instruction], limit: u32, price: u64) -> Vec<Instruction> {
    let mut all = Vec::with_capacity(instructions.len() + 2);
    all.push(ComputeBudgetInstruction::set_compute_unit_limit(limit));
    all.push(ComputeBudgetInstruction::set_compute_unit_price(price));
    all.extend_from_slice(instructions);
    all
}

/// The accounts `message` may write: those whose recent prices matter to it.
pub fn writable(message: &Message) -> Vec<Pubkey> {
    message
        .account_keys
        .iter()
        .enumerate()
        .filter(|(i, _)| {
            // Without the runtime's reserved set: the writes the message asks for.
            message.is_maybe_writable_with_reserved_addresses(
                *i,
                None::<&std::collections::BTreeSet<Pubkey>>,
            )
        })
        .map(|(_, k)| *k)
        .collect()
}

/// Sets `message`'s compute-unit price to `price` (the instruction keeps its size, so the
/// message keeps its shape); `false` when it has none to set.
pub fn reprice(message: &mut Message, price: u64) -> bool {
    let budget = message
        .account_keys
        .iter()
        .position(|k| *k == solana_compute_budget_interface::ID);
    let Some(program) = budget.and_then(|p| u8::try_from(p).ok()) else {
        return false;
    };
    let fresh = ComputeBudgetInstruction::set_compute_unit_price(price).data;
    for ix in &mut message.instructions {
        if ix.program_id_index == program && ix.data.first() == fresh.first() {
            ix.data = fresh;
            return true;
        }
    }
    false
}

/// The compute-unit limit and price `message` asks for, when it says.
pub fn budget_of(message: &Message) -> (Option<u32>, Option<u64>) {
    budget_in(&message.account_keys, &message.instructions)
}

/// The compute-unit limit and price of a message of `keys` (its static ones) and
/// `instructions`, when it says: a swap's route's (v0) as well as the service's own.
pub fn budget_in(
    keys: &[Pubkey],
    instructions: &[solana_message::compiled_instruction::CompiledInstruction],
) -> (Option<u32>, Option<u64>) {
    let (mut limit, mut price) = (None, None);
    for ix in instructions {
        if keys.get(usize::from(ix.program_id_index)) != Some(&solana_compute_budget_interface::ID)
        {
            continue;
        }
        match ix.data.split_first() {
            Some((2, rest)) => limit = rest.try_into().ok().map(u32::from_le_bytes),
            Some((3, rest)) => price = rest.try_into().ok().map(u64::from_le_bytes),
            _ => {}
        }
    }
    (limit, price)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_and_prices_follow_the_settings() {
        let fees = SolanaFees::default();
        assert_eq!(fees.limit(300), 330);
        assert_eq!(fees.limit(301), 332);
        assert_eq!(fees.limit(10_000_000), MAX_UNITS);
        assert_eq!(fees.limit(0), 1);
        assert_eq!(fees.price(vec![]), (0, false));
        let recent: Vec<u64> = (1..=100).rev().collect();
        assert_eq!(fees.price(recent.clone()), (75, false));
        let capped = SolanaFees {
            max_price: 50,
            ..fees
        };
        assert_eq!(capped.price(recent), (50, true));
        assert_eq!(SolanaFees::priority_lamports(1_000_000, 330), 330);
        assert_eq!(SolanaFees::priority_lamports(1, 330), 1);
        let cfg = ChainConfig {
            priority_fee_percentile: Some(0),
            ..ChainConfig::default()
        };
        assert!(SolanaFees::of("x", &cfg).is_err());
    }

    #[test]
    fn a_message_is_repriced_in_place() {
        let from = Pubkey::new_unique();
        let to = Pubkey::new_unique();
        let transfer = solana_system_interface::instruction::transfer(&from, &to, 5);
        let mut message = Message::new(&with_budget(&[transfer], 450, 7), Some(&from));
        assert_eq!(budget_of(&message), (Some(450), Some(7)));
        let size = message.serialize().len();
        assert!(writable(&message).contains(&to));
        assert!(reprice(&mut message, 9_000));
        assert_eq!(budget_of(&message), (Some(450), Some(9_000)));
        assert_eq!(message.serialize().len(), size);
    }
}
