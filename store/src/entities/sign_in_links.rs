//! Entity of `sign_in_links`: one row per one-time dashboard sign-in link, holding the SHA-256
//! of its token and when it expires or was used.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "sign_in_links")]
pub(crate) struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub(crate) id: Uuid,
    pub(crate) user_id: Uuid,
    pub(crate) token_hash: String,
    pub(crate) created_at: DateTimeUtc,
    pub(crate) expires_at: DateTimeUtc,
    pub(crate) used_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub(crate) enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
