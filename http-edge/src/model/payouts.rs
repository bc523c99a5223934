//! `/payouts`: many recipients paid from one wallet in one request.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use walletops_proto::v1 as pb;

use super::{iso, iso_or_empty, short_name};

/// One recipient of `POST /payouts`.
#[derive(Debug, Default, Deserialize, Serialize, ToSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct PayoutItemBody {
    /// Recipient wallet address (the owner, for token transfers).
    #[schema(required = true)]
    pub(crate) to: String,
    /// `native`, `erc20` or `spl`.
    #[schema(required = true, value_type = super::Asset)]
    pub(crate) asset: String,
    /// Token address (EVM) or mint (Solana), for tokens.
    pub(crate) token: Option<String>,
    /// Integer amount in base units.
    #[schema(required = true, example = "1000000")]
    pub(crate) amount: String,
    /// Your own reference for the item (an invoice, an employee), at most 200 characters.
    pub(crate) reference: Option<String>,
}

/// Body of `POST /payouts`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct PayoutBody {
    /// Chain slug.
    #[schema(required = true, min_length = 1)]
    pub(crate) chain: String,
    /// The paying wallet; absent: the caller's default for the chain.
    pub(crate) from: Option<String>,
    /// 1 to 1,000 recipients.
    #[schema(required = true)]
    pub(crate) items: Vec<PayoutItemBody>,
}

impl From<PayoutBody> for pb::CreatePayoutRequest {
    fn from(b: PayoutBody) -> Self {
        Self {
            chain: b.chain,
            from: b.from,
            items: b
                .items
                .into_iter()
                .map(|i| pb::PayoutItemRequest {
                    to: i.to,
                    asset: match i.asset.as_str() {
                        "native" => pb::Asset::Native,
                        "erc20" => pb::Asset::Erc20,
                        "spl" => pb::Asset::Spl,
                        _ => pb::Asset::Unspecified,
                    }
                    .into(),
                    token: i.token,
                    amount: i.amount,
                    reference: i.reference,
                })
                .collect(),
        }
    }
}

/// One item of a payout and where it stands.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PayoutItemJson {
    /// Its place in the request, from 0.
    pub(crate) index: u32,
    /// Recipient.
    pub(crate) to: String,
    /// `native`, `erc20` or `spl`.
    pub(crate) asset: String,
    /// The token, when not native.
    pub(crate) token: Option<String>,
    /// Base units.
    pub(crate) amount: String,
    /// Your reference.
    pub(crate) reference: Option<String>,
    /// `QUEUED`, `PENDING_APPROVAL`, `SUBMITTED`, `CONFIRMED`, `REVERTED`, `FAILED`,
    /// `DROPPED` or `FEE_CAPPED`.
    pub(crate) state: String,
    /// Its transaction, for `GET /tx/{id}`.
    pub(crate) transaction_id: Option<String>,
    /// Its hash or signature.
    pub(crate) hash: Option<String>,
    /// Why it failed.
    pub(crate) error: Option<String>,
    /// The approval it waits for, for `GET /approvals/{id}`.
    pub(crate) approval_id: Option<String>,
}

/// A payout and where each item stands.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PayoutJson {
    /// Payout id, for `GET /payouts/{id}`.
    pub(crate) id: String,
    /// Chain slug.
    pub(crate) chain: String,
    /// The paying wallet.
    pub(crate) from: String,
    /// `RUNNING` or `COMPLETED` (every item final).
    pub(crate) state: String,
    /// How many items are in each state.
    pub(crate) totals: std::collections::BTreeMap<String, u32>,
    /// The items, in request order.
    pub(crate) items: Vec<PayoutItemJson>,
    /// Created at.
    pub(crate) created_at: String,
    /// Completed at.
    pub(crate) completed_at: Option<String>,
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
        }
    }
}
