//! API keys: stored as the hash of their value, created under the owner's lock so concurrent
//! creations cannot pass the limit, and revoked together with the keys made with them and
//! the webhooks they all registered.

use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveModelTrait, ActiveValue::Set, ColumnTrait, Condition, ConnectionTrait, EntityTrait,
    PaginatorTrait, QueryFilter, QueryOrder, sea_query::Expr,
};
use uuid::Uuid;

use super::{Store, entities::api_keys, is_unique_violation};
use crate::error::{Result, StoreError};
use walletops_domain::{ApiKey, Scopes};

/// A key about to be stored: only the hash of its value, never the value.
#[derive(Debug)]
pub struct NewApiKey {
    /// Owner.
    pub user_id: Uuid,
    /// Descriptive name.
    pub name: String,
    /// Lookup prefix.
    pub prefix: String,
    /// Hex SHA-256 of the whole value.
    pub secret_hash: String,
    /// Expiry, if any.
    pub expires_at: Option<DateTime<Utc>>,
    /// The key it is created with, if a key creates it.
    pub created_by: Option<Uuid>,
    /// What it may do.
    pub scopes: Scopes,
}

impl From<api_keys::Model> for ApiKey {
    fn from(m: api_keys::Model) -> Self {
        // Written only from `Scopes`; a value this version cannot read grants nothing more
        // than reading.
        let scopes = m.scopes.parse().unwrap_or_else(|e| {
            tracing::error!(key = %m.prefix, error = %e, "unreadable scopes; reading only");
            Scopes::READ_ONLY
        });
        let lineage_id = super::lineage::lineage_of(&m);
        ApiKey {
            id: m.id,
            user_id: m.user_id,
            name: m.name,
            prefix: m.prefix,
            created_at: m.created_at,
            expires_at: m.expires_at,
            revoked_at: m.revoked_at,
            last_used_at: m.last_used_at,
            created_by: m.created_by,
            lineage_id,
            scopes,
            limited: m.limited,
        }
    }
}

fn active_at(now: DateTime<Utc>) -> Condition {
    Condition::all()
        .add(api_keys::Column::RevokedAt.is_null())
        .add(
            Condition::any()
                .add(api_keys::Column::ExpiresAt.is_null())
                .add(api_keys::Column::ExpiresAt.gt(now)),
        )
}

/// Whether key `id` is active (not revoked, not expired) at `now`, read on `conn`.
pub(crate) async fn key_active<C: ConnectionTrait>(
    conn: &C,
    id: Uuid,
    now: DateTime<Utc>,
) -> Result<bool> {
    Ok(api_keys::Entity::find_by_id(id)
        .filter(active_at(now))
        .one(conn)
        .await?
        .is_some())
}

/// Active keys a line may hold besides its first.
pub(crate) const MAX_IN_LINE: u64 = 3;

impl Store {
    /// How many lines of keys `user_id` has with an active key at `now` (a key and the keys
    /// made from it are one line).
    pub async fn active_key_lines(&self, user_id: Uuid, now: DateTime<Utc>) -> Result<u64> {
        let lines: std::collections::HashSet<Uuid> = api_keys::Entity::find()
            .filter(api_keys::Column::UserId.eq(user_id))
            .filter(active_at(now))
            .all(self.sea())
            .await?
            .iter()
            .map(super::lineage::lineage_of)
            .collect();
        Ok(lines.len() as u64)
    }

