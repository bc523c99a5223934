//! `POST /trade/quote` and `POST /trade/swap`: their bodies and the quote.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use walletops_proto::v1 as pb;

use walletops_proto::json::from_struct;

/// Body of `POST /trade/quote`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct QuoteBody {
    /// Chain slug.
    #[schema(required = true, min_length = 1)]
    pub(crate) chain: String,
    /// Source token address or `NATIVE`.
    #[schema(
        required = true,
        pattern = "^([Nn][Aa][Tt][Ii][Vv][Ee]|0x[a-fA-F0-9]{40}|[1-9A-HJ-NP-Za-km-z]{32,44})$"
    )]
    pub(crate) from_token: String,
    /// Destination token address or `NATIVE`.
    #[schema(
        required = true,
        pattern = "^([Nn][Aa][Tt][Ii][Vv][Ee]|0x[a-fA-F0-9]{40}|[1-9A-HJ-NP-Za-km-z]{32,44})$"
    )]
    pub(crate) to_token: String,
    /// Source amount in base units, decimal or 0x-hex.
    #[schema(required = true, pattern = "^(0x[0-9a-fA-F]+|[0-9]+)$")]
    pub(crate) amount: String,
    /// Wallet used for allowance checks.
    #[schema(pattern = "^(0x[a-fA-F0-9]{40}|[1-9A-HJ-NP-Za-km-z]{32,44})$")]
    pub(crate) from: Option<String>,
    /// Include gas estimates.
    pub(crate) include_gas: Option<bool>,
    /// Comma-separated allowlist of protocols.
    pub(crate) protocols: Option<String>,
    /// Comma-separated blocklist of protocols.
    pub(crate) exclude_protocols: Option<String>,
}

impl From<QuoteBody> for pb::GetQuoteRequest {
    fn from(b: QuoteBody) -> Self {
        Self {
            chain: b.chain,
            from_token: b.from_token,
            to_token: b.to_token,
            amount: b.amount,
            from: b.from,
            include_gas: b.include_gas,
            protocols: b.protocols,
            exclude_protocols: b.exclude_protocols,
        }
    }
}

/// A swap quote.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct QuoteJson {
    /// Source amount in base units.
    pub(crate) src_amount: String,
    /// Destination amount in base units.
    pub(crate) dst_amount: String,
    /// Resolved source token address.
    pub(crate) from_token: String,
    /// Resolved destination token address.
    pub(crate) to_token: String,
    /// Whether an approval is needed first (EVM ERC20 sources with `from`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) approval_needed: Option<bool>,
    /// Address to approve.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) spender: Option<String>,
    /// Allowance target.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) allowance_target: Option<String>,
    /// The aggregator's raw quote.
    #[schema(value_type = Object)]
    pub(crate) raw: serde_json::Value,
    /// Its id: a swap made with the same key within 60 seconds may name it as `quoteId`, and
    /// must then pay at least `dstAmount` less its slippage.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(format = Uuid)]
    pub(crate) quote_id: Option<String>,
}

/// Response of `POST /trade/quote`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct QuoteResponseJson {
    /// The quote.
    pub(crate) quote: QuoteJson,
}

impl From<pb::GetQuoteResponse> for QuoteResponseJson {
    fn from(r: pb::GetQuoteResponse) -> Self {
        let q = r.quote.unwrap_or_default();
        Self {
            quote: QuoteJson {
                src_amount: q.src_amount,
                dst_amount: q.dst_amount,
                from_token: q.from_token,
                to_token: q.to_token,
                approval_needed: q.approval_needed,
                spender: q.spender,
                allowance_target: q.allowance_target,
                raw: q.raw.map_or(serde_json::Value::Null, from_struct),
                quote_id: q.quote_id,
            },
        }
    }
}

/// Body of `POST /trade/swap`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct SwapBody {
    /// Chain slug.
    #[schema(required = true, min_length = 1)]
    pub(crate) chain: String,
    /// Sender wallet.
    #[schema(pattern = "^(0x[a-fA-F0-9]{40}|[1-9A-HJ-NP-Za-km-z]{32,44})$")]
    pub(crate) from: Option<String>,
    /// Source token address or `NATIVE`.
    #[schema(
        required = true,
        pattern = "^([Nn][Aa][Tt][Ii][Vv][Ee]|0x[a-fA-F0-9]{40}|[1-9A-HJ-NP-Za-km-z]{32,44})$"
    )]
    pub(crate) from_token: String,
    /// Destination token address or `NATIVE`.
    #[schema(
        required = true,
        pattern = "^([Nn][Aa][Tt][Ii][Vv][Ee]|0x[a-fA-F0-9]{40}|[1-9A-HJ-NP-Za-km-z]{32,44})$"
    )]
    pub(crate) to_token: String,
    /// Source amount in base units, decimal or 0x-hex.
    #[schema(required = true, pattern = "^(0x[0-9a-fA-F]+|[0-9]+)$")]
    pub(crate) amount: String,
    /// Slippage in percent; default 1.
    pub(crate) slippage: Option<f64>,
    /// Include gas estimates in the build.
    pub(crate) include_gas: Option<bool>,
    /// Comma-separated allowlist of protocols.
    pub(crate) protocols: Option<String>,
    /// Comma-separated blocklist of protocols.
    pub(crate) exclude_protocols: Option<String>,
    /// The `quoteId` of a quote this key asked for in the last 60 seconds: the swap must pay
    /// at least its `dstAmount` less the slippage.
    #[schema(format = Uuid)]
    pub(crate) quote_id: Option<String>,
    /// The least of `toToken` the swap must pay, in base units.
    #[schema(pattern = "^(0x[0-9a-fA-F]+|[0-9]+)$")]
    pub(crate) min_dst_amount: Option<String>,
}

impl From<SwapBody> for pb::SwapRequest {
    fn from(b: SwapBody) -> Self {
        Self {
            chain: b.chain,
            from: b.from,
            from_token: b.from_token,
            to_token: b.to_token,
            amount: b.amount,
            slippage: b.slippage,
            include_gas: b.include_gas,
            protocols: b.protocols,
            exclude_protocols: b.exclude_protocols,
            quote_id: b.quote_id,
            min_dst_amount: b.min_dst_amount,
        }
    }
}
