//! Idempotency-Key claims: inserted with one conflict-free INSERT so that of concurrent
//! requests exactly one claims a key, kept while their transaction may still be mined, and
//! replayed to retries.

use chrono::{DateTime, Utc};
use std::collections::HashSet;

use sea_orm::{
    ActiveValue::Set,
    ColumnTrait, Condition, ConnectionTrait, EntityTrait, QueryFilter, TryInsertResult,
    sea_query::{Alias, Expr, ExprTrait, JoinType, Query},
};
use uuid::Uuid;

use super::{
    Store,
    entities::{idempotency_keys as keys, transactions as txs},
    transactions::{ended_unmined, open_statuses},
};
use crate::Conn;
use crate::error::{Result, StoreError};
use walletops_domain::{ClaimState, OpenTransaction, Submission};

/// A key as stored.
#[derive(Debug, Clone)]
pub struct StoredClaim {
    pub request_hash: String,
    pub state: ClaimState,
    pub response: Option<Submission>,
    pub error: Option<String>,
    pub transaction_id: Option<Uuid>,
}

/// A claim row to insert: the claim, its state and what it stands for.
#[derive(Debug)]
pub struct ClaimRow<'a> {
    /// The claim.
    pub claim: &'a NewClaim,
    /// Its state.
    pub state: ClaimState,
    /// The record it answers from, if any.
    pub transaction_id: Option<Uuid>,
    /// The answer kept for a replay, if any.
    pub response: Option<&'a Submission>,
    /// The refusal kept for a replay, if any.
    pub error: Option<String>,
}

/// A key to claim, and for which request.
#[derive(Debug, Clone)]
pub struct NewClaim {
    /// The caller's user.
    pub user: Uuid,
    /// The Idempotency-Key.
    pub key: Uuid,
    /// The operation it was used for.
    pub path: String,
    /// The canonical hash of the request.
    pub request_hash: String,
    /// When it was claimed.
    pub created_at: DateTime<Utc>,
    /// When it may be used again for another request.
    pub expires_at: DateTime<Utc>,
    /// What the write moves, per asset, held against its key's limits as the claim is made;
    /// empty when the caller has no limits to hold it against (a session) or it moves nothing.
    pub spends: Vec<walletops_domain::Spend>,
}

impl Store {
    /// The claim of `(user, key)` that is still within its retention; an expired one is
    /// deleted, so the key may be used again. `retention` also runs from the settling of
    /// the claim's transaction (see `expired_and_settled`).
    pub async fn find_idempotency_key(
        &self,
        user: Uuid,
        key: Uuid,
        now: DateTime<Utc>,
        retention: chrono::Duration,
    ) -> Result<Option<StoredClaim>> {
        let Some(mut found) = keys::Entity::find_by_id((user, key))
            .one(self.sea())
            .await?
        else {
            return Ok(None);
        };
        // Only a claim past its retention costs a write; the usual lookup is a read.
        if found.expires_at < now {
            let deleted = keys::Entity::delete_many()
                .filter(keys::Column::UserId.eq(user))
                .filter(keys::Column::Key.eq(key))
                .filter(expired_and_settled(now, retention))
                .exec(self.sea())
                .await?;
            if deleted.rows_affected == 1 {
                return Ok(None);
            }
            // Kept (its transaction is open), or a concurrent lookup deleted it and its
            // request may have claimed the key anew: what stands now is the answer.
            match keys::Entity::find_by_id((user, key))
                .one(self.sea())
                .await?
            {
                Some(now_stored) => found = now_stored,
                None => return Ok(None),
            }
        }
        let unreadable = |what: &str| {
            StoreError::Corrupt(anyhow::anyhow!(
                "stored idempotency key {key}: {what} unreadable"
            ))
        };
        let state = found
            .state
            .parse::<ClaimState>()
            .map_err(|()| unreadable("state"))?;
        let response = found
            .response
            .map(serde_json::from_value::<Submission>)
            .transpose()
            .map_err(|_| unreadable("response"))?;
        Ok(Some(StoredClaim {
            request_hash: found.request_hash,
            state,
            response,
            error: found.error,
            transaction_id: found.transaction_id,
        }))
    }

