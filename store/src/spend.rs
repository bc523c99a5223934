//! Spend limits and the reservations held against them. A write of a limited key reserves
//! its amount in the transaction that signs it and claims its idempotency key
//! (`Idempotency::claim`), after locking the limit's row, so concurrent writes are counted
//! one after the other and cannot overspend together; a record that ends FAILED or DROPPED
//! releases its reservation in the transaction of that change (`insert_events`).

use alloy::primitives::U256;
use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveValue::Set, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect, sea_query::Expr, sea_query::OnConflict,
};
use uuid::Uuid;

use super::{
    Conn, Store,
    entities::{api_keys, spend_limits as limits, spend_reservations as reservations},
};
use crate::error::{Result, StoreError};
use walletops_domain::{Spend, SpendLimit, SpendStanding};

pub(super) fn amount_of(text: &str) -> Result<U256> {
    U256::from_str_radix(text, 10)
        .map_err(|_| StoreError::Corrupt(anyhow::anyhow!("a stored amount is not one: {text}")))
}

fn limit_of(m: limits::Model) -> Result<SpendLimit> {
    Ok(SpendLimit {
        key_id: m.key_id,
        chain: m.chain,
        asset: m.asset,
        max_per_transaction: m
            .max_per_transaction
            .as_deref()
            .map(amount_of)
            .transpose()?,
        daily_budget: m.daily_budget.as_deref().map(amount_of).transpose()?,
        approval_above: m.approval_above.as_deref().map(amount_of).transpose()?,
    })
}

/// What the unreleased reservations of `(chain, asset)` by the keys of line `lineage` since
/// `since` hold, read in `conn`: a line shares its budgets.
async fn reserved_since<C: ConnectionTrait>(
    conn: &C,
    (lineage, chain, asset): (Uuid, &str, &str),
    since: DateTime<Utc>,
) -> Result<U256> {
    let amounts: Vec<String> = reservations::Entity::find()
        .select_only()
        .column(reservations::Column::Amount)
        .filter(super::lineage::of_line(
            reservations::Column::KeyId,
            lineage,
        ))
        .filter(reservations::Column::Chain.eq(chain))
        .filter(reservations::Column::Asset.eq(asset))
        .filter(reservations::Column::CreatedAt.gt(since))
        .filter(reservations::Column::ReleasedAt.is_null())
        .into_tuple()
        .all(conn)
        .await?;
    amounts
        .iter()
        .try_fold(U256::ZERO, |sum, a| Ok(sum.saturating_add(amount_of(a)?)))
}

/// The rows of `limit` for each key of `keys`, written at `now`.
fn rows_of(
    limit: &SpendLimit,
    keys: Vec<Uuid>,
    now: DateTime<Utc>,
) -> impl Iterator<Item = limits::ActiveModel> + '_ {
    keys.into_iter().map(move |key_id| limits::ActiveModel {
        key_id: Set(key_id),
        chain: Set(limit.chain.clone()),
        asset: Set(limit.asset.clone()),
        max_per_transaction: Set(limit.max_per_transaction.map(|a| a.to_string())),
        daily_budget: Set(limit.daily_budget.map(|a| a.to_string())),
        approval_above: Set(limit.approval_above.map(|a| a.to_string())),
        created_at: Set(now),
        updated_at: Set(now),
    })
}

impl Store {
    /// Sets (or replaces) a key's limit on one asset of one chain, and marks the key limited
    /// (for good), in one transaction, for the key and every key made from it: a key made
    /// with a key stays held as its maker is.
    pub async fn set_spend_limit(&self, limit: &SpendLimit) -> Result<()> {
        let now = Utc::now();
        let txn = self.begin_sea().await?;
        super::users::lock_owner_of(&txn, limit.key_id).await?;
        let keys = super::lineage::with_descendants(&txn, limit.key_id).await?;
        api_keys::Entity::update_many()
            .col_expr(api_keys::Column::Limited, Expr::value(true))
            .filter(api_keys::Column::Id.is_in(keys.clone()))
            .exec(&txn)
            .await?;
        let rows = rows_of(limit, keys, now);
        limits::Entity::insert_many(rows)
            .on_conflict(
                OnConflict::columns([
                    limits::Column::KeyId,
                    limits::Column::Chain,
                    limits::Column::Asset,
                ])
                .update_columns([
                    limits::Column::MaxPerTransaction,
                    limits::Column::DailyBudget,
                    limits::Column::ApprovalAbove,
                    limits::Column::UpdatedAt,
                ])
                .to_owned(),
            )
            .exec_without_returning(&txn)
            .await?;
        txn.commit().await?;
        self.keys.drop_all();
        Ok(())
    }

