//! Entity of `key_policy_rules`: one row per thing an API key's policy allows on one chain.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "key_policy_rules")]
pub(crate) struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub(crate) key_id: Uuid,
    #[sea_orm(primary_key, auto_increment = false)]
    pub(crate) chain: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub(crate) rule: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub(crate) target: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub(crate) selector: String,
    pub(crate) created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub(crate) enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
