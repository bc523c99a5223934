//! `GET /tx/{id}`: a transaction record and its status history.

use serde::Serialize;
use utoipa::ToSchema;
use walletops_proto::v1 as pb;

use super::{iso_or_empty, short_name};

/// One step of a transaction's status history.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct StatusChangeJson {
    /// Status entered.
    pub(crate) status: String,
    /// When, ISO 8601 UTC.
    pub(crate) at: String,
    /// Why, when there is something to say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) note: Option<String>,
}

/// A transaction record.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TransactionJson {
    /// Service transaction id.
    pub(crate) id: String,
    /// Chain slug.
    pub(crate) chain: String,
    /// Numeric chain id (Solana: 0 mainnet, -2 testnet, -3 devnet).
    pub(crate) chain_id: i64,
    /// Display name of the chain.
    pub(crate) chain_name: String,
    /// `send`, `approve`, `contract_call` or `swap`.
    #[serde(rename = "type")]
    pub(crate) kind: String,
    /// Sender.
    pub(crate) from: String,
    /// Recipient, token or contract.
    pub(crate) to: String,
    /// `native`, `erc20` or `spl` for transfers.
    pub(crate) asset: Option<String>,
    /// Token address or mint.
    pub(crate) token: Option<String>,
    /// Amount in base units.
    pub(crate) amount: Option<String>,
    /// `SUBMITTED`, `CONFIRMED`, `REVERTED`, `FAILED`, `DROPPED` or `FEE_CAPPED`.
    pub(crate) status: String,
    /// Every status, oldest first.
    pub(crate) status_history: Vec<StatusChangeJson>,
    /// Hash or signature.
    pub(crate) hash: Option<String>,
    /// Explorer link.
    pub(crate) explorer_url: Option<String>,
    /// Why it failed, reverted or was dropped.
    pub(crate) error: Option<String>,
    /// Accepted at.
    pub(crate) created_at: String,
    /// Last changed at.
    pub(crate) updated_at: String,
    /// Swaps only: the token sold, as the aggregator names it (never `NATIVE`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) from_token: Option<String>,
    /// Swaps only: the token bought.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) to_token: Option<String>,
    /// Swaps only: how much was sold, in base units.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) src_amount: Option<String>,
    /// Swaps only: what the quote said it buys, in base units, before slippage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) dst_amount: Option<String>,
    /// Swaps only: the least the caller accepted (`dstAmount` less the slippage).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) min_dst_amount: Option<String>,
}

fn status_name(s: i32) -> String {
    let status = pb::TransactionStatus::try_from(s).map(|s| s.as_str_name());
    short_name(status, "TRANSACTION_STATUS_")
}

impl From<pb::Transaction> for TransactionJson {
    fn from(t: pb::Transaction) -> Self {
        let kind = pb::TransactionKind::try_from(t.kind)
            .map(|k| {
                k.as_str_name()
                    .trim_start_matches("TRANSACTION_KIND_")
                    .to_ascii_lowercase()
            })
            .unwrap_or_default();
        Self {
            id: t.id,
            chain: t.chain,
            chain_id: t.chain_id,
            chain_name: t.chain_name,
            kind,
            from: t.from,
            to: t.to,
            asset: t.asset,
            token: t.token,
            amount: t.amount,
            status: status_name(t.status),
            status_history: t
                .status_history
                .into_iter()
                .map(|c| StatusChangeJson {
                    status: status_name(c.status),
                    at: iso_or_empty(c.at),
                    note: c.note,
                })
                .collect(),
            hash: t.hash,
            explorer_url: t.explorer_url,
            error: t.error,
            created_at: iso_or_empty(t.created_at),
            updated_at: iso_or_empty(t.updated_at),
            from_token: t.from_token,
            to_token: t.to_token,
            src_amount: t.src_amount,
            dst_amount: t.dst_amount,
            min_dst_amount: t.min_dst_amount,
        }
    }
}

/// A transaction as `GET /tx/{id}` gives it, in JSON: what webhooks deliver too.
pub fn transaction_json(t: pb::Transaction) -> Vec<u8> {
    serde_json::to_vec(&TransactionJson::from(t)).unwrap_or_default()
}