    /// Sets `limit` for its key and every key made from it where none is set on its chain
    /// and asset (a default the owner did not choose never replaces one they did).
    pub async fn ensure_spend_limit(&self, limit: &SpendLimit) -> Result<()> {
        let now = Utc::now();
        let txn = self.begin_sea().await?;
        let keys = super::lineage::with_descendants(&txn, limit.key_id).await?;
        let rows = rows_of(limit, keys, now);
        limits::Entity::insert_many(rows)
            .on_conflict_do_nothing()
            .exec_without_returning(&txn)
            .await?;
        txn.commit().await?;
        Ok(())
    }

    /// Sets, in `conn`'s transaction, what record `transaction_id` reserved against a fee
    /// budget (`asset`) to `fee`, what it paid once final.
    pub async fn settle_reserved_fee<C: Conn>(
        &self,
        conn: &C,
        transaction_id: Uuid,
        asset: &str,
        fee: U256,
    ) -> Result<()> {
        reservations::Entity::update_many()
            .col_expr(reservations::Column::Amount, Expr::value(fee.to_string()))
            .filter(reservations::Column::TransactionId.eq(transaction_id))
            .filter(reservations::Column::Asset.eq(asset))
            .filter(reservations::Column::ReleasedAt.is_null())
            .exec(conn.sea())
            .await?;
        Ok(())
    }

    /// Removes a key's limit on one asset of one chain, and that of every key made from it;
    /// whether there was one.
    pub async fn remove_spend_limit(&self, key_id: Uuid, chain: &str, asset: &str) -> Result<bool> {
        let txn = self.begin_sea().await?;
        super::users::lock_owner_of(&txn, key_id).await?;
        let keys = super::lineage::with_descendants(&txn, key_id).await?;
        let removed = limits::Entity::delete_many()
            .filter(limits::Column::KeyId.is_in(keys))
            .filter(limits::Column::Chain.eq(chain))
            .filter(limits::Column::Asset.eq(asset))
            .exec(&txn)
            .await?
            .rows_affected;
        txn.commit().await?;
        Ok(removed > 0)
    }

    /// A key's limits, each with what its reservations made after `since` hold.
    pub async fn spend_limits(
        &self,
        key_id: Uuid,
        since: DateTime<Utc>,
    ) -> Result<Vec<SpendStanding>> {
        let mut standings = Vec::new();
        let lineage = super::lineage::lines_of(self.sea(), &[key_id]).await?[&key_id];
        for m in limits::Entity::find()
            .filter(limits::Column::KeyId.eq(key_id))
            .order_by_asc(limits::Column::Chain)
            .order_by_asc(limits::Column::Asset)
            .all(self.sea())
            .await?
        {
            let limit = limit_of(m)?;
            let spent_24h =
                reserved_since(self.sea(), (lineage, &limit.chain, &limit.asset), since).await?;
            standings.push(SpendStanding { limit, spent_24h });
        }
        Ok(standings)
    }

    /// The limit of `spend`'s key on its chain and asset, if any.
    pub async fn spend_limit(&self, spend: &Spend) -> Result<Option<SpendLimit>> {
        limits::Entity::find()
            .filter(limits::Column::KeyId.eq(spend.key_id))
            .filter(limits::Column::Chain.eq(spend.chain.as_str()))
            .filter(limits::Column::Asset.eq(spend.asset.as_str()))
            .one(self.sea())
            .await?
            .map(limit_of)
            .transpose()
    }

    /// The limit of `spend`'s key on its chain and asset, read in `conn`'s transaction with
    /// its row locked (PostgreSQL), so a sum of reservations read after it counts every
    /// reservation committed before: concurrent writes of one key are held one at a time.
    pub async fn lock_spend_limit<C: Conn>(
        &self,
        conn: &C,
        spend: &Spend,
    ) -> Result<Option<SpendLimit>> {
        let conn = conn.sea();
        limits::Entity::find()
            .filter(limits::Column::KeyId.eq(spend.key_id))
            .filter(limits::Column::Chain.eq(spend.chain.as_str()))
            .filter(limits::Column::Asset.eq(spend.asset.as_str()))
            .lock_exclusive()
            .one(conn)
            .await?
            .map(limit_of)
            .transpose()
    }

    /// What the unreleased reservations of `spend`'s chain and asset by the keys of line
    /// `lineage` (`lock_lines`) made after `since` hold, read in `conn`'s transaction.
    pub async fn reserved_since<C: Conn>(
        &self,
        conn: &C,
        lineage: Uuid,
        spend: &Spend,
        since: DateTime<Utc>,
    ) -> Result<U256> {
        reserved_since(conn.sea(), (lineage, &spend.chain, &spend.asset), since).await
    }

