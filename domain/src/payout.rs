//! Payouts: many recipients paid from one wallet on one chain in one request, each item a
//! write of its own under a key derived from the payout's.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::{Transfer, WalletAddress};

/// Where a payout stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PayoutState {
    /// Its items are being made or followed.
    Running,
    /// Every item is final.
    Completed,
}

impl PayoutState {
    /// The state as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Completed => "completed",
        }
    }

    /// The state stored as `s`.
    pub fn parse(s: &str) -> Option<Self> {
        [Self::Running, Self::Completed]
            .into_iter()
            .find(|p| p.as_str() == s)
    }
}

/// What became of an item's write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ItemMade {
    /// Not made yet.
    Queued,
    /// Signed and stored: its transaction record.
    Submitted(Uuid),
    /// Held for a person's approval: the approval.
    Held(Uuid),
    /// Refused before it was signed: why.
    Failed(String),
}

/// One recipient of a payout, as requested (its fields checked as a send's are).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PayoutItem {
    /// Its place in the request, from 0.
    pub index: u32,
    /// What it moves where.
    pub transfer: Transfer,
    /// The caller's reference.
    pub reference: Option<String>,
    /// On Solana, the index of the first item of the transaction it is paid in (items of
    /// one asset are packed several to a transaction); `None`: a transaction of its own.
    pub pack: Option<u32>,
    /// What became of its write.
    pub made: ItemMade,
}

/// A payout and its items.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payout {
    /// Its id.
    pub id: Uuid,
    /// Its owner.
    pub user_id: Uuid,
    /// The key that made it (its items are that key's writes); `None`: a session.
    pub key_id: Option<Uuid>,
    /// The `Idempotency-Key` it was made under.
    pub idempotency_key: Uuid,
    /// The request's hash, to tell a replay from another request under the key.
    pub request_hash: String,
    /// Chain slug.
    pub chain: String,
    /// The paying wallet.
    pub from: WalletAddress,
    /// Where it stands.
    pub state: PayoutState,
    /// Its items, in request order.
    pub items: Vec<PayoutItem>,
    /// When it was made.
    pub created_at: DateTime<Utc>,
    /// When every item became final.
    pub completed_at: Option<DateTime<Utc>>,
    /// The lamports a Solana payout pays as the rent of its recipients' new token accounts,
    /// as counted when it was checked; `None` when read back (the accounts may exist by now).
    pub rent: Option<u64>,
}

/// Where a payout's item stands, as the API tells it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ItemStanding {
    /// QUEUED, PENDING_APPROVAL, FAILED, or its transaction's status (SUBMITTED, CONFIRMED...).
    pub state: String,
    /// Its transaction record.
    pub transaction_id: Option<Uuid>,
    /// Its transaction's hash or signature.
    pub hash: Option<String>,
    /// Why it failed.
    pub error: Option<String>,
    /// The approval it waits for.
    pub approval_id: Option<Uuid>,
    /// Whether it is final: failed before signing, or its transaction final.
    pub is_final: bool,
}

impl ItemStanding {
    /// A standing without a transaction.
    pub fn named(state: &str) -> Self {
        Self {
            state: state.to_owned(),
            ..Self::default()
        }
    }
}

impl Payout {
    /// The idempotency key of item `index` of the payout made under `payout_key`: the same
    /// item made again (a crash, a second core) claims the same key, so it is paid once.
    pub fn item_key(payout_key: Uuid, index: u32) -> Uuid {
        Uuid::new_v5(&payout_key, format!("payout item {index}").as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn item_keys_differ_per_item_and_payout() {
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        assert_eq!(Payout::item_key(a, 0), Payout::item_key(a, 0));
        assert_ne!(Payout::item_key(a, 0), Payout::item_key(a, 1));
        assert_ne!(Payout::item_key(a, 0), Payout::item_key(b, 0));
        for s in [PayoutState::Running, PayoutState::Completed] {
            assert_eq!(PayoutState::parse(s.as_str()), Some(s));
        }
    }
}
