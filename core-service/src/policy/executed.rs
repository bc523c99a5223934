//! Execution held to its reservation: when a limited key's write is final, what it moved on
//! chain (its receipt's or its pre/post balances' effects) is compared with what it
//! reserved per asset. A write that moved more (a contract that behaves otherwise once
//! mined, a state flipped by a front-runner) freezes its key's whole line, and the excess is
//! charged to the line's budget.

use alloy::primitives::U256;
use walletops_domain::{Effects, FEES_ASSET, Spend};

/// One asset a write moved beyond its reservation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Excess {
    /// What it moved on chain, as the key's spend of that asset (the amount to charge).
    pub moved: Spend,
    /// What it had reserved of the asset.
    pub reserved: U256,
}

/// What `landed` (a final write's effects on chain) moved beyond `reserved`, the write's
/// reservations (`Store::reservations_of`), per asset; none for a write of a key without
/// limits. A grant counts as moving its amount, an unlimited one as moving everything.
/// `asset_limits`: whether the key has a limit on any asset (not only a fee budget): such a
/// key moves only assets it reserved, so any other moved is excess; a key held by policy
/// rules alone reserves no asset, and only what it reserved is compared.
pub fn beyond_reserved(landed: &Effects, reserved: &[Spend], asset_limits: bool) -> Vec<Excess> {
    // Every limited write reserves at least its fee: a write that reserved nothing was not
    // a limited key's.
    let Some(first) = reserved.first() else {
        return Vec::new();
    };
    let mut excess = Vec::new();
    for asset in landed.assets_at_stake() {
        let name = asset.name();
        if name == FEES_ASSET {
            continue;
        }
        let moved = landed
            .grants
            .iter()
            .filter(|g| g.asset == asset)
            .fold(landed.outflow_of(asset), |sum, g| {
                sum.saturating_add(g.amount.unwrap_or(U256::MAX))
            });
        let mut rows = reserved.iter().filter(|s| s.asset == name).peekable();
        if !asset_limits && rows.peek().is_none() {
            continue;
        }
        let held = rows.fold(U256::ZERO, |sum, s| sum.saturating_add(s.amount));
        if moved > held {
            excess.push(Excess {
                moved: Spend {
                    key_id: first.key_id,
                    chain: first.chain.clone(),
                    asset: name,
                    amount: moved,
                },
                reserved: held,
            });
        }
    }
    excess
}

/// Why a line froze, in words: what `excess` moved of each asset, against its reservation.
pub fn freeze_reason(transaction_id: uuid::Uuid, excess: &[Excess]) -> String {
    let moved: Vec<String> = excess
        .iter()
        .map(|e| {
            format!(
                "{} of {} where {} was reserved",
                e.moved.amount, e.moved.asset, e.reserved
            )
        })
        .collect();
    format!(
        "write {transaction_id} moved more on {} than its simulation showed: {}",
        excess.first().map_or("", |e| e.moved.chain.as_str()),
        moved.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy::primitives::Address;
    use uuid::Uuid;
    use walletops_domain::{Asset, Flow, Grant, GrantKind, WalletAddress};

    fn token() -> Asset {
        Asset::Token(WalletAddress::Evm(Address::repeat_byte(0x11)))
    }

    fn spend(asset: &str, amount: u64) -> Spend {
        Spend {
            key_id: Uuid::nil(),
            chain: "anvil".to_owned(),
            asset: asset.to_owned(),
            amount: U256::from(amount),
        }
    }

    fn out(asset: Asset, amount: u64) -> Flow {
        Flow {
            asset,
            counterparty: WalletAddress::Evm(Address::repeat_byte(0x22)),
            amount: U256::from(amount),
            token_id: None,
        }
    }

    #[test]
    fn only_what_moved_beyond_its_reservation_is_excess() {
        let name = token().name();
        let landed = Effects {
            outflows: vec![out(token(), 100), out(Asset::Native, 5)],
            ..Effects::default()
        };
        let reserved = [spend(&name, 100), spend("native", 5), spend(FEES_ASSET, 9)];
        assert!(beyond_reserved(&landed, &reserved, true).is_empty());
        let reserved = [spend(&name, 1), spend(FEES_ASSET, 9)];
        let excess = beyond_reserved(&landed, &reserved, true);
        assert_eq!(excess.len(), 2, "{excess:?}");
        assert_eq!(excess[0].moved.amount, U256::from(100));
        assert_eq!(excess[0].reserved, U256::from(1));
        assert_eq!(excess[1].moved.asset, "native");
        assert_eq!(excess[1].reserved, U256::ZERO);
        let why = freeze_reason(Uuid::nil(), &excess);
        assert!(
            why.contains("100 of") && why.contains("where 1 was reserved"),
            "{why}"
        );
        // A write of a key without limits reserved nothing and is no one's excess.
        assert!(beyond_reserved(&landed, &[], true).is_empty());
        // A key held by policy rules alone (a fee budget, no asset limit) is compared on
        // what it reserved only.
        let fees_only = [spend(FEES_ASSET, 9)];
        assert!(beyond_reserved(&landed, &fees_only, false).is_empty());
        assert_eq!(beyond_reserved(&landed, &reserved, false).len(), 1);
    }

    #[test]
    fn an_unlimited_grant_on_chain_is_excess_whatever_was_reserved() {
        let landed = Effects {
            grants: vec![Grant {
                kind: GrantKind::Allowance,
                asset: token(),
                spender: WalletAddress::Evm(Address::repeat_byte(0x33)),
                amount: None,
            }],
            ..Effects::default()
        };
        let excess = beyond_reserved(&landed, &[spend(&token().name(), 1_000)], true);
        assert_eq!(excess.len(), 1);
        assert_eq!(excess[0].moved.amount, U256::MAX);
    }
}
