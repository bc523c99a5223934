//! Entity of `evm_nonces`: one row per EVM chain and address, holding the next nonce the
//! ledger hands out.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "evm_nonces")]
pub(crate) struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub(crate) chain_id: i64,
    #[sea_orm(primary_key, auto_increment = false)]
    pub(crate) address: String,
    pub(crate) next_nonce: i64,
    pub(crate) updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub(crate) enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
