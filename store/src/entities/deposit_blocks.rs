//! Entity of `deposit_blocks`: the hashes of the blocks a deposit scan read lately.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "deposit_blocks")]
pub(crate) struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub(crate) chain: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub(crate) number: i64,
    pub(crate) hash: String,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub(crate) enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
