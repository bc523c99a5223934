//! Entity of `transaction_events`: one row per status change of a transaction record, the
//! outbox that webhooks and event readers follow by sequence number.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "transaction_events")]
pub(crate) struct Model {
    #[sea_orm(primary_key)]
    pub(crate) id: i64,
    pub(crate) seq: Option<i64>,
    pub(crate) transaction_id: Uuid,
    pub(crate) user_id: Uuid,
    pub(crate) chain: String,
    pub(crate) status: String,
    pub(crate) subject: String,
    pub(crate) created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub(crate) enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