    /// Inserts the claim with one INSERT on the primary key, in `conn`'s transaction. Of two
    /// concurrent claims exactly one inserts; the other gets `false` (ON CONFLICT DO NOTHING,
    /// so a PostgreSQL transaction is not aborted by the conflict).
    pub async fn insert_idempotency_key<C: Conn>(
        &self,
        conn: &C,
        claim: &NewClaim,
        state: ClaimState,
        transaction_id: Option<Uuid>,
        response: Option<&Submission>,
        error: Option<String>,
    ) -> Result<bool> {
        let conn = conn.sea();
        let row = ClaimRow {
            claim,
            state,
            transaction_id,
            response,
            error,
        };
        Ok(!self
            .insert_idempotency_keys(conn, vec![row])
            .await?
            .is_empty())
    }

    /// Inserts claims in a few INSERTs (`in_cached_shapes`), as `insert_idempotency_key` does
    /// one; returns the `(user, key)`s that were inserted. Of rows with the same key, at most
    /// one inserts.
    pub async fn insert_idempotency_keys<C: Conn>(
        &self,
        conn: &C,
        rows: Vec<ClaimRow<'_>>,
    ) -> Result<HashSet<(Uuid, Uuid)>> {
        let conn = conn.sea();
        if rows.is_empty() {
            return Ok(HashSet::new());
        }
        let mut models = Vec::with_capacity(rows.len());
        for row in rows {
            models.push(keys::ActiveModel {
                user_id: Set(row.claim.user),
                key: Set(row.claim.key),
                path: Set(row.claim.path.clone()),
                request_hash: Set(row.claim.request_hash.clone()),
                state: Set(row.state.as_str().to_owned()),
                response: Set(row.response.map(response_json).transpose()?),
                error: Set(row.error),
                transaction_id: Set(row.transaction_id),
                created_at: Set(row.claim.created_at),
                expires_at: Set(row.claim.expires_at),
            });
        }
        let mut won = HashSet::new();
        for run in super::in_cached_shapes(models) {
            let inserted = keys::Entity::insert_many(run)
                .on_conflict_do_nothing()
                .exec_with_returning_keys(conn)
                .await?;
            if let TryInsertResult::Inserted(keys) = inserted {
                won.extend(keys);
            }
        }
        Ok(won)
    }

    /// Replaces the stored response of the claim that `claim`'s request committed with
    /// transaction `transaction_id`; only that request's own row is touched, and only while
    /// it still stands for a success: a claim its record's ending failed meanwhile stays
    /// failed.
    pub async fn replace_claim_response(
        &self,
        claim: &NewClaim,
        transaction_id: Uuid,
        response: &Submission,
    ) -> Result<bool> {
        let updated = keys::Entity::update_many()
            .col_expr(
                keys::Column::Response,
                Expr::value(Some(response_json(response)?)),
            )
            .filter(keys::Column::UserId.eq(claim.user))
            .filter(keys::Column::Key.eq(claim.key))
            .filter(keys::Column::TransactionId.eq(transaction_id))
            .filter(keys::Column::State.eq(ClaimState::Succeeded.as_str()))
            .exec(self.sea())
            .await?;
        Ok(updated.rows_affected == 1)
    }

    /// Marks the claim committed with record `open` failed with `error`, in
    /// `conn`'s transaction: the one that fails the record, when the request that signed it
    /// answers with the refusal. Done apart, a crash between the two writes would leave the
    /// key replaying the success response of a record that failed, and the caller would
    /// never send the payment again.
    pub(super) async fn fail_claim_of<C: ConnectionTrait>(
        &self,
        conn: &C,
        open: &OpenTransaction,
        error: String,
    ) -> Result<()> {
        keys::Entity::update_many()
            .col_expr(
                keys::Column::State,
                Expr::value(ClaimState::Failed.as_str()),
            )
            .col_expr(
                keys::Column::Response,
                Expr::value(Option::<serde_json::Value>::None),
            )
            .col_expr(keys::Column::Error, Expr::value(error))
            .filter(keys::Column::UserId.eq(open.user_id))
            .filter(keys::Column::TransactionId.eq(open.id))
            .exec(conn)
            .await?;
        Ok(())
    }

