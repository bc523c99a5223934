//! Entity of `payouts`: batches of recipients paid from one wallet.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "payouts")]
pub(crate) struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub(crate) id: Uuid,
    pub(crate) user_id: Uuid,
    pub(crate) key_id: Option<Uuid>,
    pub(crate) idempotency_key: Uuid,
    pub(crate) request_hash: String,
    pub(crate) chain: String,
    pub(crate) from_address: String,
    pub(crate) state: String,
    pub(crate) created_at: DateTimeUtc,
    pub(crate) completed_at: Option<DateTimeUtc>,
    pub(crate) lease_owner: Option<Uuid>,
    pub(crate) lease_until: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub(crate) enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
