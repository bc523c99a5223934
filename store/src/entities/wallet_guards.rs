//! Entity of `wallet_guards`: an EVM wallet delegated to the guard contract on one chain.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "wallet_guards")]
pub(crate) struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub(crate) wallet_id: Uuid,
    #[sea_orm(primary_key, auto_increment = false)]
    pub(crate) chain: String,
    pub(crate) guard: String,
    pub(crate) hash: String,
    pub(crate) enabled_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub(crate) enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
