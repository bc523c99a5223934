//! The REST contract's JSON shapes, and their translation to and from `walletops.v1`
//! messages. Field names are the spec's; request structs default every field, so a missing
//! field reaches the core and is reported there with the other violations.

use chrono::{DateTime, SecondsFormat};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use walletops_proto::v1 as pb;

/// ISO 8601 with milliseconds, UTC (`2026-11-23T02:15:19.123Z`), as the spec asks.
fn iso(ts: Option<prost_types::Timestamp>) -> Option<String> {
    let ts = ts?;
    DateTime::from_timestamp(ts.seconds, u32::try_from(ts.nanos).unwrap_or_default())
        .map(|t| t.to_rfc3339_opts(SecondsFormat::Millis, true))
}

fn iso_or_empty(ts: Option<prost_types::Timestamp>) -> String {
    iso(ts).unwrap_or_default()
}

/// JSON to a protobuf `Value`. Integers travel as their decimal text, so a uint256 argument
/// keeps every digit (a protobuf number is a double).
pub(crate) fn to_proto_value(v: serde_json::Value) -> prost_types::Value {
    use prost_types::value::Kind;
    let kind = match v {
        serde_json::Value::Null => Kind::NullValue(0),
        serde_json::Value::Bool(b) => Kind::BoolValue(b),
        serde_json::Value::Number(n) if n.is_u64() || n.is_i64() => {
            Kind::StringValue(n.to_string())
        }
        serde_json::Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or_default()),
        serde_json::Value::String(s) => Kind::StringValue(s),
        serde_json::Value::Array(a) => Kind::ListValue(prost_types::ListValue {
            values: a.into_iter().map(to_proto_value).collect(),
        }),
        serde_json::Value::Object(o) => Kind::StructValue(prost_types::Struct {
            fields: o.into_iter().map(|(k, v)| (k, to_proto_value(v))).collect(),
        }),
    };
    prost_types::Value { kind: Some(kind) }
}

/// A protobuf `Value` to JSON.
pub(crate) fn from_proto_value(v: prost_types::Value) -> serde_json::Value {
    use prost_types::value::Kind;
    match v.kind {
        None | Some(Kind::NullValue(_)) => serde_json::Value::Null,
        Some(Kind::BoolValue(b)) => b.into(),
        Some(Kind::NumberValue(n)) => serde_json::Number::from_f64(n)
            .map_or(serde_json::Value::Null, serde_json::Value::Number),
        Some(Kind::StringValue(s)) => s.into(),
        Some(Kind::ListValue(l)) => l.values.into_iter().map(from_proto_value).collect(),
        Some(Kind::StructValue(s)) => from_proto_struct(s),
    }
}

fn from_proto_struct(s: prost_types::Struct) -> serde_json::Value {
    serde_json::Value::Object(
        s.fields
            .into_iter()
            .map(|(k, v)| (k, from_proto_value(v)))
            .collect(),
    )
}

// ---- wallets ----

/// A chain family.
#[derive(ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)]
pub(crate) enum ChainType {
    Ethereum,
    Solana,
}

/// What a send moves: the chain's native coin, an ERC20 token or an SPL token.
#[derive(ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)]
pub(crate) enum Asset {
    Native,
    Erc20,
    Spl,
}

/// Query of `GET /wallets`.
#[derive(Debug, IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // Documents the query; the handler reads it through `QueryParams`.
pub(crate) struct ListWalletsQuery {
    /// Chain family: `ethereum` or `solana`.
    #[param(value_type = Option<ChainType>, inline)]
    chain: Option<String>,
    /// Only default wallets.
    #[param(rename = "defaultOnly")]
    default_only: Option<bool>,
    /// Only wallets with automation enabled.
    #[param(rename = "automationOnly")]
    automation_only: Option<bool>,
}

