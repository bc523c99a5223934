//! Entity of `webhook_deliveries`: one row per event to be sent to one endpoint, with its
//! state, attempts, lease and last outcome.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "webhook_deliveries")]
pub(crate) struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub(crate) id: Uuid,
    pub(crate) endpoint_id: Uuid,
    pub(crate) user_id: Uuid,
    pub(crate) event_seq: i64,
    pub(crate) transaction_id: Uuid,
    pub(crate) event_type: String,
    pub(crate) state: String,
    pub(crate) attempts: i32,
    pub(crate) next_attempt_at: DateTimeUtc,
    pub(crate) retry_until: DateTimeUtc,
    pub(crate) lease_owner: Option<Uuid>,
    pub(crate) lease_until: Option<DateTimeUtc>,
    pub(crate) last_status: Option<i32>,
    pub(crate) last_error: Option<String>,
    pub(crate) last_attempt_at: Option<DateTimeUtc>,
    pub(crate) delivered_at: Option<DateTimeUtc>,
    pub(crate) created_at: DateTimeUtc,
    pub(crate) replayed_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub(crate) enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
