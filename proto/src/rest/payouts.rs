//! A payout as `GET /payouts/{id}` gives it, and as the `payout.completed` webhook tells it
//! (without its items).

use serde::Serialize;
use utoipa::ToSchema;

use super::{iso, iso_or_empty, short_name};
use crate::v1 as pb;

/// One item of a payout and where it stands.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PayoutItemJson {
    /// Its place in the request, from 0.
    pub index: u32,
    /// Recipient.
    pub to: String,
    /// `native`, `erc20` or `spl`.
    pub asset: String,
    /// The token, when not native.
    pub token: Option<String>,
    /// Base units.
    pub amount: String,
    /// Your reference.
    pub reference: Option<String>,
    /// `QUEUED`, `PENDING_APPROVAL`, `SUBMITTED`, `CONFIRMED`, `REVERTED`, `FAILED`,
    /// `DROPPED` or `FEE_CAPPED`.
    pub state: String,
    /// Its transaction, for `GET /tx/{id}`.
    pub transaction_id: Option<String>,
    /// Its hash or signature.
    pub hash: Option<String>,
    /// Why it failed.
    pub error: Option<String>,
    /// The approval it waits for, for `GET /approvals/{id}`.
    pub approval_id: Option<String>,
}

/// A payout and where each item stands.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PayoutJson {
    /// Payout id, for `GET /payouts/{id}`.
    pub id: String,
    /// Chain slug.
    pub chain: String,
    /// The paying wallet.
    pub from: String,
    /// `RUNNING` or `COMPLETED` (every item final).
    pub state: String,
    /// How many items are in each state.
    pub totals: std::collections::BTreeMap<String, u32>,
    /// How many items it holds.
    pub item_count: u32,
    /// How many transactions pay them (on Solana several items share one).
    pub transaction_count: u32,
    /// The items, in request order (absent in lists and webhooks: `GET /payouts/{id}`
    /// gives them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<PayoutItemJson>,
    /// Created at.
    pub created_at: String,
    /// Completed at.
    pub completed_at: Option<String>,
    /// Lamports a Solana payout pays as the rent of its recipients' new token accounts
    /// (SOL it sends, counted against the key's SOL limit): in the answer that creates or
    /// validates it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rent: Option<String>,
}

impl From<pb::Payout> for PayoutJson {
    fn from(p: pb::Payout) -> Self {
        Self {
            state: short_name(
                pb::PayoutState::try_from(p.state).map(|s| s.as_str_name()),
                "PAYOUT_STATE_",
            ),
            id: p.id,
            chain: p.chain,
            from: p.from,
            totals: p.totals.into_iter().collect(),
            item_count: p.item_count,
            transaction_count: p.transaction_count,
            items: p
                .items
                .into_iter()
                .map(|i| PayoutItemJson {
                    index: i.index,
                    to: i.to,
                    asset: i.asset,
                    token: i.token,
                    amount: i.amount,
                    reference: i.reference,
                    state: i.state,
                    transaction_id: i.transaction_id,
                    hash: i.hash,
                    error: i.error,
                    approval_id: i.approval_id,
                })
                .collect(),
            created_at: iso_or_empty(p.created_at),
            completed_at: iso(p.completed_at),
            rent: p.rent,
        }
    }
}
