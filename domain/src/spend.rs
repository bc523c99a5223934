//! Spend limits of API keys: what a key may move of one asset on one chain, per write and
//! per rolling 24 hours, and what a write of a limited key moves.

use alloy::primitives::U256;
use uuid::Uuid;

use super::WalletAddress;

/// The asset name of a chain's native coin in limits.
pub const NATIVE_ASSET: &str = "native";

/// The name, in limits, of the network fees a key's writes pay on a chain (in the native
/// coin's base units): a budget of its own beside the coin's, since fees leave the wallet
/// whatever a write moves.
pub const FEES_ASSET: &str = "fees";

/// The name, in limits, of a key's gas ceiling on a chain: its `max_per_transaction` is the
/// most gas (EVM gas limit, Solana compute units) one write may be signed with. Nothing is
/// reserved against it.
pub const GAS_ASSET: &str = "gas";

/// The name limits give an asset: `native` for the coin (`None`), a token's address as
/// lowercase 0x-hex, a mint in base58. Limits are set and writes are held under this one
/// name, so the two always match.
pub fn asset_name(token: Option<WalletAddress>) -> String {
    match token {
        None => NATIVE_ASSET.to_owned(),
        Some(WalletAddress::Evm(a)) => format!("{a:#x}"),
        Some(WalletAddress::Solana(m)) => m.to_string(),
    }
}

/// What one write of a key moves, to be held against the key's limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spend {
    /// The key that makes the write.
    pub key_id: Uuid,
    /// The chain's slug.
    pub chain: String,
    /// `native`, or the token's address (EVM, lowercase) or mint (Solana).
    pub asset: String,
    /// Base units.
    pub amount: U256,
}

/// A key's limit on one asset of one chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpendLimit {
    /// The key.
    pub key_id: Uuid,
    /// The chain's slug.
    pub chain: String,
    /// `native`, or the token's address (EVM, lowercase) or mint (Solana).
    pub asset: String,
    /// The most one write may move; `None`: no such limit.
    pub max_per_transaction: Option<U256>,
    /// The most the writes of a rolling 24 hours may move; `None`: no such limit.
    pub daily_budget: Option<U256>,
    /// A write that moves more than this waits for a person's approval; `None`: none does.
    pub approval_above: Option<U256>,
}

/// A limit with what is held against it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpendStanding {
    /// The limit.
    pub limit: SpendLimit,
    /// Reserved by the writes of the last 24 hours that did not end FAILED or DROPPED.
    pub spent_24h: U256,
}

impl SpendStanding {
    /// What the daily budget has left; `None`: no budget.
    pub fn left(&self) -> Option<U256> {
        self.limit
            .daily_budget
            .map(|budget| budget.saturating_sub(self.spent_24h))
    }
}
