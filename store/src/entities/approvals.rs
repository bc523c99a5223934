//! Entity of `approvals`: one row per write of a limited key held for a person's decision,
//! with the unsigned request and what became of it.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "approvals")]
pub(crate) struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub(crate) id: Uuid,
    pub(crate) user_id: Uuid,
    pub(crate) key_id: Uuid,
    pub(crate) idempotency_key: Uuid,
    pub(crate) path: String,
    pub(crate) request: Vec<u8>,
    pub(crate) request_hash: String,
    pub(crate) chain: String,
    pub(crate) asset: String,
    pub(crate) amount: String,
    pub(crate) threshold: String,
    pub(crate) summary: String,
    pub(crate) state: String,
    pub(crate) created_at: DateTimeUtc,
    pub(crate) expires_at: DateTimeUtc,
    pub(crate) decided_by: Option<String>,
    pub(crate) decided_at: Option<DateTimeUtc>,
    pub(crate) reason: Option<String>,
    pub(crate) transaction_id: Option<Uuid>,
    pub(crate) error: Option<String>,
    pub(crate) lease_until: Option<DateTimeUtc>,
    pub(crate) wallet: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub(crate) enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
