//! Who follows a record: the request that stored it holds it until its first send, then a
//! core's monitor leases it for a while, renewing the lease each sweep. Leases are
//! conditional UPDATEs, so of several cores exactly one wins each record.

use chrono::{DateTime, Utc};
use sea_orm::{
    ColumnTrait, Condition, EntityTrait, QueryFilter, QueryOrder, QuerySelect, UpdateMany,
    sea_query::{Expr, NullOrdering, Order},
};
use std::collections::HashSet;
use uuid::Uuid;

use super::{
    Store,
    entities::transactions as txs,
    lease::{Lease, Own, give_up},
    transactions::open_statuses,
};
use crate::error::Result;
use walletops_domain::OpenTransaction;

/// The lease owner of a record its request still holds: no core's monitor follows it until
/// the request has handled its first send (or the hold runs out: the request died). Were the
/// monitor to send it meanwhile, a refusal the request meets could fail a payment that the
/// monitor's send made, or the caller be told SUBMITTED of a record the monitor ended.
pub const REQUEST_HOLD: Uuid = Uuid::nil();

impl Store {
    /// Gives up every lease `owner` holds, so that other cores follow those records at once
    /// instead of when the leases run out: a core stopping.
    pub async fn release_leases(&self, owner: Uuid) -> Result<u64> {
        Ok(give_up::<txs::Entity>(owner, Condition::all())
            .exec(self.sea())
            .await?
            .rows_affected)
    }

    /// Gives up `owner`'s lease on record `id`, so that any core may take it at its next
    /// sweep: a core that cannot follow the record (its node unreachable from there, say)
    /// must not keep it from the cores that can. The owner stays, so that the next core to
    /// lease it knows whose it was (see `Leased::taken_over`); a freed lease is not renewed
    /// (`renew_leases`).
    pub async fn release_lease(&self, owner: Uuid, id: Uuid) -> Result<()> {
        give_up::<txs::Entity>(owner, Condition::all().add(txs::Column::Id.eq(id)))
            .exec(self.sea())
            .await?;
        Ok(())
    }

    /// Ends the hold of its request on record `id`, if it still has one.
    pub async fn release_hold(&self, id: Uuid) -> Result<()> {
        self.release_lease(REQUEST_HOLD, id).await
    }

    /// Takes up to `limit` open transactions whose lease is free or expired for `owner`
    /// until `until`, and returns them. The lease is a conditional UPDATE over the
    /// candidates (one a run of `in_cached_shapes`), so of several cores exactly one wins each
    /// record, and a dead core's lease (or a dead request's hold) simply runs out.
    /// Never-leased records come first, then the ones leased longest ago: with more open
    /// records than `limit`, every one is still followed in turn, instead of
    /// the oldest `limit` (say, sends queued behind a fee-capped one) every time. Records in
    /// `skip` are left to other cores.
    pub async fn lease_open_transactions(
        &self,
        owner: Uuid,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: u64,
        skip: &[Uuid],
    ) -> Result<Leased> {
        let open = open_statuses();
        let mut candidates = txs::Entity::find()
            .select_only()
            .column(txs::Column::Id)
            .column(txs::Column::LeaseOwner)
            .filter(txs::Column::Status.is_in(open.clone()))
            .filter(renewing(owner, now, now).free::<txs::Entity>());
        if !skip.is_empty() {
            candidates = candidates.filter(txs::Column::Id.is_not_in(skip.iter().copied()));
        }
        let candidates: Vec<(Uuid, Option<Uuid>)> = candidates
            .order_by_with_nulls(txs::Column::LeaseUntil, Order::Asc, NullOrdering::First)
            .order_by_asc(txs::Column::CreatedAt)
            .limit(limit)
            .into_tuple()
            .all(self.sea())
            .await?;
        if candidates.is_empty() {
            return Ok(Leased::default());
        }
        let other_cores: HashSet<Uuid> = candidates
            .iter()
            .filter(|(_, was)| was.is_some_and(|w| w != owner && w != REQUEST_HOLD))
            .map(|(id, _)| *id)
            .collect();
        let mut leased = Vec::with_capacity(candidates.len());
        for run in super::in_cached_shapes(candidates) {
            leased.extend(
                lease_update(owner, now, until, run.into_iter().map(|(id, _)| id))
                    .exec_with_returning(self.sea())
                    .await?,
            );
        }
        // Ended since the candidates were read: leased, harmlessly, and not followed.
        leased.retain(|m| open.contains(&m.status));
        leased.sort_by_key(|m| m.created_at);
        // One unreadable row (written by a newer version, say) must not stop the others
        // from being followed. It is set aside for a while, leased to nobody: leased to this
        // core, it would be taken again each sweep, and never by a core that can read it.
        let mut opens = Vec::with_capacity(leased.len());
        let mut unreadable = Vec::new();
        for m in leased {
            let id = m.id;
            match OpenTransaction::try_from(m) {
                Ok(open) => opens.push(open),
                Err(e) => {
                    tracing::error!(%id, error = %e, "an open transaction's row is unreadable; set aside for 10 minutes");
                    unreadable.push(id);
                }
            }
        }
        if !unreadable.is_empty() {
            txs::Entity::update_many()
                .col_expr(txs::Column::LeaseOwner, Expr::value(Uuid::now_v7()))
                .col_expr(
                    txs::Column::LeaseUntil,
                    Expr::value(now + chrono::Duration::minutes(10)),
                )
                .filter(txs::Column::Id.is_in(unreadable))
                .exec(self.sea())
                .await?;
        }
        let taken_over = opens
            .iter()
            .map(|o| o.id)
            .filter(|id| other_cores.contains(id))
            .collect();
        Ok(Leased {
            records: opens,
            taken_over,
        })
    }

