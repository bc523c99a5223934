use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveValue::Set,
    ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter,
    sea_query::{Expr, OnConflict},
};
use uuid::Uuid;

use super::{Store, entities::idempotency_keys as keys};
use crate::error::Result;

/// A claimed key as stored.
#[derive(Debug, Clone)]
pub(crate) struct StoredClaim {
    pub(crate) request_hash: String,
    pub(crate) state: String,
    pub(crate) response: Option<serde_json::Value>,
    pub(crate) error: Option<String>,
    pub(crate) transaction_id: Option<Uuid>,
}

/// What claiming a key found.
#[derive(Debug)]
pub(crate) enum ClaimRow {
    /// The key was free and is now this request's.
    Won,
    /// The key was claimed before.
    Taken(StoredClaim),
}

impl Store {
    /// Claims `(user, key)` with one INSERT on the primary key: of two concurrent requests
    /// exactly one inserts. A claim past its retention is deleted first, so the key may be
    /// used again.
    pub(crate) async fn claim_idempotency_key(
        &self,
        user: Uuid,
        key: Uuid,
        path: &str,
        request_hash: &str,
        now: DateTime<Utc>,
        expires_at: DateTime<Utc>,
    ) -> Result<ClaimRow> {
        keys::Entity::delete_many()
            .filter(keys::Column::UserId.eq(user))
            .filter(keys::Column::Key.eq(key))
            .filter(keys::Column::ExpiresAt.lt(now))
            .exec(self.db())
            .await?;
        let row = keys::ActiveModel {
            user_id: Set(user),
            key: Set(key),
            path: Set(path.to_owned()),
            request_hash: Set(request_hash.to_owned()),
            state: Set("in_progress".to_owned()),
            response: Set(None),
            error: Set(None),
            transaction_id: Set(None),
            created_at: Set(now),
            expires_at: Set(expires_at),
        };
        let inserted = keys::Entity::insert(row)
            .on_conflict(
                OnConflict::columns([keys::Column::UserId, keys::Column::Key])
                    .do_nothing()
                    .to_owned(),
            )
            .exec_without_returning(self.db())
            .await?;
        if inserted == 1 {
            return Ok(ClaimRow::Won);
        }
        let m = keys::Entity::find_by_id((user, key))
            .one(self.db())
            .await?
            .ok_or_else(|| {
                crate::WalletOpsError::Internal(anyhow::anyhow!(
                    "idempotency key {key} vanished while claimed"
                ))
            })?;
        Ok(ClaimRow::Taken(StoredClaim {
            request_hash: m.request_hash,
            state: m.state,
            response: m.response,
            error: m.error,
            transaction_id: m.transaction_id,
        }))
    }

    /// Records how the claimed request ended.
    pub(crate) async fn finish_idempotency_key(
        &self,
        user: Uuid,
        key: Uuid,
        state: &str,
        response: Option<serde_json::Value>,
        error: Option<String>,
    ) -> Result<()> {
        keys::Entity::update_many()
            .col_expr(keys::Column::State, Expr::value(state))
            .col_expr(keys::Column::Response, Expr::value(response))
            .col_expr(keys::Column::Error, Expr::value(error))
            .filter(keys::Column::UserId.eq(user))
            .filter(keys::Column::Key.eq(key))
            .exec(self.db())
            .await?;
        Ok(())
    }

    /// Links the claimed key to the transaction it created, inside the signing transaction.
    pub(crate) async fn link_idempotency_key<C: ConnectionTrait>(
        &self,
        conn: &C,
        user: Uuid,
        key: Uuid,
        transaction_id: Uuid,
    ) -> Result<()> {
        keys::Entity::update_many()
            .col_expr(keys::Column::TransactionId, Expr::value(transaction_id))
            .filter(keys::Column::UserId.eq(user))
            .filter(keys::Column::Key.eq(key))
            .exec(conn)
            .await?;
        Ok(())
    }

    /// Deletes claims past their retention.
    pub(crate) async fn purge_idempotency_keys(&self, now: DateTime<Utc>) -> Result<u64> {
        Ok(keys::Entity::delete_many()
            .filter(keys::Column::ExpiresAt.lt(now))
            .exec(self.db())
            .await?
            .rows_affected)
    }
}
