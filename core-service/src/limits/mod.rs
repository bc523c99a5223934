//! Spend limits, whole: what a key may move of one asset on one chain per write and per
//! rolling 24 hours, and above what amount a write waits for a person's approval. Here are
//! the amounts parsed as the owner gives them (`settings`), the refusal of a write over a
//! limit and its words, the budget's window, and the approval threshold. The store keeps
//! only the rows: limits and the reservations held against them.
//!
//! They are held against every write of a limited key, over REST, gRPC and MCP alike: the
//! threshold before a write is made (`Core::write` through `Approvals::hold_if_over`), the
//! reservation in the transaction that signs the write and claims its key
//! (`Idempotency::claim`), after the limit's row is locked, so concurrent writes of one key
//! are counted one after the other and cannot overspend together. Only the owner sets them
//! (a dashboard session or the CLI; `Core::admit_owner`).

mod settings;

use alloy::primitives::U256;
use chrono::{Duration, Utc};
use uuid::Uuid;
use walletops_domain::{Spend, SpendLimit};
use walletops_store::{Conn, Store};

use crate::{
    auth::{Caller, Credential},
    error::{Result, WalletOpsError},
};

pub use settings::{LimitText, limit_asset};

/// The window of a daily budget.
pub const BUDGET_WINDOW: Duration = Duration::hours(24);

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
            "spend limits are changed in the dashboard or with the CLI, never with an API key"
                .to_owned(),
        )),
        Credential::Session { .. } => Ok(()),
    }
}

/// Why a write moving `amount` exceeds `limit`'s most per write, if it does.
fn over_per_write(limit: &SpendLimit, amount: U256) -> Option<WalletOpsError> {
    let max = limit.max_per_transaction?;
    (amount > max).then(|| {
        WalletOpsError::Forbidden(format!(
            "spend limit: this key may move at most {max} base units of {} on {} in one write; this one moves {amount}",
            limit.asset, limit.chain
        ))
    })
}

/// Reserves `spend` against its key's limit, in `conn`'s transaction, for record
/// `transaction_id`: FORBIDDEN naming the limit it would pass (per write, or the budget of
/// the last 24 hours), and then nothing is reserved. A spend on an asset without a limit is
/// not held.
pub(crate) async fn reserve<C: Conn>(
    store: &Store,
    conn: &C,
    spend: &Spend,
    transaction_id: Uuid,
) -> Result<()> {
    let Some(limit) = store.lock_spend_limit(conn, spend).await? else {
        return Ok(());
    };
    if let Some(refusal) = over_per_write(&limit, spend.amount) {
        return Err(refusal);
    }
    if let Some(budget) = limit.daily_budget {
        let spent = store
            .reserved_since(conn, spend, Utc::now() - BUDGET_WINDOW)
            .await?;
        if spent.saturating_add(spend.amount) > budget {
            return Err(WalletOpsError::Forbidden(format!(
                "spend limit: this key's 24-hour budget of {budget} base units of {} on {} has {} left; this write moves {}",
                limit.asset,
                limit.chain,
                budget.saturating_sub(spent),
                spend.amount
            )));
        }
    }
    store
        .insert_reservation(conn, spend, transaction_id)
        .await?;
    Ok(())
}

/// The approval threshold `spend` passes, if it does: the write then waits for a person. A
/// write over its key's most per write is refused now, as it would be once approved.
pub(crate) async fn threshold_passed(store: &Store, spend: &Spend) -> Result<Option<U256>> {
    let Some(limit) = store.spend_limit(spend).await? else {
        return Ok(None);
    };
    let Some(threshold) = limit.approval_above else {
        return Ok(None);
    };
    if spend.amount <= threshold {
        return Ok(None);
    }
    if let Some(refusal) = over_per_write(&limit, spend.amount) {
        return Err(refusal);
    }
    Ok(Some(threshold))
}