    /// Reserves `spend`'s amount, in `conn`'s transaction, for record `transaction_id`.
    pub async fn insert_reservation<C: Conn>(
        &self,
        conn: &C,
        spend: &Spend,
        transaction_id: Uuid,
    ) -> Result<()> {
        reservations::Entity::insert(reservations::ActiveModel {
            id: Set(Uuid::now_v7()),
            key_id: Set(spend.key_id),
            chain: Set(spend.chain.clone()),
            asset: Set(spend.asset.clone()),
            amount: Set(spend.amount.to_string()),
            transaction_id: Set(transaction_id),
            created_at: Set(Utc::now()),
            released_at: Set(None),
        })
        .exec_without_returning(conn.sea())
        .await?;
        Ok(())
    }

    /// Releases, in `conn`'s transaction, the reservations of records that moved nothing.
    pub(super) async fn release_spend<C: ConnectionTrait>(
        &self,
        conn: &C,
        transaction_ids: impl IntoIterator<Item = Uuid>,
    ) -> Result<()> {
        reservations::Entity::update_many()
            .col_expr(reservations::Column::ReleasedAt, Expr::value(Utc::now()))
            .filter(reservations::Column::TransactionId.is_in(transaction_ids))
            .filter(reservations::Column::ReleasedAt.is_null())
            .exec(conn)
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::on_both_backends;
    use walletops_domain::TxStatus;

    fn spend(key_id: Uuid, amount: u64) -> Spend {
        Spend {
            key_id,
            chain: "anvil".to_owned(),
            asset: "native".to_owned(),
            amount: U256::from(amount),
        }
    }

    /// A budget counts what is reserved; a record that ends FAILED or DROPPED gives its
    /// amount back, one that confirms does not.
    async fn a_record_that_moved_nothing_releases_its_reservation(store: Store) {
        let key = Uuid::new_v4();
        store
            .set_spend_limit(&SpendLimit {
                key_id: key,
                chain: "anvil".to_owned(),
                asset: "native".to_owned(),
                max_per_transaction: None,
                daily_budget: Some(U256::from(10u64)),
                approval_above: None,
            })
            .await
            .expect("limit");
        let (failed, dropped, confirmed) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        for id in [failed, dropped, confirmed] {
            store
                .insert_reservation(store.db(), &spend(key, 3), id)
                .await
                .expect("reserved");
        }
        let day = || Utc::now() - chrono::Duration::hours(24);
        let standing = store.spend_limits(key, day()).await.expect("limits");
        assert_eq!(standing[0].spent_24h, U256::from(9u64));
        let user = Uuid::new_v4();
        for (id, status) in [
            (failed, TxStatus::Failed),
            (dropped, TxStatus::Dropped),
            (confirmed, TxStatus::Confirmed),
        ] {
            store
                .insert_events(store.db(), [(id, user, "anvil".to_owned())], status)
                .await
                .expect("event");
        }
        let standing = store.spend_limits(key, day()).await.expect("limits");
        assert_eq!(standing[0].spent_24h, U256::from(3u64));
        assert_eq!(standing[0].left(), Some(U256::from(7u64)));
    }

    /// A key is limited from its first limit on, for good: its held writes outlive the limit.
    async fn a_key_is_limited_from_its_first_limit_on(store: Store) {
        let user = store.insert_user("alice").await.expect("user");
        let made = store
            .insert_api_key(
                crate::NewApiKey {
                    user_id: user.id,
                    name: "agent".to_owned(),
                    prefix: "lim1".to_owned(),
                    secret_hash: "00".to_owned(),
                    expires_at: None,
                    created_by: None,
                    scopes: walletops_domain::Scopes::ALL,
                },
                10,
                Utc::now(),
            )
            .await
            .expect("stored")
            .expect("prefix free");
        let read = async || {
            store
                .find_api_key_by_prefix("lim1")
                .await
                .expect("read")
                .expect("found")
                .0
                .limited
        };
        assert!(!made.limited && !read().await, "a new key has no limit");
        let limit = SpendLimit {
            key_id: made.id,
            chain: "anvil".to_owned(),
            asset: "native".to_owned(),
            max_per_transaction: Some(U256::from(5u64)),
            daily_budget: None,
            approval_above: None,
        };
        store.set_spend_limit(&limit).await.expect("limit");
        assert!(read().await, "limited once a limit is set");
        store
            .remove_spend_limit(made.id, "anvil", "native")
            .await
            .expect("removed");
        assert!(read().await, "still limited once it is removed");
    }

    on_both_backends!(
        a_record_that_moved_nothing_releases_its_reservation,
        a_key_is_limited_from_its_first_limit_on,
    );
}
