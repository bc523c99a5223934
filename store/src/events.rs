//! The outbox of transaction status changes (`transaction_events`): a row is written in the
//! database transaction of the change it tells of; the sequencer then numbers the rows in
//! the order they became visible, which readers resume by.

use chrono::Utc;
use sea_orm::{
    ActiveValue::{NotSet, Set},
    ColumnTrait, ConnectionTrait, DatabaseBackend, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect, Statement,
};
use uuid::Uuid;

use super::{Store, entities::transaction_events as events};
use crate::Conn;
use crate::error::Result;
use walletops_domain::{
    DEPOSIT_SUBJECT, DepositState, EventType, OpenTransaction, TRANSACTION_SUBJECT, TxStatus,
};

/// The PostgreSQL advisory lock the sequencers of every core take in turn.
const SEQUENCER_LOCK: i64 = 0x7761_6c6c_6574_6576; // "walletev"

/// Rows numbered in one sequencing transaction at most.
const SEQUENCED_AT_ONCE: i64 = 500;

/// A status change as read back, numbered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionEvent {
    /// Its place in commit order: resume after it.
    pub seq: u64,
    /// The record that changed.
    pub transaction_id: Uuid,
    /// The record's chain slug.
    pub chain: String,
    /// The status it entered.
    pub status: TxStatus,
}

/// Outbox rows telling that each `(id, user, chain)` of `subjects` had `event`.
async fn insert_rows<C: sea_orm::ConnectionTrait>(
    conn: &C,
    subjects: Vec<(Uuid, Uuid, String)>,
    event: EventType,
) -> Result<()> {
    let now = Utc::now();
    let rows: Vec<_> = subjects
        .into_iter()
        .map(|(subject_id, user_id, chain)| events::ActiveModel {
            id: NotSet,
            seq: Set(None),
            transaction_id: Set(subject_id),
            user_id: Set(user_id),
            chain: Set(chain),
            status: Set(event.state().to_owned()),
            subject: Set(event.subject().to_owned()),
            created_at: Set(now),
        })
        .collect();
    for run in super::in_cached_shapes(rows) {
        events::Entity::insert_many(run)
            .exec_without_returning(conn)
            .await?;
    }
    Ok(())
}

/// The highest event number given, read in `conn` (0: none).
async fn max_seq<C: ConnectionTrait>(conn: &C) -> Result<i64> {
    Ok(events::Entity::find()
        .select_only()
        .column_as(events::Column::Seq.max(), "last")
        .into_tuple::<Option<i64>>()
        .one(conn)
        .await?
        .flatten()
        .unwrap_or(0))
}

impl Store {
    /// Notes, in `conn`'s transaction and a few INSERTs, that each record `(id, user, chain)`
    /// of `records` entered `status`.
    pub async fn insert_events<C: Conn>(
        &self,
        conn: &C,
        records: impl IntoIterator<Item = (Uuid, Uuid, String)>,
        status: TxStatus,
    ) -> Result<()> {
        let conn = conn.sea();
        let records: Vec<_> = records.into_iter().collect();
        if matches!(status, TxStatus::Failed | TxStatus::Dropped) {
            // Nothing moved: what the write held against its key's budget is free again.
            self.release_spend(conn, records.iter().map(|(id, _, _)| *id))
                .await?;
        }
        insert_rows(conn, records, EventType::Transaction(status)).await
    }

    /// Notes, in `conn`'s transaction, that each deposit `(id, user, chain)` of `deposits`
    /// entered `state`.
    pub(crate) async fn insert_deposit_events<C: sea_orm::ConnectionTrait>(
        &self,
        conn: &C,
        deposits: Vec<(Uuid, Uuid, String)>,
        state: DepositState,
    ) -> Result<()> {
        insert_rows(conn, deposits, EventType::Deposit(state)).await
    }

    /// Notes, in `conn`'s transaction, that payout `(id, user, chain)` completed.
    pub(crate) async fn insert_payout_event<C: sea_orm::ConnectionTrait>(
        &self,
        conn: &C,
        payout: (Uuid, Uuid, String),
    ) -> Result<()> {
        insert_rows(conn, vec![payout], EventType::PayoutCompleted).await
    }

