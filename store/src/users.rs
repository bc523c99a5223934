//! Users, and the lock on a user's row that serializes what is counted or checked per user
//! (its active keys, its default wallet) against concurrent requests.

use sea_orm::{
    ActiveModelTrait, ActiveValue::Set, ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter,
    QueryOrder, sea_query::Expr,
};
use uuid::Uuid;

use super::{Store, entities::users, is_unique_violation};
use crate::Conn;
use crate::error::{Result, StoreError};
use walletops_domain::User;

impl From<users::Model> for User {
    fn from(m: users::Model) -> Self {
        User {
            id: m.id,
            name: m.name,
            created_at: m.created_at,
            provider_user_id: m.provider_user_id,
        }
    }
}

/// Locks user `user_id`'s row until `conn`'s transaction ends (a row lock on PostgreSQL, the
/// write lock on SQLite) by writing it unchanged: what is counted or checked per user next
/// (its active keys, its default wallet) cannot change under a concurrent request.
/// `NOT_FOUND` when there is no such user.
pub(crate) async fn lock_user<C: Conn>(conn: &C, user_id: Uuid) -> Result<()> {
    let conn = conn.sea();
    let locked = users::Entity::update_many()
        .col_expr(users::Column::Name, Expr::col(users::Column::Name))
        .filter(users::Column::Id.eq(user_id))
        .exec(conn)
        .await?;
    if locked.rows_affected == 0 {
        return Err(StoreError::NoSuchUser);
    }
    Ok(())
}

/// Locks, in `conn`'s transaction, the user owning key `key_id`, as `lock_user`: a change
/// of a key's limits or policy is ordered with the making of keys from it, which copies
/// them, so no key made meanwhile misses the change.
pub(crate) async fn lock_owner_of<C: Conn>(conn: &C, key_id: Uuid) -> Result<()> {
    // No key, nothing made from it to miss the change.
    match super::entities::api_keys::Entity::find_by_id(key_id)
        .one(conn.sea())
        .await?
    {
        Some(owner) => lock_user(conn, owner.user_id).await,
        None => Ok(()),
    }
}

impl Store {
    /// Inserts a user; refused `UserNameTaken` when its name is taken.
    pub async fn insert_user(&self, name: &str) -> Result<User> {
        let row = users::ActiveModel {
            id: Set(Uuid::now_v7()),
            name: Set(name.to_owned()),
            created_at: Set(chrono::Utc::now()),
            provider_user_id: Set(None),
            password_hash: Set(None),
        };
        match row.insert(self.sea()).await {
            Ok(m) => Ok(m.into()),
            Err(e) if is_unique_violation(&e) => Err(StoreError::UserNameTaken),
            Err(e) => Err(e.into()),
        }
    }

    /// The user with id `id`; `NOT_FOUND` when there is none.
    pub async fn user_by_id(&self, id: Uuid) -> Result<User> {
        users::Entity::find_by_id(id)
            .one(self.sea())
            .await?
            .map(Into::into)
            .ok_or(StoreError::NoSuchUser)
    }

    /// The user with id or name `id_or_name`.
    pub async fn find_user(&self, id_or_name: &str) -> Result<Option<User>> {
        let by_id = match Uuid::parse_str(id_or_name) {
            Ok(id) => users::Entity::find_by_id(id).one(self.sea()).await?,
            Err(_) => None,
        };
        let found = match by_id {
            Some(m) => Some(m),
            None => {
                use sea_orm::{ColumnTrait, QueryFilter};
                users::Entity::find()
                    .filter(users::Column::Name.eq(id_or_name))
                    .one(self.sea())
                    .await?
            }
        };
        Ok(found.map(Into::into))
    }

    /// Every user, oldest first.
    pub async fn list_users(&self) -> Result<Vec<User>> {
        Ok(users::Entity::find()
            .order_by_asc(users::Column::CreatedAt)
            .all(self.sea())
            .await?
            .into_iter()
            .map(Into::into)
            .collect())
    }

    /// How many users exist.
    pub async fn count_users(&self) -> Result<u64> {
        Ok(users::Entity::find().count(self.sea()).await?)
    }
}
