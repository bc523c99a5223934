//! Entity of `spend_reservations`: one row per amount a limited key's write holds against its
//! budget, until the write ends without moving it.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "spend_reservations")]
pub(crate) struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub(crate) id: Uuid,
    pub(crate) key_id: Uuid,
    pub(crate) chain: String,
    pub(crate) asset: String,
    pub(crate) amount: String,
    pub(crate) transaction_id: Uuid,
    pub(crate) created_at: DateTimeUtc,
    pub(crate) released_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub(crate) enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
