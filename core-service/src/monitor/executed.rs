//! The monitor's check of a final write against its reservation (`policy::executed`): in
//! the database transaction that settles it, a limited key's write that moved more on chain
//! than it reserved has the excess charged to its line's budget and freezes the line, with
//! a `key.frozen` event noted in the same commit.

use walletops_domain::{Effects, OpenTransaction};
use walletops_store::Txn;

use super::Monitor;
use crate::{error::Result, policy::executed};

impl Monitor {
    /// Holds `open`, confirmed with `landed` effects, to what its key reserved, in `txn`;
    /// whether it froze its key's line now.
    pub(super) async fn hold_to_reservation(
        &self,
        txn: &Txn,
        open: &OpenTransaction,
        landed: &Effects,
    ) -> Result<bool> {
        let reserved = self.store.reservations_of(txn, open.id).await?;
        let Some(key_id) = reserved.first().map(|s| s.key_id) else {
            return Ok(false);
        };
        let asset_limits = self
            .store
            .spend_limits(key_id, crate::clock::now())
            .await?
            .iter()
            .any(|s| {
                ![walletops_domain::FEES_ASSET, walletops_domain::GAS_ASSET]
                    .contains(&s.limit.asset.as_str())
            });
        let excess = executed::beyond_reserved(landed, &reserved, asset_limits);
        let Some(first) = excess.first() else {
            return Ok(false);
        };
        for e in &excess {
            self.store.charge_executed(txn, open.id, &e.moved).await?;
        }
        let reason = executed::freeze_reason(open.id, &excess);
        let froze = self
            .store
            .freeze_line(
                txn,
                first.moved.key_id,
                (&open.chain, &reason, open.id),
                crate::clock::now(),
            )
            .await?;
        if froze {
            tracing::warn!(id = %open.id, key = %first.moved.key_id, %reason, "a key line froze");
        }
        Ok(froze)
    }
}