    /// Notes, in `conn`'s transaction, that the key line `(id, user, chain)` was frozen.
    pub(crate) async fn insert_key_event<C: sea_orm::ConnectionTrait>(
        &self,
        conn: &C,
        line: (Uuid, Uuid, String),
    ) -> Result<()> {
        insert_rows(conn, vec![line], EventType::KeyFrozen).await
    }

    /// `insert_event` for an open record.
    pub async fn insert_event_of<C: Conn>(
        &self,
        conn: &C,
        open: &OpenTransaction,
        status: TxStatus,
    ) -> Result<()> {
        let conn = conn.sea();
        let about = (open.id, open.user_id, open.chain.clone());
        self.insert_events(conn, [about], status).await
    }

    /// Numbers the events that became visible since the last call, in id order after the
    /// highest number given: an event whose transaction committed late gets a number after
    /// those already read. One sequencer at a time, across cores. In the same transaction,
    /// makes the events' webhook deliveries, retried for `retry_for`. How many it numbered.
    pub async fn sequence_events(&self, retry_for: std::time::Duration) -> Result<usize> {
        let waiting = events::Entity::find()
            .select_only()
            .column(events::Column::Id)
            .filter(events::Column::Seq.is_null())
            .limit(1)
            .into_tuple::<i64>()
            .one(self.sea())
            .await?;
        if waiting.is_none() {
            return Ok(0);
        }
        let txn = self.begin_sea().await?;
        let backend = txn.get_database_backend();
        if backend == DatabaseBackend::Postgres {
            txn.execute_raw(Statement::from_sql_and_values(
                backend,
                "SELECT pg_advisory_xact_lock($1)",
                [SEQUENCER_LOCK.into()],
            ))
            .await?;
        }
        let last = max_seq(&txn).await?;
        // One statement numbers the batch: the visible rows without a number, by id, after
        // the last number.
        let (last_at, limit_at) = match backend {
            DatabaseBackend::Postgres => ("$1", "$2"),
            _ => ("?", "?"),
        };
        let numbered = txn
            .execute_raw(Statement::from_sql_and_values(
                backend,
                format!(
                    "UPDATE transaction_events SET seq = {last_at} + numbered.n \
                     FROM (SELECT id, ROW_NUMBER() OVER (ORDER BY id) AS n \
                           FROM transaction_events WHERE seq IS NULL ORDER BY id LIMIT {limit_at}) \
                          AS numbered \
                     WHERE transaction_events.id = numbered.id"
                ),
                [last.into(), SEQUENCED_AT_ONCE.into()],
            ))
            .await?
            .rows_affected();
        let numbered_to = last.saturating_add(i64::try_from(numbered).unwrap_or(i64::MAX));
        let retry_until =
            Utc::now() + chrono::TimeDelta::from_std(retry_for).unwrap_or(chrono::TimeDelta::MAX);
        self.create_deliveries(&txn, (last, numbered_to), retry_until)
            .await?;
        txn.commit().await?;
        Ok(usize::try_from(numbered).unwrap_or(usize::MAX))
    }

    /// The highest event number given so far (0: none): a watcher from now on starts
    /// after it.
    pub async fn last_event_seq(&self) -> Result<u64> {
        Ok(u64::try_from(max_seq(self.sea()).await?).unwrap_or(0))
    }

    /// When the change numbered `seq` happened: its outbox row's time, written in the
    /// change's own database transaction. `None`: no such event.
    pub async fn event_at(&self, seq: u64) -> Result<Option<chrono::DateTime<Utc>>> {
        Ok(events::Entity::find()
            .select_only()
            .column(events::Column::CreatedAt)
            .filter(events::Column::Seq.eq(i64::try_from(seq).unwrap_or(i64::MAX)))
            .into_tuple::<chrono::DateTime<Utc>>()
            .one(self.sea())
            .await?)
    }