/// A wallet of the caller.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WalletJson {
    /// Wallet address.
    pub(crate) address: String,
    /// `ethereum` or `solana`.
    pub(crate) chain_type: String,
    /// Default wallet for its chain family.
    pub(crate) is_default: bool,
    /// Delegated to the server signer.
    pub(crate) automation_enabled: bool,
    /// Wallet provider kind.
    pub(crate) provider_type: String,
    /// Wallet client integration.
    pub(crate) client_type: String,
}

/// Response of `GET /wallets`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct WalletsJson {
    /// The caller's wallets that match the filters.
    pub(crate) wallets: Vec<WalletJson>,
}

impl From<pb::ListWalletsResponse> for WalletsJson {
    fn from(r: pb::ListWalletsResponse) -> Self {
        Self {
            wallets: r
                .wallets
                .into_iter()
                .map(|w| WalletJson {
                    address: w.address,
                    chain_type: w.chain_type,
                    is_default: w.is_default,
                    automation_enabled: w.automation_enabled,
                    provider_type: w.provider_type,
                    client_type: w.client_type,
                })
                .collect(),
        }
    }
}

// ---- balances ----

/// Query of the balance endpoints.
#[derive(Debug, IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // Documents the query; the handler reads it through `QueryParams`.
pub(crate) struct BalancesQuery {
    /// Chain slug, e.g. `base` or `solana`.
    #[param(min_length = 1)]
    chain: String,
    /// Comma-separated token addresses (EVM) or mints (Solana), at most 50.
    #[param(pattern = "^([0-9A-Za-z]+(,[0-9A-Za-z]+){0,49})?$")]
    tokens: Option<String>,
    /// Include zero balances; default false.
    #[param(rename = "includeZero")]
    include_zero: Option<bool>,
    /// Bypass the short-lived cache; default false.
    fresh: Option<bool>,
}

/// A native or token balance.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct BalanceJson {
    /// Chain family.
    pub(crate) chain_type: String,
    /// Numeric chain id.
    pub(crate) chain_id: i64,
    /// Owning wallet address.
    pub(crate) address: String,
    /// `native`, `erc20` or `spl`.
    pub(crate) asset: String,
    /// Token address or mint; null for native.
    pub(crate) token: Option<String>,
    /// Integer amount in base units.
    pub(crate) raw: String,
    /// Token decimals.
    pub(crate) decimals: u32,
    /// Token symbol.
    pub(crate) symbol: String,
    /// Time of the chain read, ISO 8601 with milliseconds, UTC.
    pub(crate) updated_at: String,
}

/// Response of the balance endpoints.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct BalancesJson {
    /// Native balance first, then tokens.
    pub(crate) balances: Vec<BalanceJson>,
}

impl From<pb::GetBalancesResponse> for BalancesJson {
    fn from(r: pb::GetBalancesResponse) -> Self {
        // The balances of one read share their read time: it is formatted once.
        let mut last: Option<(prost_types::Timestamp, String)> = None;
        let mut iso_once = |ts: Option<prost_types::Timestamp>| match (&last, ts) {
            (Some((seen, text)), Some(ts)) if *seen == ts => text.clone(),
            (_, Some(ts)) => {
                let text = iso_or_empty(Some(ts));
                last = Some((ts, text.clone()));
                text
            }
            (_, None) => String::new(),
        };
        Self {
            balances: r
                .balances
                .into_iter()
                .map(|b| BalanceJson {
                    chain_type: b.chain_type,
                    chain_id: b.chain_id,
                    address: b.address,
                    asset: b.asset,
                    token: b.token,
                    raw: b.raw,
                    decimals: b.decimals,
                    symbol: b.symbol,
                    updated_at: iso_once(b.updated_at),
                })
                .collect(),
        }
    }
}

// ---- transactions ----

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
}

fn status_name(s: i32) -> String {
    let status = pb::TransactionStatus::try_from(s).map(|s| s.as_str_name());
    short_name(status, "TRANSACTION_STATUS_")
}

