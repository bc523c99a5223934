//! The fees of an EVM replacement: raised enough that nodes accept it in place of the
//! transaction it replaces (geth's price bump), following the current fees, never past the
//! operator's caps.

use walletops_chains::evm::{FeeCaps, Fees};

/// The smallest raise of both fees that nodes accept for a replacement (geth's price bump).
pub(super) const MIN_BUMP_PERCENT: u128 = 10;

/// `v` raised by `percent`, rounded up.
pub(super) fn raise(v: u128, percent: u128) -> u128 {
    v.saturating_mul(100 + percent).div_ceil(100)
}

/// The fees of a replacement for a transaction paying `old`: both raised by `bump_percent`
/// (at least 10 %) and at least the current `now`; when that passes a cap, the cap itself
/// as long as it still is a 10 % raise. `None`: no replacement fits under the caps.
pub(super) fn replacement_fees(
    old: Fees,
    now: Fees,
    bump_percent: u128,
    caps: FeeCaps,
) -> Option<Fees> {
    let bump = bump_percent.max(MIN_BUMP_PERCENT);
    let wanted = raise(old.max_fee_per_gas, bump).max(now.max_fee_per_gas);
    let max_fee_per_gas = wanted.min(caps.max_fee_per_gas);
    let min_tip = raise(old.max_priority_fee_per_gas, MIN_BUMP_PERCENT);
    let tip = raise(old.max_priority_fee_per_gas, bump)
        .max(now.max_priority_fee_per_gas)
        .min(caps.max_priority_fee_per_gas)
        .min(max_fee_per_gas);
    (max_fee_per_gas >= raise(old.max_fee_per_gas, MIN_BUMP_PERCENT) && tip >= min_tip).then_some(
        Fees {
            max_fee_per_gas,
            max_priority_fee_per_gas: tip,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const GWEI: u128 = 1_000_000_000;

    fn fees(max: u128, tip: u128) -> Fees {
        Fees {
            max_fee_per_gas: max,
            max_priority_fee_per_gas: tip,
        }
    }

    /// Caps with `max` per gas and no tighter cap on the tip.
    fn cap(max: u128) -> FeeCaps {
        FeeCaps {
            max_fee_per_gas: max,
            max_priority_fee_per_gas: u128::MAX,
        }
    }

    #[test]
    fn the_tip_stays_under_its_own_cap() {
        let old = fees(10 * GWEI, GWEI);
        let caps = FeeCaps {
            max_fee_per_gas: 500 * GWEI,
            max_priority_fee_per_gas: 1_200_000_000,
        };
        assert_eq!(
            replacement_fees(old, fees(GWEI, 50 * GWEI), 15, caps),
            Some(fees(11_500_000_000, 1_200_000_000))
        );
        // A tip already at its cap cannot make the 10 % raise nodes require.
        let at_cap = fees(10 * GWEI, 1_200_000_000);
        assert_eq!(replacement_fees(at_cap, fees(GWEI, GWEI), 15, caps), None);
    }

    #[test]
    fn a_replacement_raises_both_fees_by_the_bump_or_to_the_current_fees() {
        let old = fees(10 * GWEI, GWEI);
        assert_eq!(
            replacement_fees(old, fees(GWEI, GWEI / 10), 15, cap(500 * GWEI)),
            Some(fees(11_500_000_000, 1_150_000_000))
        );
        assert_eq!(
            replacement_fees(old, fees(30 * GWEI, 2 * GWEI), 15, cap(500 * GWEI)),
            Some(fees(30 * GWEI, 2 * GWEI))
        );
        // A bump below the nodes' minimum is raised to it.
        assert_eq!(
            replacement_fees(old, fees(GWEI, GWEI / 10), 1, cap(500 * GWEI)),
            Some(fees(11 * GWEI, 1_100_000_000))
        );
    }

    #[test]
    fn the_cap_is_used_while_it_still_allows_a_valid_replacement() {
        let old = fees(10 * GWEI, GWEI);
        // 15 % would need 11.5 gwei; the cap of 11 gwei is still a 10 % raise.
        assert_eq!(
            replacement_fees(old, fees(GWEI, GWEI / 10), 15, cap(11 * GWEI)),
            Some(fees(11 * GWEI, 1_150_000_000))
        );
        // Below a 10 % raise nothing fits.
        assert_eq!(
            replacement_fees(old, fees(GWEI, GWEI / 10), 15, cap(10_999_999_999)),
            None
        );
        // A tip at the old maximum fee rises with it, to the cap.
        assert_eq!(
            replacement_fees(
                fees(10 * GWEI, 10 * GWEI),
                fees(GWEI, GWEI),
                15,
                cap(11 * GWEI)
            ),
            Some(fees(11 * GWEI, 11 * GWEI))
        );
    }
}
