//! Entity of `dashboard_sessions`: one row per dashboard session, holding the SHA-256 of its
//! cookie's token and when it idles out, expires or ended.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "dashboard_sessions")]
pub(crate) struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub(crate) id: Uuid,
    pub(crate) user_id: Uuid,
    pub(crate) token_hash: String,
    pub(crate) created_at: DateTimeUtc,
    pub(crate) last_seen_at: DateTimeUtc,
    pub(crate) expires_at: DateTimeUtc,
    pub(crate) ended_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub(crate) enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