    /// Stores `key` unless its owner already has `max_active` active keys (`Full`), its
    /// limited maker's line `MAX_IN_LINE` active keys besides its first (`LineFull`: a
    /// limited key, an agent's, cannot spread itself over many keys, each with its own share
    /// of the rate budget), or its maker was revoked or expired meanwhile (`MakerInactive`).
    /// `Ok(None)` means the prefix is taken: the caller draws a new key and tries again.
    ///
    /// The count and the insert run in one transaction that first writes the owner's row, so
    /// two concurrent creations for one user are serialized (a row lock on PostgreSQL, the
    /// write lock on SQLite) and cannot both slip under the limit.
    pub async fn insert_api_key(
        &self,
        key: NewApiKey,
        max_active: u64,
        now: DateTime<Utc>,
    ) -> Result<Option<ApiKey>> {
        let txn = self.begin_sea().await?;
        super::users::lock_user(&txn, key.user_id).await?;
        // Its maker was checked when the request came in: revoked since (under this same
        // lock, so before or after, never during), it makes nothing.
        let maker = match key.created_by {
            Some(maker) => Some(
                api_keys::Entity::find_by_id(maker)
                    .filter(active_at(now))
                    .one(&txn)
                    .await?
                    .ok_or(StoreError::MakerInactive)?,
            ),
            None => None,
        };
        let active = api_keys::Entity::find()
            .filter(api_keys::Column::UserId.eq(key.user_id))
            .filter(active_at(now))
            .count(&txn)
            .await?;
        if active >= max_active {
            return Err(StoreError::Full(max_active));
        }
        if let Some(maker) = maker.as_ref().filter(|m| m.limited) {
            let in_line = api_keys::Entity::find()
                .filter(api_keys::Column::LineageId.eq(super::lineage::lineage_of(maker)))
                .filter(active_at(now))
                .count(&txn)
                .await?;
            if in_line >= MAX_IN_LINE {
                return Err(StoreError::LineFull(MAX_IN_LINE));
            }
        }
        let row = api_keys::ActiveModel {
            id: Set(Uuid::now_v7()),
            user_id: Set(key.user_id),
            name: Set(key.name),
            prefix: Set(key.prefix),
            secret_hash: Set(key.secret_hash),
            created_at: Set(now),
            expires_at: Set(key.expires_at),
            revoked_at: Set(None),
            last_used_at: Set(None),
            created_by: Set(key.created_by),
            scopes: Set(key.scopes.to_string()),
            limited: Set(maker.as_ref().is_some_and(|m| m.limited)),
            lineage_id: Set(maker.as_ref().map(super::lineage::lineage_of)),
        };
        match row.insert(&txn).await {
            Ok(m) => {
                if let Some(maker) = &maker {
                    super::lineage::inherit(&txn, maker, m.id).await?;
                }
                txn.commit().await?;
                Ok(Some(m.into()))
            }
            Err(e) if is_unique_violation(&e) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The key with lookup prefix `prefix`, and the hash of its value.
    pub async fn find_api_key_by_prefix(&self, prefix: &str) -> Result<Option<(ApiKey, String)>> {
        Ok(api_keys::Entity::find()
            .filter(api_keys::Column::Prefix.eq(prefix))
            .one(self.sea())
            .await?
            .map(|m| {
                let hash = m.secret_hash.clone();
                (m.into(), hash)
            }))
    }

    /// `find_api_key_by_prefix` for a request that only reads: from memory while this core
    /// hears of key changes (`watch_key_changes`), which drop what it holds.
    pub async fn find_api_key_for_read(&self, prefix: &str) -> Result<Option<(ApiKey, String)>> {
        let generation = match self.keys.get(prefix) {
            Ok(held) => return Ok(Some(held)),
            Err(generation) => generation,
        };
        let found = self.find_api_key_by_prefix(prefix).await?;
        if let Some(key) = &found {
            self.keys.put(prefix, key.clone(), generation);
        }
        Ok(found)
    }

    /// The key with id `id`.
    pub async fn api_key(&self, id: Uuid) -> Result<Option<ApiKey>> {
        Ok(api_keys::Entity::find_by_id(id)
            .one(self.sea())
            .await?
            .map(Into::into))
    }

    /// Every key of `user_id`, newest first.
    pub async fn list_api_keys(&self, user_id: Uuid) -> Result<Vec<ApiKey>> {
        Ok(api_keys::Entity::find()
            .filter(api_keys::Column::UserId.eq(user_id))
            .order_by_desc(api_keys::Column::CreatedAt)
            .order_by_desc(api_keys::Column::Id)
            .all(self.sea())
            .await?
            .into_iter()
            .map(Into::into)
            .collect())
    }

    /// Revokes the key of `user_id` whose id or prefix is `id_or_prefix`, and with it every
    /// key created with it (and theirs), in one transaction that holds the user's lock, as
    /// key creation does. `by`, the key the revocation is made with, may revoke only itself
    /// and the keys made from it (`NotInLine` otherwise); `None` (the owner) any. A key
    /// revoked before keeps its first revocation time. `None` when the user has no such key.
    pub async fn revoke_api_key(
        &self,
        user_id: Uuid,
        id_or_prefix: &str,
        by: Option<Uuid>,
        now: DateTime<Utc>,
    ) -> Result<Option<ApiKey>> {
        let mut which = Condition::any().add(api_keys::Column::Prefix.eq(id_or_prefix));
        if let Ok(id) = Uuid::parse_str(id_or_prefix) {
            which = which.add(api_keys::Column::Id.eq(id));
        }
        let txn = self.begin_sea().await?;
        super::users::lock_user(&txn, user_id).await?;
        let Some(key) = api_keys::Entity::find()
            .filter(api_keys::Column::UserId.eq(user_id))
            .filter(which)
            .one(&txn)
            .await?
        else {
            return Ok(None);
        };
        if let Some(by) = by
            && !super::lineage::descends_from(&txn, key.id, by).await?
        {
            return Err(StoreError::NotInLine);
        }
        // The key, the keys it created, theirs, and so on, through keys revoked before too (a
        // key made with a leaked one, then revoked, may have made others that live on).
        let line = super::lineage::with_descendants(&txn, key.id).await?;
        api_keys::Entity::update_many()
            .col_expr(api_keys::Column::RevokedAt, Expr::value(now))
            .filter(api_keys::Column::Id.is_in(line.iter().copied()))
            .filter(api_keys::Column::RevokedAt.is_null())
            .exec(&txn)
            .await?;
        // The webhooks those keys registered stop with them, in this transaction: a leaked
        // key cannot leave an endpoint behind that goes on receiving the user's events.
        super::webhooks::disable_endpoints_of_keys(&txn, &line, now).await?;
        let revoked = api_keys::Entity::find_by_id(key.id).one(&txn).await?;
        txn.commit().await?;
        self.keys.drop_all();
        Ok(revoked.map(Into::into))
    }

    /// Records a use of key `id` at `now` unless one after `stale` is recorded already (a
    /// concurrent request may have written it since the key was read).
    pub async fn touch_api_key(
        &self,
        id: Uuid,
        now: DateTime<Utc>,
        stale: DateTime<Utc>,
    ) -> Result<()> {
        api_keys::Entity::update_many()
            .col_expr(api_keys::Column::LastUsedAt, Expr::value(now))
            .filter(api_keys::Column::Id.eq(id))
            .filter(
                Condition::any()
                    .add(api_keys::Column::LastUsedAt.is_null())
                    .add(api_keys::Column::LastUsedAt.lt(stale)),
            )
            .exec(self.sea())
            .await?;
        Ok(())
    }
}