/// A protobuf enum value's name without its type's `prefix` (`TRANSACTION_STATUS_SUBMITTED`
/// is `SUBMITTED`); `UNSPECIFIED` for a value this edge does not know.
fn short_name<E>(name: Result<&str, E>, prefix: &str) -> String {
    name.map_or_else(
        |_| "UNSPECIFIED".to_owned(),
        |n| n.trim_start_matches(prefix).to_owned(),
    )
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
        }
    }
}

// ---- writes ----

/// Submission result of every write except the quote.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SubmissionJson {
    /// Service transaction id, for `GET /tx/{id}`.
    pub(crate) id: String,
    /// Always `SUBMITTED`.
    #[schema(example = "SUBMITTED")]
    pub(crate) status: String,
    /// Hash or signature; may be null at submission time.
    pub(crate) hash: Option<String>,
    /// Explorer link; null until a hash exists.
    pub(crate) explorer_url: Option<String>,
    /// Display name of the chain.
    pub(crate) chain_name: String,
}

impl From<Option<pb::Submission>> for SubmissionJson {
    fn from(s: Option<pb::Submission>) -> Self {
        let s = s.unwrap_or_default();
        Self {
            id: s.id,
            status: short_name(
                pb::SubmissionStatus::try_from(s.status).map(|s| s.as_str_name()),
                "SUBMISSION_STATUS_",
            ),
            hash: s.hash,
            explorer_url: s.explorer_url,
            chain_name: s.chain_name,
        }
    }
}

/// Body of `POST /send`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct SendBody {
    /// Chain slug.
    #[schema(required = true, min_length = 1)]
    pub(crate) chain: String,
    /// Sender wallet; null or absent: the caller's default wallet for the chain.
    #[schema(pattern = "^(0x[a-fA-F0-9]{40}|[1-9A-HJ-NP-Za-km-z]{32,44})$")]
    pub(crate) from: Option<String>,
    /// Recipient wallet address (the owner, for token transfers).
    #[schema(
        required = true,
        pattern = "^(0x[a-fA-F0-9]{40}|[1-9A-HJ-NP-Za-km-z]{32,44})$"
    )]
    pub(crate) to: String,
    /// `native`, `erc20` or `spl`.
    #[schema(required = true, value_type = Asset)]
    pub(crate) asset: String,
    /// Token address (EVM) or mint (Solana), for token sends.
    #[schema(pattern = "^(0x[a-fA-F0-9]{40}|[1-9A-HJ-NP-Za-km-z]{32,44})$")]
    pub(crate) token: Option<String>,
    /// Integer amount in base units (wei, lamports or token units): decimal, or 0x-hex on
    /// EVM chains.
    #[schema(
        required = true,
        example = "1000000000000000",
        pattern = "^(0x[0-9a-fA-F]+|[0-9]+)$"
    )]
    pub(crate) amount: String,
}

impl From<SendBody> for pb::SendRequest {
    fn from(b: SendBody) -> Self {
        let asset = match b.asset.as_str() {
            "native" => pb::Asset::Native,
            "erc20" => pb::Asset::Erc20,
            "spl" => pb::Asset::Spl,
            _ => pb::Asset::Unspecified,
        };
        Self {
            chain: b.chain,
            from: b.from,
            to: b.to,
            asset: asset.into(),
            token: b.token,
            amount: b.amount,
        }
    }
}

/// Body of `POST /token/approve`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct ApproveBody {
    /// EVM chain slug.
    #[schema(required = true, min_length = 1)]
    pub(crate) chain: String,
    /// Owner wallet; default: the caller's default EVM wallet.
    #[schema(pattern = "^0x[a-fA-F0-9]{40}$")]
    pub(crate) from: Option<String>,
    /// ERC20 token address.
    #[schema(required = true, pattern = "^0x[a-fA-F0-9]{40}$")]
    pub(crate) token: String,
    /// Spender (router) address.
    #[schema(required = true, pattern = "^0x[a-fA-F0-9]{40}$")]
    pub(crate) spender: String,
    /// Allowance in token base units.
    #[schema(required = true, pattern = "^(0x[0-9a-fA-F]+|[0-9]+)$")]
    pub(crate) amount: String,
}

