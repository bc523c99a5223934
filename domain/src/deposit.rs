//! Deposits: money that arrived at a user's wallet from outside, as the scanner found it on
//! the chain.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Where a deposit stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DepositState {
    /// Seen in a block (on Solana, at `confirmed` commitment).
    Pending,
    /// Its block is as deep as the chain's confirmation depth (on Solana, finalized).
    Confirmed,
    /// Its block left the chain (a reorganization); it may come back.
    Reverted,
    /// A token off the chain's allow list, or less than its minimum: recorded, never
    /// announced.
    Ignored,
}

impl DepositState {
    /// Every state.
    pub const ALL: [Self; 4] = [
        Self::Pending,
        Self::Confirmed,
        Self::Reverted,
        Self::Ignored,
    ];

    /// The states that are announced (`deposit.pending`, ...).
    pub const ANNOUNCED: [Self; 3] = [Self::Pending, Self::Confirmed, Self::Reverted];

    /// The state as stored and shown (`pending`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Confirmed => "confirmed",
            Self::Reverted => "reverted",
            Self::Ignored => "ignored",
        }
    }

    /// The state stored as `s`.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.as_str() == s)
    }

    /// The type of the event of entering this state (`deposit.pending`).
    pub fn event_type(self) -> String {
        format!("deposit.{}", self.as_str())
    }
}

/// A deposit: one credit of one asset to one wallet by one transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deposit {
    /// Derived from where it happened (`Deposit::id_of`): the same credit found twice is
    /// the same deposit.
    pub id: Uuid,
    /// The wallet's owner.
    pub user_id: Uuid,
    /// The wallet credited.
    pub wallet_id: Uuid,
    /// Chain slug.
    pub chain: String,
    /// The wallet's address, as the chain writes it.
    pub address: String,
    /// The transaction's hash or signature.
    pub tx_hash: String,
    /// `native`, the token's address (EVM, lowercase) or its mint.
    pub asset: String,
    /// Base units.
    pub amount: String,
    /// The sender, when the chain names one.
    pub from: Option<String>,
    /// Its block number (EVM) or slot (Solana).
    pub block: u64,
    /// Its block's hash (EVM; on Solana the slot's blockhash is not read).
    pub block_hash: Option<String>,
    /// Where it stands.
    pub state: DepositState,
    /// Why it is ignored.
    pub ignored_reason: Option<String>,
    /// When it was first seen.
    pub created_at: DateTime<Utc>,
    /// When it last changed state.
    pub updated_at: DateTime<Utc>,
}

impl Deposit {
    /// The id of the credit found at `place`: the chain, the transaction, the asset, the
    /// wallet credited and the credit's rank among that transaction's credits of that asset to
    /// that wallet. It names the credit, not the block, so a re-scan, a second core or the
    /// same transaction re-included after a reorganization find the same deposit. Each part
    /// comes in its one spelling (EVM hex lowercase; Solana base58 as it is).
    pub fn id_of(chain: &str, tx_hash: &str, asset: &str, address: &str, rank: u32) -> Uuid {
        let place = format!("{chain}:{tx_hash}:{asset}:{address}:{rank}");
        Uuid::new_v5(&DEPOSIT_NAMESPACE, place.as_bytes())
    }
}

/// The namespace of deposit ids (a v4 UUID chosen once).
const DEPOSIT_NAMESPACE: Uuid = Uuid::from_u128(0x5b0c_7f0e_8d1a_4c55_9a2e_6f3d_1b7c_9e04);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_name_the_credit() {
        let a = Deposit::id_of("anvil", "0xabcd", "native", "0xab", 0);
        assert_eq!(a, Deposit::id_of("anvil", "0xabcd", "native", "0xab", 0));
        assert_ne!(a, Deposit::id_of("anvil", "0xabcd", "native", "0xab", 1));
        assert_ne!(a, Deposit::id_of("base", "0xabcd", "native", "0xab", 0));
        for s in DepositState::ALL {
            assert_eq!(DepositState::parse(s.as_str()), Some(s));
        }
    }
}
