//! Approval requests: ids, state filters and decisions, parsed once.

use std::str::FromStr;

use uuid::Uuid;
use walletops_proto::v1 as pb;

use crate::error::{Result, Violations, WalletOpsError};
use walletops_domain::{ApprovalState, Decision};

/// The longest reason a rejection may give.
pub const MAX_REASON_CHARS: usize = 500;

/// An approval id in field `field`.
pub fn approval_id(raw: &str, field: &str) -> Result<Uuid> {
    id_text(raw).map_err(|e| WalletOpsError::invalid(field, e))
}

fn id_text(raw: &str) -> Result<Uuid, String> {
    Uuid::from_str(raw.trim()).map_err(|_| "must be an approval id (a UUID)".to_owned())
}

/// A state filter: `None` for every state.
pub fn approval_state(raw: i32) -> Result<Option<ApprovalState>> {
    Ok(
        match pb::ApprovalState::try_from(raw)
            .map_err(|_| WalletOpsError::invalid("state", "not an approval state"))?
        {
            pb::ApprovalState::Unspecified => None,
            pb::ApprovalState::Pending => Some(ApprovalState::Pending),
            pb::ApprovalState::Approved => Some(ApprovalState::Approved),
            pb::ApprovalState::Rejected => Some(ApprovalState::Rejected),
            pb::ApprovalState::Expired => Some(ApprovalState::Expired),
            pb::ApprovalState::Submitted => Some(ApprovalState::Submitted),
            pb::ApprovalState::Failed => Some(ApprovalState::Failed),
        },
    )
}

/// A state filter by name (`pending`, ...; empty: every state), as REST and the CLI give it.
pub fn approval_state_named(raw: &str) -> Result<Option<ApprovalState>> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Ok(None);
    }
    ApprovalState::parse(&raw.to_ascii_lowercase())
        .map(Some)
        .ok_or_else(|| {
            WalletOpsError::invalid(
                "state",
                "must be pending, approved, rejected, expired, submitted or failed",
            )
        })
}

/// `DecideApproval`.
#[derive(Debug, Clone)]
pub struct DecideRequest {
    /// The approval.
    pub id: Uuid,
    /// What to do with it.
    pub decision: Decision,
}

impl DecideRequest {
    /// Every bad field in one INVALID_INPUT.
    pub fn parse(req: &pb::DecideApprovalRequest) -> Result<Self> {
        let mut v = Violations::default();
        let id = v.check("id", id_text(&req.id));
        let reason = v.check("reason", reason(req.reason.as_deref(), req.approve));
        v.finish()?;
        match (id, reason) {
            (Some(id), Some(reason)) => Ok(Self {
                id,
                decision: if req.approve {
                    Decision::Approve
                } else {
                    Decision::Reject(reason)
                },
            }),
            _ => Err(WalletOpsError::invalid("id", "unreadable")),
        }
    }
}

/// A rejection's reason, trimmed; none when empty.
fn reason(raw: Option<&str>, approve: bool) -> Result<Option<String>, String> {
    let Some(text) = raw.map(str::trim).filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    if approve {
        return Err("only a rejection gives a reason".to_owned());
    }
    if text.chars().count() > MAX_REASON_CHARS {
        return Err(format!("at most {MAX_REASON_CHARS} characters"));
    }
    if text.chars().any(char::is_control) {
        return Err("must not hold control characters".to_owned());
    }
    Ok(Some(text.to_owned()))
}
