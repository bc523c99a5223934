//! `/payouts`: many recipients paid from one wallet in one request.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use walletops_proto::v1 as pb;

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
    /// Only check the payout (every item, the funds) and answer it as it would be stored,
    /// its `id` empty: nothing is stored or sent, and no Idempotency-Key is needed.
    pub(crate) validate_only: bool,
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
            validate_only: b.validate_only,
        }
    }
}