impl From<ApproveBody> for pb::ApproveTokenRequest {
    fn from(b: ApproveBody) -> Self {
        Self {
            chain: b.chain,
            from: b.from,
            token: b.token,
            spender: b.spender,
            amount: b.amount,
        }
    }
}

/// Body of `POST /contracts/send`: either `data`, or `function` with `args`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct ContractCallBody {
    /// EVM chain slug.
    #[schema(required = true, min_length = 1)]
    pub(crate) chain: String,
    /// Sender wallet; default: the caller's default EVM wallet.
    #[schema(pattern = "^0x[a-fA-F0-9]{40}$")]
    pub(crate) from: Option<String>,
    /// Contract address.
    #[schema(required = true, pattern = "^0x[a-fA-F0-9]{40}$")]
    pub(crate) to: String,
    /// Native value in wei; default 0.
    #[schema(pattern = "^(0x[0-9a-fA-F]+|[0-9]+)$")]
    pub(crate) value: Option<String>,
    /// Raw 0x-hex calldata.
    #[schema(pattern = "^0x([0-9a-fA-F]{2})*$")]
    pub(crate) data: Option<String>,
    /// Human-readable signature, e.g. `transfer(address,uint256)`.
    #[schema(example = "transfer(address,uint256)")]
    pub(crate) function: Option<String>,
    /// Arguments for `function`; pass integers wider than 53 bits as strings, and addresses
    /// and bytes as 0x-prefixed hex strings.
    #[schema(value_type = Option<Vec<Object>>)]
    pub(crate) args: Option<Vec<serde_json::Value>>,
}

impl From<ContractCallBody> for pb::CallContractRequest {
    fn from(b: ContractCallBody) -> Self {
        Self {
            chain: b.chain,
            from: b.from,
            to: b.to,
            value: b.value,
            data: b.data,
            function: b.function,
            args: b.args.map(|a| prost_types::ListValue {
                values: a.into_iter().map(to_proto_value).collect(),
            }),
        }
    }
}

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
        pattern = "^(NATIVE|0x[a-fA-F0-9]{40}|[1-9A-HJ-NP-Za-km-z]{32,44})$"
    )]
    pub(crate) from_token: String,
    /// Destination token address or `NATIVE`.
    #[schema(
        required = true,
        pattern = "^(NATIVE|0x[a-fA-F0-9]{40}|[1-9A-HJ-NP-Za-km-z]{32,44})$"
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
                raw: q.raw.map_or(serde_json::Value::Null, from_proto_struct),
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
        pattern = "^(NATIVE|0x[a-fA-F0-9]{40}|[1-9A-HJ-NP-Za-km-z]{32,44})$"
    )]
    pub(crate) from_token: String,
    /// Destination token address or `NATIVE`.
    #[schema(
        required = true,
        pattern = "^(NATIVE|0x[a-fA-F0-9]{40}|[1-9A-HJ-NP-Za-km-z]{32,44})$"
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
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_iso_with_millis_utc() {
        let ts = prost_types::Timestamp {
            seconds: 1_795_400_119,
            nanos: 123_456_789,
        };
        assert_eq!(iso(Some(ts)).as_deref(), Some("2026-11-23T02:15:19.123Z"));
    }

    #[test]
    fn big_integers_keep_their_digits() {
        let v: serde_json::Value =
            serde_json::from_str("[18446744073709551615, -5, 1.5]").expect("json");
        let serde_json::Value::Array(items) = v else {
            panic!("array")
        };
        let back: Vec<_> = items
            .into_iter()
            .map(|i| from_proto_value(to_proto_value(i)))
            .collect();
        assert_eq!(
            back,
            vec![
                serde_json::json!("18446744073709551615"),
                serde_json::json!("-5"),
                serde_json::json!(1.5)
            ]
        );
    }
}
