//! Entity of `transactions`: one row per signed write, holding its request, signed payload,
//! hashes, status history and the monitor's lease.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "transactions")]
pub(crate) struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub(crate) id: Uuid,
    pub(crate) user_id: Uuid,
    pub(crate) wallet_id: Uuid,
    pub(crate) chain: String,
    pub(crate) chain_id: i64,
    pub(crate) kind: String,
    pub(crate) from_address: String,
    pub(crate) to_address: String,
    pub(crate) asset: Option<String>,
    pub(crate) token: Option<String>,
    pub(crate) amount: Option<String>,
    pub(crate) request: Json,
    pub(crate) status: String,
    pub(crate) status_history: Json,
    pub(crate) hash: Option<String>,
    pub(crate) nonce: Option<i64>,
    pub(crate) signed_payload: Option<Vec<u8>>,
    pub(crate) hashes: Json,
    pub(crate) idempotency_key: Option<Uuid>,
    pub(crate) error: Option<String>,
    pub(crate) last_broadcast_at: Option<DateTimeUtc>,
    pub(crate) lease_owner: Option<Uuid>,
    pub(crate) lease_until: Option<DateTimeUtc>,
    pub(crate) valid_until_height: Option<i64>,
    pub(crate) revision: i64,
    pub(crate) simulated_effects: Option<String>,
    pub(crate) guarded: bool,
    pub(crate) final_effects: Option<String>,
    pub(crate) effects_difference: Option<String>,
    pub(crate) created_at: DateTimeUtc,
    pub(crate) updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub(crate) enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
