//! Entity of `deposit_cursors`: where each chain's deposit scan stands, and its lease.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "deposit_cursors")]
pub(crate) struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub(crate) chain: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub(crate) address: String,
    pub(crate) next_block: Option<i64>,
    pub(crate) last_signature: Option<String>,
    pub(crate) lease_owner: Option<Uuid>,
    pub(crate) lease_until: Option<DateTimeUtc>,
    pub(crate) updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub(crate) enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
