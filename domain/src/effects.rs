//! What a write does to its wallet, read from a simulation before it is signed or from the
//! chain once it is final: per asset what leaves the wallet and to whom, what comes in, and
//! the allowances, delegations and authorities it grants. Limits, policies and the swap
//! guard judge these values, never the request's own fields.

use alloy::primitives::U256;

use super::WalletAddress;

/// An asset a write moves or grants a hold on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Asset {
    /// The chain's native coin (wei, lamports).
    Native,
    /// A token: its contract (EVM) or mint (Solana).
    Token(WalletAddress),
}

impl Asset {
    /// Its name where limits and messages name it: `native`, a token's lowercase address or
    /// a mint (`asset_name`).
    pub fn name(self) -> String {
        super::asset_name(match self {
            Self::Native => None,
            Self::Token(token) => Some(token),
        })
    }
}

/// One move of an asset out of the wallet or into it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flow {
    /// What moves.
    pub asset: Asset,
    /// The other side: the receiver of an outflow, the sender of an inflow.
    pub counterparty: WalletAddress,
    /// Base units; 1 for each non-fungible token.
    pub amount: U256,
    /// A non-fungible token's id (ERC-721, ERC-1155).
    pub token_id: Option<U256>,
}

/// What kind of hold on the wallet's assets a write grants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrantKind {
    /// An ERC-20 allowance (`approve`), or one through Permit2.
    Allowance,
    /// A hold on one non-fungible token (ERC-721 `approve`).
    Token,
    /// A hold on every token of a collection (`setApprovalForAll`).
    All,
    /// An SPL delegation (`Approve`, `ApproveChecked`).
    Delegation,
    /// A change of who controls an account: an SPL `SetAuthority`, an account closed to
    /// another destination, a System `Assign`.
    Authority,
}

/// A hold on the wallet's assets that a write grants to another account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// What it is a hold on.
    pub kind: GrantKind,
    /// The asset held.
    pub asset: Asset,
    /// Who gets it.
    pub spender: WalletAddress,
    /// How much; `None`: unlimited (the maximum value, an operator, an authority).
    pub amount: Option<U256>,
}

/// Everything a write does to its wallet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Effects {
    /// What leaves the wallet, in the order it happens.
    pub outflows: Vec<Flow>,
    /// What comes in, in the order it happens.
    pub inflows: Vec<Flow>,
    /// Holds granted on its assets.
    pub grants: Vec<Grant>,
}

impl Effects {
    /// The total of `asset` that leaves the wallet.
    pub fn outflow_of(&self, asset: Asset) -> U256 {
        sum(self.outflows.iter().filter(|f| f.asset == asset))
    }

    /// The total of `asset` that comes in.
    pub fn inflow_of(&self, asset: Asset) -> U256 {
        sum(self.inflows.iter().filter(|f| f.asset == asset))
    }

    /// Every asset that leaves the wallet or is granted a hold on, each once, in the order
    /// the write first touches it.
    pub fn assets_at_stake(&self) -> Vec<Asset> {
        let mut assets = Vec::new();
        let touched = self.outflows.iter().map(|f| f.asset);
        for asset in touched.chain(self.grants.iter().map(|g| g.asset)) {
            if !assets.contains(&asset) {
                assets.push(asset);
            }
        }
        assets
    }
}

fn sum<'a>(flows: impl Iterator<Item = &'a Flow>) -> U256 {
    flows.fold(U256::ZERO, |total, f| total.saturating_add(f.amount))
}