    /// The numbered events of `user_id` after `after`, oldest first, at most `limit`,
    /// optionally of one record or one chain.
    pub async fn events_after(
        &self,
        user_id: Uuid,
        after: u64,
        (transaction_id, chain): (Option<Uuid>, Option<&str>),
        limit: u64,
    ) -> Result<Vec<TransactionEvent>> {
        let rows = self
            .numbered(
                user_id,
                TRANSACTION_SUBJECT,
                after,
                (transaction_id, chain),
                limit,
            )
            .await?;
        Ok(rows
            .into_iter()
            .filter_map(|row| {
                Some(TransactionEvent {
                    seq: u64::try_from(row.seq?).ok()?,
                    transaction_id: row.transaction_id,
                    chain: row.chain,
                    status: serde_json::from_value(serde_json::Value::String(row.status)).ok()?,
                })
            })
            .collect())
    }
}

impl Store {
    /// The numbered deposit events of `user_id` after `after`, oldest first, at most
    /// `limit`, optionally of one chain.
    pub async fn deposit_events_after(
        &self,
        user_id: Uuid,
        after: u64,
        chain: Option<&str>,
        limit: u64,
    ) -> Result<Vec<DepositEvent>> {
        let rows = self
            .numbered(user_id, DEPOSIT_SUBJECT, after, (None, chain), limit)
            .await?;
        Ok(rows
            .into_iter()
            .filter_map(|row| {
                Some(DepositEvent {
                    seq: u64::try_from(row.seq?).ok()?,
                    deposit_id: row.transaction_id,
                    state: DepositState::parse(&row.status)?,
                    at: row.created_at,
                })
            })
            .collect())
    }
}

impl Store {
    /// The numbered outbox rows about `subject` of `user_id` after `after`, oldest first,
    /// at most `limit`, optionally of one subject id or one chain.
    async fn numbered(
        &self,
        user_id: Uuid,
        subject: &str,
        after: u64,
        (subject_id, chain): (Option<Uuid>, Option<&str>),
        limit: u64,
    ) -> Result<Vec<events::Model>> {
        let mut query = events::Entity::find()
            .filter(events::Column::UserId.eq(user_id))
            .filter(events::Column::Subject.eq(subject))
            .filter(events::Column::Seq.gt(i64::try_from(after).unwrap_or(i64::MAX)));
        if let Some(id) = subject_id {
            query = query.filter(events::Column::TransactionId.eq(id));
        }
        if let Some(chain) = chain {
            query = query.filter(events::Column::Chain.eq(chain));
        }
        Ok(query
            .order_by_asc(events::Column::Seq)
            .limit(limit)
            .all(self.sea())
            .await?)
    }
}

/// A deposit's change of state as read back, numbered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DepositEvent {
    /// Its place in commit order (shared with transaction events): resume after it.
    pub seq: u64,
    /// The deposit.
    pub deposit_id: Uuid,
    /// The state it entered.
    pub state: DepositState,
    /// When.
    pub at: chrono::DateTime<Utc>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{Backend, on_store};

    fn ids(events: &[TransactionEvent]) -> Vec<Uuid> {
        events.iter().map(|e| e.transaction_id).collect()
    }

    /// PostgreSQL alone: SQLite has one writer at a time, so its commit order is its
    /// insertion order.
    #[tokio::test]
    async fn numbers_follow_commit_order_not_insertion_order() {
        on_store(Backend::Postgres, |store| async move {
            let (user, late, early) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
            let chain = || "anvil".to_owned();
            // `late` is written first, its transaction left open while `early` commits.
            let open = store.begin().await.expect("begin");
            store
                .insert_events(&open, [(late, user, chain())], TxStatus::Submitted)
                .await
                .expect("insert");
            store
                .insert_events(store.db(), [(early, user, chain())], TxStatus::Confirmed)
                .await
                .expect("insert");
            store
                .sequence_events(std::time::Duration::from_secs(60))
                .await
                .expect("numbering");
            let seen = store
                .events_after(user, 0, (None, None), 10)
                .await
                .expect("reading");
            assert_eq!(ids(&seen), [early]);
            open.commit().await.expect("commit");
            store
                .sequence_events(std::time::Duration::from_secs(60))
                .await
                .expect("numbering");
            // A reader resuming after what it saw still gets the late commit.
            let after = store
                .events_after(user, seen[0].seq, (None, None), 10)
                .await
                .expect("reading");
            assert_eq!(ids(&after), [late]);
            assert_eq!(after[0].status, TxStatus::Submitted);
        })
        .await;
    }
}
