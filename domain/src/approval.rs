//! Writes held for a person's approval: a key's write that moves more of an asset than the
//! key's threshold for it is stored, not signed, until someone approves or rejects it in the
//! dashboard or the CLI, or its time runs out.

use alloy::primitives::U256;
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// Where a held write stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ApprovalState {
    /// Waiting for a person.
    Pending,
    /// Approved: a core is making the write.
    Approved,
    /// Rejected: never signed.
    Rejected,
    /// Nobody decided in time: never signed.
    Expired,
    /// Approved and made: the record is `transaction_id`.
    Submitted,
    /// Approved, but the write was refused when it was made (`error` says why).
    Failed,
}

impl ApprovalState {
    /// Every state.
    pub const ALL: [Self; 6] = [
        Self::Pending,
        Self::Approved,
        Self::Rejected,
        Self::Expired,
        Self::Submitted,
        Self::Failed,
    ];

    /// The stored (and shown) name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Approved => "approved",
            Self::Rejected => "rejected",
            Self::Expired => "expired",
            Self::Submitted => "submitted",
            Self::Failed => "failed",
        }
    }

    /// The state named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// Whether nothing more will happen to it.
    pub fn is_final(self) -> bool {
        !matches!(self, Self::Pending | Self::Approved)
    }
}

/// A write held for approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approval {
    /// Its id.
    pub id: Uuid,
    /// The user whose wallet it writes from.
    pub user_id: Uuid,
    /// The key that asked for it.
    pub key_id: Uuid,
    /// The write's Idempotency-Key.
    pub idempotency_key: Uuid,
    /// The endpoint (`/send`, `/token/approve`, `/contracts/send`, `/trade/swap`).
    pub path: String,
    /// The chain's slug.
    pub chain: String,
    /// `native`, a token's address (EVM, lowercase) or a mint.
    pub asset: String,
    /// What the write moves, base units.
    pub amount: U256,
    /// The key's threshold it exceeded, base units.
    pub threshold: U256,
    /// What it does, for the person who decides.
    pub summary: String,
    /// Where it stands.
    pub state: ApprovalState,
    /// When it was asked for.
    pub created_at: DateTime<Utc>,
    /// When a pending approval expires.
    pub expires_at: DateTime<Utc>,
    /// Who approved or rejected it (`dashboard:NAME`, `cli:NAME`), or `expiry`.
    pub decided_by: Option<String>,
    /// When.
    pub decided_at: Option<DateTime<Utc>>,
    /// The reason given with a rejection.
    pub reason: Option<String>,
    /// The record the approved write made.
    pub transaction_id: Option<Uuid>,
    /// Why an approved write was not made.
    pub error: Option<String>,
    /// The sending wallet's address as it resolved when the write was held: approved, the
    /// write is made from it. `None` for writes held before it was kept.
    pub wallet: Option<String>,
}

/// A write to hold: what the store keeps of it.
#[derive(Debug, Clone)]
pub struct HeldWrite {
    /// The user.
    pub user_id: Uuid,
    /// The key.
    pub key_id: Uuid,
    /// Its Idempotency-Key.
    pub idempotency_key: Uuid,
    /// The endpoint.
    pub path: String,
    /// The request's canonical protobuf encoding, run as is once approved.
    pub request: Vec<u8>,
    /// The hash its idempotency key stands for.
    pub request_hash: String,
    /// The chain's slug.
    pub chain: String,
    /// The asset's limits name.
    pub asset: String,
    /// What it moves.
    pub amount: U256,
    /// The threshold it exceeds.
    pub threshold: U256,
    /// The sending wallet's address as it resolved when held: the write, approved, is made
    /// from it.
    pub wallet: String,
    /// What it does.
    pub summary: String,
    /// When it expires unless decided.
    pub expires_at: DateTime<Utc>,
}

/// A person's decision on a pending write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Make the write.
    Approve,
    /// Never make it, with an optional reason.
    Reject(Option<String>),
}
