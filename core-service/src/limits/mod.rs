//! Spend limits, whole: what a key may move of one asset on one chain per write and per
//! rolling 24 hours, and above what amount a write waits for a person's approval. Here are
//! the limits and rules as the owner sets them (`settings`, `rules`; parsed in
//! `requests::limits`), the refusal of a write over a limit and its words, the budget's
//! window, and the approval threshold. The store keeps
//! only the rows: limits and the reservations held against them.
//!
//! They are held against what every write of a limited key does, read from its simulation,
//! over REST, gRPC and MCP alike: judged before anything is signed (`policy`), which names
//! the spends and any threshold passed, and reserved in the transaction that signs the write
//! and claims its key (`Idempotency::claim`), after the limit's row is locked, so concurrent
//! writes of one key are counted one after the other and cannot overspend together. Only the
//! owner sets them (a dashboard session or the CLI; `may_set`).

pub(crate) mod batch;
mod rules;
mod settings;

use alloy::primitives::U256;
use chrono::Duration;
use uuid::Uuid;
use walletops_domain::{Spend, SpendLimit};
use walletops_store::{Conn, Store};

use crate::{
    auth::{Caller, Credential},
    error::{Result, WalletOpsError},
};

pub use settings::NewLimit;

/// The window of a daily budget.
pub const BUDGET_WINDOW: Duration = Duration::hours(24);

/// `[limits]`: what holds a limited key where its owner set nothing.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// Per chain slug, the fees a limited key's writes may pay a day without a fee budget
    /// of its own, in the native coin's base units; a chain not named here has its
    /// built-in default (`Chain::default_fees_per_day`).
    pub default_fees_per_day: std::collections::BTreeMap<String, u64>,
}

impl LimitsConfig {
    /// The fee budget a limited key without one has on `chain`.
    pub fn fees_per_day(&self, chain: &walletops_chains::Chain) -> U256 {
        U256::from(
            self.default_fees_per_day
                .get(chain.slug())
                .copied()
                .unwrap_or_else(|| chain.default_fees_per_day()),
        )
    }
}

/// The owner's view of the keys' spend limits: set, read, removed.
#[derive(Debug, Clone)]
pub struct Limits {
    store: Store,
}

impl Limits {
    /// Limits kept in `store`.
    pub fn new(store: Store) -> Self {
        Self { store }
    }
}

/// Refuses a caller that may not set limits: only the owner, signed in to the dashboard (or
/// at the CLI, which calls `Limits::set` directly), changes them, never an API key, least of
/// all the key they limit.
fn may_set(caller: &Caller) -> Result<()> {
    match caller.credential {
        Credential::Key { .. } => Err(WalletOpsError::Forbidden(
            "spend limits and key policies are changed in the dashboard or with the CLI, never with an API key"
                .to_owned(),
        )),
        Credential::Session { .. } => Ok(()),
    }
}

/// Why a write moving `amount` exceeds `limit`'s most per write, if it does.
pub(crate) fn over_per_write(limit: &SpendLimit, amount: U256) -> Option<WalletOpsError> {
    let max = limit.max_per_transaction?;
    (amount > max).then(|| {
        WalletOpsError::Forbidden(format!(
            "spend limit: this key may move at most {max} base units of {} on {} in one write; this one moves {amount}",
            limit.asset, limit.chain
        ))
    })
}

/// Why a write moving `amount` exceeds what `limit`'s 24-hour budget has left after `spent`,
/// if it does.
pub(crate) fn over_budget(limit: &SpendLimit, spent: U256, amount: U256) -> Option<WalletOpsError> {
    let budget = limit.daily_budget?;
    (spent.saturating_add(amount) > budget).then(|| {
        WalletOpsError::Forbidden(format!(
            "spend limit: this key's 24-hour budget of {budget} base units of {} on {} has {} left; this write moves {amount}",
            limit.asset,
            limit.chain,
            budget.saturating_sub(spent),
        ))
    })
}

/// Reserves `spends` (a write's, one per asset) against their key's limits, in `conn`'s
/// transaction, for record `transaction_id`: all of them, or none with FORBIDDEN naming the
/// limit one would pass (per write, or the budget of the last 24 hours, which the keys of
/// the key's line `lineage` share). The caller has locked the line (`Store::lock_lines`);
/// the limits are locked after it in one order (chain, asset) for every write, so two writes
/// of a line never wait on each other's locks. The write's verdict (`policy`) found each
/// limit; one removed since is no longer a permission: deny by default.
pub(crate) async fn reserve<C: Conn>(
    store: &Store,
    conn: &C,
    (spends, lineage): (&[Spend], Uuid),
    transaction_id: Uuid,
) -> Result<()> {
    let mut ordered: Vec<&Spend> = spends.iter().collect();
    ordered.sort_by(|a, b| (&a.chain, &a.asset).cmp(&(&b.chain, &b.asset)));
    for spend in &ordered {
        let Some(limit) = store.lock_spend_limit(conn, spend).await? else {
            return Err(WalletOpsError::Forbidden(format!(
                "spend limit: this key's limit on {} on {} was removed while the write was made; it moves only assets it has a limit on",
                spend.asset, spend.chain
            )));
        };
        let refusal = match over_per_write(&limit, spend.amount) {
            Some(refusal) => Some(refusal),
            None if limit.daily_budget.is_some() => {
                let spent = store
                    .reserved_since(conn, lineage, spend, crate::clock::now() - BUDGET_WINDOW)
                    .await?;
                over_budget(&limit, spent, spend.amount)
            }
            None => None,
        };
        if let Some(refusal) = refusal {
            return Err(refusal);
        }
    }
    for spend in ordered {
        store
            .insert_reservation(conn, spend, transaction_id)
            .await?;
    }
    Ok(())
}