    /// Has the failed claim of record `open`'s key, if there is one, answer from the record
    /// again (succeeded, with no stored response: a replay reads the record), inside `conn`'s
    /// transaction: the record was mined after all.
    pub(super) async fn unfail_claim_of<C: ConnectionTrait>(
        &self,
        conn: &C,
        open: &OpenTransaction,
    ) -> Result<()> {
        keys::Entity::update_many()
            .col_expr(
                keys::Column::State,
                Expr::value(ClaimState::Succeeded.as_str()),
            )
            .col_expr(keys::Column::Error, Expr::value(Option::<String>::None))
            .filter(keys::Column::UserId.eq(open.user_id))
            .filter(keys::Column::TransactionId.eq(open.id))
            .filter(keys::Column::State.eq(ClaimState::Failed.as_str()))
            .exec(conn)
            .await?;
        Ok(())
    }

    /// Deletes claims past their retention.
    pub async fn purge_idempotency_keys(
        &self,
        now: DateTime<Utc>,
        retention: chrono::Duration,
    ) -> Result<u64> {
        Ok(keys::Entity::delete_many()
            .filter(expired_and_settled(now, retention))
            .exec(self.sea())
            .await?
            .rows_affected)
    }
}

/// The stored form of a claim's response.
fn response_json(response: &Submission) -> Result<serde_json::Value> {
    serde_json::to_value(response)
        .map_err(|e| StoreError::Corrupt(anyhow::anyhow!("response unstorable: {e}")))
}

/// Claims past their retention whose transaction, if any, has been settled for the
/// retention too. A key whose transaction is still open (stuck, or held back by the fee
/// cap) outlives its retention: dropping it would let a retry under the key sign a second
/// payment beside the first. So does one whose transaction settled only lately (a
/// payment stuck for a day must not lose its key the moment it confirms), and one whose
/// DROPPED or FAILED transaction has its nonce held by an open record (a nonce filler,
/// or a send given the freed nonce): that record may yet find it mined after all, and
/// its key must then answer from it.
fn expired_and_settled(now: DateTime<Utc>, retention: chrono::Duration) -> Condition {
    let (mine, other) = (Alias::new("mine"), Alias::new("other"));
    // Correlated on the primary key, so a purge reads only the keys' own records.
    let unsettled = Query::select()
        .expr(Expr::val(1))
        .from(txs::Entity)
        .and_where(
            Expr::col((txs::Entity, txs::Column::Id))
                .equals((keys::Entity, keys::Column::TransactionId)),
        )
        .cond_where(
            Condition::any()
                .add(txs::Column::Status.is_in(open_statuses()))
                .add(txs::Column::UpdatedAt.gt(now - retention)),
        )
        .to_owned();
    // An ended record whose nonce an open record holds (its filler, or a send that was
    // given the freed nonce) may still be found mined: when that open record finds the
    // nonce taken, it settles the ended one and its key answers from it again.
    let same_nonce =
        |column: txs::Column| Expr::col((other.clone(), column)).equals((mine.clone(), column));
    let nonce_held = Query::select()
        .expr(Expr::val(1))
        .from_as(txs::Entity, mine.clone())
        .join_as(
            JoinType::InnerJoin,
            txs::Entity,
            other.clone(),
            Condition::all()
                .add(same_nonce(txs::Column::ChainId))
                .add(same_nonce(txs::Column::FromAddress))
                .add(same_nonce(txs::Column::Nonce)),
        )
        .and_where(
            Expr::col((mine.clone(), txs::Column::Id))
                .equals((keys::Entity, keys::Column::TransactionId)),
        )
        .and_where(Expr::col((mine, txs::Column::Status)).is_in(ended_unmined()))
        .and_where(Expr::col((other, txs::Column::Status)).is_in(open_statuses()))
        .to_owned();
    Condition::all().add(keys::Column::ExpiresAt.lt(now)).add(
        Condition::any()
            .add(keys::Column::TransactionId.is_null())
            .add(
                Condition::all()
                    .add(Expr::exists(unsettled).not())
                    .add(Expr::exists(nonce_held).not()),
            ),
    )
}
