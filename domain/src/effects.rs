//! What a write does to its wallet, read from a simulation before it is signed or from the
//! chain once it is final: per asset what leaves the wallet and to whom, what comes in, and
//! the allowances, delegations and authorities it grants. Limits, policies and the swap
//! guard judge these values, never the request's own fields.

use std::str::FromStr;

use alloy::primitives::U256;
use serde::{Deserialize, Serialize};

use super::{NATIVE_ASSET, WalletAddress};

/// An asset a write moves or grants a hold on. Stored and shown by its name (`Asset::name`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
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

impl From<Asset> for String {
    fn from(asset: Asset) -> Self {
        asset.name()
    }
}

impl TryFrom<String> for Asset {
    type Error = String;

    fn try_from(name: String) -> Result<Self, String> {
        if name == NATIVE_ASSET {
            return Ok(Self::Native);
        }
        WalletAddress::from_str(&name).map(Self::Token)
    }
}

/// One move of an asset out of the wallet or into it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Flow {
    /// What moves.
    pub asset: Asset,
    /// The other side: the receiver of an outflow, the sender of an inflow.
    pub counterparty: WalletAddress,
    /// Base units; 1 for each non-fungible token.
    #[serde(with = "decimal")]
    pub amount: U256,
    /// A non-fungible token's id (ERC-721, ERC-1155).
    #[serde(with = "decimal_option", default)]
    pub token_id: Option<U256>,
}

/// What kind of hold on the wallet's assets a write grants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    /// What it is a hold on.
    pub kind: GrantKind,
    /// The asset held.
    pub asset: Asset,
    /// Who gets it.
    pub spender: WalletAddress,
    /// How much; `None`: unlimited (the maximum value, an operator, an authority).
    #[serde(with = "decimal_option")]
    pub amount: Option<U256>,
}

/// Everything a write does to its wallet.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
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

impl Effects {
    /// How `landed` (read from the chain once final) differs from these (simulated), per
    /// asset: what left, what came in (native coins only when `native_inflows_read`: a
    /// receipt does not show them) and what was granted; `None` when they agree.
    pub fn difference(&self, landed: &Effects, native_inflows_read: bool) -> Option<String> {
        let mut assets: Vec<Asset> = Vec::new();
        for f in [self, landed] {
            for asset in f
                .outflows
                .iter()
                .chain(&f.inflows)
                .map(|fl| fl.asset)
                .chain(f.grants.iter().map(|g| g.asset))
            {
                if !assets.contains(&asset) {
                    assets.push(asset);
                }
            }
        }
        let mut parts = Vec::new();
        for asset in assets {
            let name = asset.name();
            for (what, simulated, moved) in [
                ("out", self.outflow_of(asset), landed.outflow_of(asset)),
                ("in", self.inflow_of(asset), landed.inflow_of(asset)),
            ] {
                let unread = what == "in" && asset == Asset::Native && !native_inflows_read;
                if simulated != moved && !unread {
                    parts.push(format!(
                        "{name} {what}: simulated {simulated}, on chain {moved}"
                    ));
                }
            }
            let granted = |e: &Effects| {
                let mut g: Vec<(String, Option<U256>)> = e
                    .grants
                    .iter()
                    .filter(|g| g.asset == asset)
                    .map(|g| (g.spender.to_string(), g.amount))
                    .collect();
                g.sort();
                g
            };
            if granted(self) != granted(landed) {
                parts.push(format!("{name}: the holds granted differ"));
            }
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

/// A `U256` as a decimal string, as the API writes amounts.
mod decimal {
    use alloy::primitives::U256;
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub(super) fn serialize<S: Serializer>(v: &U256, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(v)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<U256, D::Error> {
        let text = String::deserialize(d)?;
        U256::from_str_radix(&text, 10).map_err(D::Error::custom)
    }
}

/// An optional `U256` as a decimal string or null.
mod decimal_option {
    use alloy::primitives::U256;
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub(super) fn serialize<S: Serializer>(v: &Option<U256>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(v) => s.collect_str(v),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<U256>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|text| U256::from_str_radix(&text, 10).map_err(D::Error::custom))
            .transpose()
    }
}

fn sum<'a>(flows: impl Iterator<Item = &'a Flow>) -> U256 {
    flows.fold(U256::ZERO, |total, f| total.saturating_add(f.amount))
}

#[cfg(test)]
mod tests {
    use alloy::primitives::{Address, U256};

    use super::{Asset, Effects, Flow, Grant, GrantKind, WalletAddress};

    fn sample() -> Effects {
        let other = WalletAddress::Evm(Address::repeat_byte(0x11));
        Effects {
            outflows: vec![Flow {
                asset: Asset::Native,
                counterparty: other,
                amount: U256::from(5),
                token_id: None,
            }],
            inflows: vec![],
            grants: vec![Grant {
                kind: GrantKind::Allowance,
                asset: Asset::Token(other),
                spender: other,
                amount: None,
            }],
        }
    }

    #[test]
    fn effects_round_trip_as_the_api_writes_them() {
        let text = serde_json::to_string(&sample()).expect("json");
        assert!(text.contains(r#""amount":"5""#), "{text}");
        assert!(text.contains(r#""kind":"allowance""#), "{text}");
        let back: Effects = serde_json::from_str(&text).expect("parsed");
        assert_eq!(back, sample());
    }

    #[test]
    fn a_difference_names_the_asset_and_both_amounts() {
        assert_eq!(sample().difference(&sample(), true), None);
        let mut landed = sample();
        landed.outflows[0].amount = U256::from(7);
        landed.grants.clear();
        let said = sample().difference(&landed, true).expect("a difference");
        assert!(
            said.contains("native out: simulated 5, on chain 7"),
            "{said}"
        );
        assert!(said.contains("holds granted differ"), "{said}");
    }

    #[test]
    fn native_inflows_a_reading_cannot_see_are_not_a_difference() {
        let mut simulated = sample();
        simulated.inflows.push(Flow {
            counterparty: WalletAddress::Evm(Address::repeat_byte(0x22)),
            ..simulated.outflows[0].clone()
        });
        assert_eq!(simulated.difference(&sample(), false), None);
        let said = simulated.difference(&sample(), true).expect("a difference");
        assert!(
            said.contains("native in: simulated 5, on chain 0"),
            "{said}"
        );
    }
}
