//! `GET /wallets/balances` and `GET /wallets/{address}/balances`: their query and the
//! balances they answer.

use serde::Serialize;
use utoipa::{IntoParams, ToSchema};
use walletops_proto::v1 as pb;

use super::iso_or_empty;

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
