//! `/approvals`: writes held for a person's approval, as a key sees them.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use walletops_proto::v1 as pb;

use super::{iso, iso_or_empty, short_name};

/// Where a held write stands.
#[derive(ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)] // Documents `state`.
pub(crate) enum ApprovalStateJson {
    Pending,
    Approved,
    Rejected,
    Expired,
    Submitted,
    Failed,
}

/// A write held for a person's approval.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ApprovalJson {
    /// Approval id, for `GET /approvals/{id}`.
    pub(crate) id: String,
    /// `pending`, `approved`, `rejected`, `expired`, `submitted` or `failed`.
    #[schema(value_type = ApprovalStateJson)]
    pub(crate) state: String,
    /// The write's endpoint: `/send`, `/token/approve`, `/contracts/send`, `/trade/swap`.
    pub(crate) operation: String,
    /// Chain slug.
    pub(crate) chain: String,
    /// What it moves: `native`, a token address (lowercase) or a mint.
    pub(crate) asset: String,
    /// How much, in base units.
    pub(crate) amount: String,
    /// The key's approval threshold it exceeded, in base units.
    pub(crate) approval_above: String,
    /// What the write does, in a sentence.
    pub(crate) summary: String,
    /// Id of the API key that asked for it.
    pub(crate) key_id: String,
    /// Asked for at, ISO 8601 UTC.
    pub(crate) created_at: String,
    /// Expires at unless decided, ISO 8601 UTC.
    pub(crate) expires_at: String,
    /// Who approved or rejected it (`dashboard:NAME`, `cli:NAME`), or `expiry`.
    pub(crate) decided_by: Option<String>,
    /// Decided at, ISO 8601 UTC.
    pub(crate) decided_at: Option<String>,
    /// The reason given with a rejection.
    pub(crate) reason: Option<String>,
    /// The approved write's transaction id, for `GET /tx/{id}`.
    pub(crate) transaction_id: Option<String>,
    /// Why the approved write was not made.
    pub(crate) error: Option<String>,
}

impl From<pb::Approval> for ApprovalJson {
    fn from(a: pb::Approval) -> Self {
        Self {
            id: a.id,
            state: short_name(
                pb::ApprovalState::try_from(a.state).map(|s| s.as_str_name()),
                "APPROVAL_STATE_",
            )
            .to_ascii_lowercase(),
            operation: a.operation,
            chain: a.chain,
            asset: a.asset,
            amount: a.amount,
            approval_above: a.approval_above,
            summary: a.summary,
            key_id: a.key_id,
            created_at: iso_or_empty(a.created_at),
            expires_at: iso_or_empty(a.expires_at),
            decided_by: a.decided_by,
            decided_at: iso(a.decided_at),
            reason: a.reason,
            transaction_id: a.transaction_id,
            error: a.error,
        }
    }
}

/// The caller's approvals, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ApprovalsJson {
    /// At most 200.
    pub(crate) approvals: Vec<ApprovalJson>,
}

impl From<pb::ListApprovalsResponse> for ApprovalsJson {
    fn from(r: pb::ListApprovalsResponse) -> Self {
        Self {
            approvals: r.approvals.into_iter().map(ApprovalJson::from).collect(),
        }
    }
}

/// Query of `GET /approvals`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // Documents the query; the handler reads it through `QueryParams`.
pub(crate) struct ApprovalsQuery {
    /// Only approvals in this state.
    #[param(value_type = Option<ApprovalStateJson>, inline)]
    state: Option<String>,
}

/// The state a query names, as the core reads it.
pub(crate) fn approval_state(raw: Option<&str>) -> Result<pb::ApprovalState, String> {
    match raw.map(str::trim) {
        None | Some("") => Ok(pb::ApprovalState::Unspecified),
        Some(name) => pb::ApprovalState::from_str_name(&format!(
            "APPROVAL_STATE_{}",
            name.to_ascii_uppercase()
        ))
        .filter(|s| *s != pb::ApprovalState::Unspecified)
        .ok_or_else(|| {
            format!(
                "must be pending, approved, rejected, expired, submitted or failed, got {name:?}"
            )
        }),
    }
}
