//! Entity of `spend_limits`: one row per API key, chain and asset, holding its per-write,
//! daily and approval limits in base units.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "spend_limits")]
pub(crate) struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub(crate) key_id: Uuid,
    #[sea_orm(primary_key, auto_increment = false)]
    pub(crate) chain: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub(crate) asset: String,
    pub(crate) max_per_transaction: Option<String>,
    pub(crate) daily_budget: Option<String>,
    pub(crate) approval_above: Option<String>,
    pub(crate) created_at: DateTimeUtc,
    pub(crate) updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub(crate) enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
