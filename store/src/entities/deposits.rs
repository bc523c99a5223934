//! Entity of `deposits`: credits to users' wallets found on chain.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "deposits")]
pub(crate) struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub(crate) id: Uuid,
    pub(crate) user_id: Uuid,
    pub(crate) wallet_id: Uuid,
    pub(crate) chain: String,
    pub(crate) address: String,
    pub(crate) tx_hash: String,
    pub(crate) asset: String,
    pub(crate) amount: String,
    pub(crate) from_address: Option<String>,
    pub(crate) block: i64,
    pub(crate) block_hash: Option<String>,
    pub(crate) state: String,
    pub(crate) ignored_reason: Option<String>,
    pub(crate) created_at: DateTimeUtc,
    pub(crate) updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub(crate) enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
