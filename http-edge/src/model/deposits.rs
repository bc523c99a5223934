//! `/deposits`: money that arrived at the caller's wallets, as the core found it on chain.

use serde::Serialize;
use utoipa::{IntoParams, ToSchema};
use walletops_proto::{rest::DepositJson, v1 as pb};

/// `GET /deposits`'s filters and page.
#[derive(Debug, IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // Documents the query; the handler reads it field by field.
pub(crate) struct DepositsQuery {
    /// Only this chain's (slug).
    chain: Option<String>,
    /// Only this wallet's: its id or address.
    wallet: Option<String>,
    /// `pending`, `confirmed`, `reverted` or `ignored`.
    state: Option<String>,
    /// Only deposits first seen at or after this time (RFC 3339).
    since: Option<String>,
    /// 1 to 500; default 50.
    limit: Option<u32>,
    /// `nextCursor` of the previous page.
    cursor: Option<String>,
}

/// A page of deposits, newest first.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DepositsJson {
    /// The deposits.
    pub(crate) deposits: Vec<DepositJson>,
    /// Pass as `cursor` for the next page; absent: this was the last.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) next_cursor: Option<String>,
}

impl From<pb::ListDepositsResponse> for DepositsJson {
    fn from(r: pb::ListDepositsResponse) -> Self {
        Self {
            deposits: r.deposits.into_iter().map(DepositJson::from).collect(),
            next_cursor: r.next_page_token,
        }
    }
}

/// The `state` query value as the proto enum.
pub(crate) fn deposit_state(raw: Option<&str>) -> Result<pb::DepositState, String> {
    match raw.map(str::trim) {
        None | Some("") => Ok(pb::DepositState::Unspecified),
        Some(name) => {
            pb::DepositState::from_str_name(&format!("DEPOSIT_STATE_{}", name.to_ascii_uppercase()))
                .filter(|s| *s != pb::DepositState::Unspecified)
                .ok_or_else(|| {
                    format!("must be pending, confirmed, reverted or ignored, got {name:?}")
                })
        }
    }
}
