//! Entity of `quotes`: a quote the service gave, which a swap may name for 60 seconds.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "quotes")]
pub(crate) struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub(crate) id: Uuid,
    pub(crate) user_id: Uuid,
    pub(crate) key_id: Option<Uuid>,
    pub(crate) chain: String,
    pub(crate) from_token: String,
    pub(crate) to_token: String,
    pub(crate) amount: String,
    pub(crate) dst_amount: String,
    pub(crate) created_at: DateTimeUtc,
    pub(crate) expires_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub(crate) enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
