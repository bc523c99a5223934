//! Entity of `webhook_endpoints`: one row per URL a user has events sent to, with the event
//! types it takes and its sealed signing secret.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "webhook_endpoints")]
pub(crate) struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub(crate) id: Uuid,
    pub(crate) user_id: Uuid,
    pub(crate) url: String,
    pub(crate) event_types: String,
    pub(crate) secret_nonce: Vec<u8>,
    pub(crate) secret_ciphertext: Vec<u8>,
    pub(crate) created_at: DateTimeUtc,
    pub(crate) created_by_key: Option<Uuid>,
    pub(crate) created_by_session: Option<Uuid>,
    pub(crate) disabled_at: Option<DateTimeUtc>,
    pub(crate) disabled_reason: Option<String>,
    pub(crate) failing_since: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub(crate) enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
