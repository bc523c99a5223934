//! Entity of `idempotency_keys`: one row per Idempotency-Key claimed by a user, holding the
//! request's hash and what a retry is answered with.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "idempotency_keys")]
pub(crate) struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub(crate) user_id: Uuid,
    #[sea_orm(primary_key, auto_increment = false)]
    pub(crate) key: Uuid,
    pub(crate) path: String,
    pub(crate) request_hash: String,
    pub(crate) state: String,
    pub(crate) response: Option<Json>,
    pub(crate) error: Option<String>,
    pub(crate) transaction_id: Option<Uuid>,
    pub(crate) created_at: DateTimeUtc,
    pub(crate) expires_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub(crate) enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
