//! Dashboard passwords, sessions and one-time sign-in links. Tokens are stored as their
//! SHA-256 only, passwords as argon2id strings made by `auth`.

use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveModelTrait, ActiveValue::Set, ColumnTrait, Condition, EntityTrait, PaginatorTrait,
    QueryFilter, sea_query::Expr,
};
use uuid::Uuid;

use super::{
    Store,
    entities::{dashboard_sessions, sign_in_links, users},
};
use crate::error::Result;
use walletops_domain::{DashboardSession, User};

impl From<dashboard_sessions::Model> for DashboardSession {
    fn from(m: dashboard_sessions::Model) -> Self {
        DashboardSession {
            id: m.id,
            user_id: m.user_id,
            created_at: m.created_at,
            last_seen_at: m.last_seen_at,
            expires_at: m.expires_at,
            ended_at: m.ended_at,
        }
    }
}

/// A session about to be opened.
#[derive(Debug)]
pub struct NewSession {
    /// The signed-in user.
    pub user_id: Uuid,
    /// Hex SHA-256 of its token.
    pub token_hash: String,
    /// Its absolute end.
    pub expires_at: DateTime<Utc>,
}

impl Store {
    /// The user named `name` and its password hash, if it has one.
    pub async fn user_password(&self, name: &str) -> Result<Option<(User, Option<String>)>> {
        Ok(users::Entity::find()
            .filter(users::Column::Name.eq(name))
            .one(self.sea())
            .await?
            .map(|m| {
                let hash = m.password_hash.clone();
                (m.into(), hash)
            }))
    }

    /// Sets `user_id`'s password hash and ends its open sessions, in one transaction: a
    /// password changed because it leaked leaves no session opened with it.
    pub async fn set_password(&self, user_id: Uuid, hash: &str, now: DateTime<Utc>) -> Result<()> {
        let txn = self.begin_sea().await?;
        super::users::lock_user(&txn, user_id).await?;
        set_password_in(&txn, user_id, hash, now).await?;
        txn.commit().await?;
        Ok(())
    }

    /// Opens a session.
    pub async fn insert_session(
        &self,
        new: NewSession,
        now: DateTime<Utc>,
    ) -> Result<DashboardSession> {
        let row = dashboard_sessions::ActiveModel {
            id: Set(Uuid::now_v7()),
            user_id: Set(new.user_id),
            token_hash: Set(new.token_hash),
            created_at: Set(now),
            last_seen_at: Set(now),
            expires_at: Set(new.expires_at),
            ended_at: Set(None),
        };
        Ok(row.insert(self.sea()).await?.into())
    }

    /// The session with id `id`.
    pub async fn session(&self, id: Uuid) -> Result<Option<DashboardSession>> {
        Ok(dashboard_sessions::Entity::find_by_id(id)
            .one(self.sea())
            .await?
            .map(Into::into))
    }

    /// The session whose token hashes to `token_hash`.
    pub async fn find_session(&self, token_hash: &str) -> Result<Option<DashboardSession>> {
        Ok(dashboard_sessions::Entity::find()
            .filter(dashboard_sessions::Column::TokenHash.eq(token_hash))
            .one(self.sea())
            .await?
            .map(Into::into))
    }

    /// Records a request of session `id` at `now` unless one after `stale` is recorded.
    pub async fn touch_session(
        &self,
        id: Uuid,
        now: DateTime<Utc>,
        stale: DateTime<Utc>,
    ) -> Result<()> {
        dashboard_sessions::Entity::update_many()
            .col_expr(dashboard_sessions::Column::LastSeenAt, Expr::value(now))
            .filter(dashboard_sessions::Column::Id.eq(id))
            .filter(dashboard_sessions::Column::LastSeenAt.lt(stale))
            .exec(self.sea())
            .await?;
        Ok(())
    }

    /// Ends session `id` (signed out), if it is open.
    pub async fn end_session(&self, id: Uuid, now: DateTime<Utc>) -> Result<()> {
        dashboard_sessions::Entity::update_many()
            .col_expr(dashboard_sessions::Column::EndedAt, Expr::value(now))
            .filter(dashboard_sessions::Column::Id.eq(id))
            .filter(dashboard_sessions::Column::EndedAt.is_null())
            .exec(self.sea())
            .await?;
        Ok(())
    }

    /// Stores a sign-in link for `user_id`, valid until `expires_at`.
    pub async fn insert_sign_in_link(
        &self,
        user_id: Uuid,
        token_hash: String,
        expires_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<()> {
        sign_in_links::ActiveModel {
            id: Set(Uuid::now_v7()),
            user_id: Set(user_id),
            token_hash: Set(token_hash),
            created_at: Set(now),
            expires_at: Set(expires_at),
            used_at: Set(None),
        }
        .insert(self.sea())
        .await?;
        Ok(())
    }

    /// Whether the link whose token hashes to `token_hash` is unused and unexpired at `now`.
    pub async fn sign_in_link_usable(&self, token_hash: &str, now: DateTime<Utc>) -> Result<bool> {
        Ok(sign_in_links::Entity::find()
            .filter(sign_in_links::Column::TokenHash.eq(token_hash))
            .filter(sign_in_links::Column::UsedAt.is_null())
            .filter(sign_in_links::Column::ExpiresAt.gt(now))
            .count(self.sea())
            .await?
            > 0)
    }

    /// Uses the unused, unexpired link whose token hashes to `token_hash` and sets its
    /// user's password to `password_hash`, in one transaction: a link works once, and a
    /// failure leaves it unused. The user, or `None` when there is no such usable link.
    pub async fn redeem_sign_in_link(
        &self,
        token_hash: &str,
        password_hash: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<User>> {
        let txn = self.begin_sea().await?;
        let usable = Condition::all()
            .add(sign_in_links::Column::TokenHash.eq(token_hash))
            .add(sign_in_links::Column::UsedAt.is_null())
            .add(sign_in_links::Column::ExpiresAt.gt(now));
        let Some(link) = sign_in_links::Entity::find()
            .filter(usable.clone())
            .one(&txn)
            .await?
        else {
            return Ok(None);
        };
        // Conditional, so that of two redemptions at once only one uses the link.
        let used = sign_in_links::Entity::update_many()
            .col_expr(sign_in_links::Column::UsedAt, Expr::value(now))
            .filter(usable)
            .exec(&txn)
            .await?;
        if used.rows_affected != 1 {
            return Ok(None);
        }
        super::users::lock_user(&txn, link.user_id).await?;
        set_password_in(&txn, link.user_id, password_hash, now).await?;
        let user = users::Entity::find_by_id(link.user_id).one(&txn).await?;
        txn.commit().await?;
        Ok(user.map(Into::into))
    }
}

async fn set_password_in<C: sea_orm::ConnectionTrait>(
    conn: &C,
    user_id: Uuid,
    hash: &str,
    now: DateTime<Utc>,
) -> Result<()> {
    users::Entity::update_many()
        .col_expr(users::Column::PasswordHash, Expr::value(hash))
        .filter(users::Column::Id.eq(user_id))
        .exec(conn)
        .await?;
    dashboard_sessions::Entity::update_many()
        .col_expr(dashboard_sessions::Column::EndedAt, Expr::value(now))
        .filter(dashboard_sessions::Column::UserId.eq(user_id))
        .filter(dashboard_sessions::Column::EndedAt.is_null())
        .exec(conn)
        .await?;
    Ok(())
}
