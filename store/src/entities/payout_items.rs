//! Entity of `payout_items`: each recipient of a payout and what became of its write.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "payout_items")]
pub(crate) struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub(crate) payout_id: Uuid,
    #[sea_orm(primary_key, auto_increment = false)]
    pub(crate) idx: i32,
    pub(crate) to_address: String,
    pub(crate) asset: String,
    pub(crate) token: Option<String>,
    pub(crate) amount: String,
    pub(crate) reference: Option<String>,
    pub(crate) made: String,
    pub(crate) made_id: Option<Uuid>,
    pub(crate) error: Option<String>,
    pub(crate) pack: Option<i32>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub(crate) enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