    /// Extends `owner`'s lease on those of `ids` it still holds to `until`; returns how many
    /// it kept. A record whose lease ran out and another core took is left to that core.
    pub async fn renew_leases(
        &self,
        owner: Uuid,
        ids: &[Uuid],
        until: DateTime<Utc>,
    ) -> Result<u64> {
        if ids.is_empty() {
            return Ok(0);
        }
        let mut kept = 0;
        for run in super::in_cached_shapes(ids.to_vec()) {
            kept += renew_update(owner, until, run)
                .exec(self.sea())
                .await?
                .rows_affected;
        }
        Ok(kept)
    }
}

/// A monitor's lease: its own records are free to it, which renews them each sweep.
fn renewing(owner: Uuid, now: DateTime<Utc>, until: DateTime<Utc>) -> Lease {
    Lease {
        owner,
        now,
        until,
        own: Own::Renewed,
    }
}

// The two UPDATEs below find their records by id alone, without a condition on the status:
// with one, SQLite (which has no statistics to tell it that most records share a status)
// read them through the status index, every open record for each run of ids: a sweep at
// 10,000 open records read 160,000 rows. A record that ended meanwhile is leased or renewed
// harmlessly (no one follows an ended record) and the lease leaves it out.

/// The lease of records `ids` that are free for `owner` at `now`, until `until`.
fn lease_update(
    owner: Uuid,
    now: DateTime<Utc>,
    until: DateTime<Utc>,
    ids: impl IntoIterator<Item = Uuid>,
) -> UpdateMany<txs::Entity> {
    renewing(owner, now, until).take(Condition::all().add(txs::Column::Id.is_in(ids)))
}

/// The renewal until `until` of `owner`'s leases of records `ids`.
fn renew_update(owner: Uuid, until: DateTime<Utc>, ids: Vec<Uuid>) -> UpdateMany<txs::Entity> {
    txs::Entity::update_many()
        .col_expr(txs::Column::LeaseUntil, Expr::value(until))
        .filter(txs::Column::Id.is_in(ids))
        .filter(txs::Column::LeaseOwner.eq(owner))
        // A lease given up during the sweep stays given up.
        .filter(txs::Column::LeaseUntil.is_not_null())
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use sea_orm::{ConnectionTrait, DbBackend, QueryTrait, Statement};
    use uuid::Uuid;

    use crate::testing::temp_sqlite;

    /// How SQLite would find the rows of `update`, in the words of `EXPLAIN QUERY PLAN`.
    async fn plan_of(update: impl QueryTrait) -> String {
        let (_dir, store) = temp_sqlite().await;
        let built = update.build(DbBackend::Sqlite);
        let rows = store
            .sea()
            .query_all_raw(Statement {
                sql: format!("EXPLAIN QUERY PLAN {}", built.sql),
                ..built
            })
            .await
            .expect("explain");
        rows.iter()
            .map(|row| row.try_get::<String>("", "detail").expect("detail"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    #[tokio::test]
    async fn leases_find_their_records_by_id() {
        let (owner, now) = (Uuid::now_v7(), Utc::now());
        let ids: Vec<Uuid> = (0..64).map(|_| Uuid::now_v7()).collect();
        for plan in [
            plan_of(super::lease_update(owner, now, now, ids.clone())).await,
            plan_of(super::renew_update(owner, now, ids)).await,
        ] {
            assert!(
                plan.contains("sqlite_autoindex_transactions_1 (id=?)"),
                "not by id: {plan}"
            );
        }
    }
}

/// What a monitor sweep leased.
#[derive(Debug, Default)]
pub struct Leased {
    /// The records, oldest first.
    pub records: Vec<OpenTransaction>,
    /// Those another core held last: what this core remembers of them (since when a node
    /// refused them, say) is from before that core's turn, and no longer true.
    pub taken_over: HashSet<Uuid>,
}
