//! Frozen key lines: a limited key's write that moved more on chain than its simulation
//! reserved freezes its whole line, in the transaction that settles the write, with the
//! excess charged to the line's budget and a `key.frozen` event noted. Only the owner
//! unfreezes a line.

use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveValue::Set,
    ColumnTrait, EntityTrait, QueryFilter, QueryOrder,
    sea_query::{Expr, OnConflict},
};
use uuid::Uuid;

use super::{
    Store,
    entities::{api_keys, frozen_lines, spend_reservations as reservations},
};
use crate::{Conn, error::Result};
use walletops_domain::{FrozenLine, Spend};

impl From<frozen_lines::Model> for FrozenLine {
    fn from(m: frozen_lines::Model) -> Self {
        Self {
            line_id: m.line_id,
            user_id: m.user_id,
            frozen_at: m.frozen_at,
            reason: m.reason,
            transaction_id: m.transaction_id,
        }
    }
}

impl Store {
    /// What record `transaction_id` holds against its key's budgets, read in `conn`'s
    /// transaction: one spend per asset (the fee budget's included); none for a write of a
    /// key without limits.
    pub async fn reservations_of<C: Conn>(
        &self,
        conn: &C,
        transaction_id: Uuid,
    ) -> Result<Vec<Spend>> {
        let rows = reservations::Entity::find()
            .filter(reservations::Column::TransactionId.eq(transaction_id))
            .filter(reservations::Column::ReleasedAt.is_null())
            .all(conn.sea())
            .await?;
        Ok(rows
            .into_iter()
            .map(|r| Spend {
                key_id: r.key_id,
                chain: r.chain,
                asset: r.asset,
                amount: r.amount.parse().unwrap_or_default(),
            })
            .collect())
    }

    /// Charges record `transaction_id` with `spend` on chain, in `conn`'s transaction: its
    /// reservation of the asset raised to the amount, or one added where it reserved none.
    pub async fn charge_executed<C: Conn>(
        &self,
        conn: &C,
        transaction_id: Uuid,
        spend: &Spend,
    ) -> Result<()> {
        let raised = reservations::Entity::update_many()
            .col_expr(
                reservations::Column::Amount,
                Expr::value(spend.amount.to_string()),
            )
            .filter(reservations::Column::TransactionId.eq(transaction_id))
            .filter(reservations::Column::Asset.eq(&spend.asset))
            .filter(reservations::Column::ReleasedAt.is_null())
            .exec(conn.sea())
            .await?
            .rows_affected;
        if raised == 0 {
            self.insert_reservation(conn, spend, transaction_id).await?;
        }
        Ok(())
    }

    /// Freezes the line of key `key_id` for `reason` (`transaction_id` moved it), in
    /// `conn`'s transaction, noting `key.frozen` on `chain`; false when it was frozen
    /// already (the first reason stands) or the key is gone.
    pub async fn freeze_line<C: Conn>(
        &self,
        conn: &C,
        key_id: Uuid,
        (chain, reason, transaction_id): (&str, &str, Uuid),
        now: DateTime<Utc>,
    ) -> Result<bool> {
        let Some(key) = api_keys::Entity::find_by_id(key_id).one(conn.sea()).await? else {
            return Ok(false);
        };
        // A line's first key has no lineage of its own: it is the line.
        let line = key.lineage_id.unwrap_or(key.id);
        let frozen = frozen_lines::Entity::insert(frozen_lines::ActiveModel {
            line_id: Set(line),
            user_id: Set(key.user_id),
            frozen_at: Set(now),
            reason: Set(reason.to_owned()),
            transaction_id: Set(transaction_id),
        })
        .on_conflict(
            OnConflict::column(frozen_lines::Column::LineId)
                .do_nothing()
                .to_owned(),
        )
        .exec_without_returning(conn.sea())
        .await?;
        if frozen == 0 {
            return Ok(false);
        }
        self.insert_key_event(conn.sea(), (line, key.user_id, chain.to_owned()))
            .await?;
        Ok(true)
    }

    /// Line `line_id`'s freeze, if it is frozen.
    pub async fn frozen_line(&self, line_id: Uuid) -> Result<Option<FrozenLine>> {
        Ok(frozen_lines::Entity::find_by_id(line_id)
            .one(self.sea())
            .await?
            .map(Into::into))
    }

    /// The frozen lines of `user_id`, the latest first.
    pub async fn frozen_lines(&self, user_id: Uuid) -> Result<Vec<FrozenLine>> {
        Ok(frozen_lines::Entity::find()
            .filter(frozen_lines::Column::UserId.eq(user_id))
            .order_by_desc(frozen_lines::Column::FrozenAt)
            .all(self.sea())
            .await?
            .into_iter()
            .map(Into::into)
            .collect())
    }

    /// Unfreezes `user_id`'s line `line_id`; whether it was frozen.
    pub async fn unfreeze_line(&self, user_id: Uuid, line_id: Uuid) -> Result<bool> {
        let removed = frozen_lines::Entity::delete_many()
            .filter(frozen_lines::Column::LineId.eq(line_id))
            .filter(frozen_lines::Column::UserId.eq(user_id))
            .exec(self.sea())
            .await?
            .rows_affected;
        Ok(removed > 0)
    }
}
