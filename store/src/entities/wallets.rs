//! Entity of `wallets`: one row per wallet of a user, with its chain family, address,
//! provider and default and delegation flags.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "wallets")]
pub(crate) struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub(crate) id: Uuid,
    pub(crate) user_id: Uuid,
    pub(crate) chain_type: String,
    pub(crate) address: String,
    pub(crate) provider_type: String,
    pub(crate) client_type: String,
    pub(crate) provider_wallet_id: Option<String>,
    pub(crate) is_default: bool,
    pub(crate) automation_enabled: bool,
    pub(crate) linked: bool,
    pub(crate) created_at: DateTimeUtc,
    pub(crate) removed_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub(crate) enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
