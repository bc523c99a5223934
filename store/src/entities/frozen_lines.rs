//! Entity of `frozen_lines`: a key line whose writes are refused until its owner unfreezes it.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "frozen_lines")]
pub(crate) struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub(crate) line_id: Uuid,
    pub(crate) user_id: Uuid,
    pub(crate) frozen_at: DateTimeUtc,
    pub(crate) reason: String,
    pub(crate) transaction_id: Uuid,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub(crate) enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
