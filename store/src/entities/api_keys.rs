//! Entity of `api_keys`: one row per API key, holding its prefix and the hash of its value,
//! never the value.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "api_keys")]
pub(crate) struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub(crate) id: Uuid,
    pub(crate) user_id: Uuid,
    pub(crate) name: String,
    pub(crate) prefix: String,
    pub(crate) secret_hash: String,
    pub(crate) created_at: DateTimeUtc,
    pub(crate) expires_at: Option<DateTimeUtc>,
    pub(crate) revoked_at: Option<DateTimeUtc>,
    pub(crate) last_used_at: Option<DateTimeUtc>,
    pub(crate) created_by: Option<Uuid>,
    pub(crate) scopes: String,
    pub(crate) limited: bool,
    pub(crate) lineage_id: Option<Uuid>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub(crate) enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
