//! What an EVM transaction may pay per gas: the node's suggestion (EIP-1559 from the fee
//! history, else the legacy gas price) held to the operator's caps, and, on a chain with
//! several RPC URLs, only when their answers agree.

use alloy::{
    eips::BlockNumberOrTag,
    providers::{Provider, RootProvider, utils::eip1559_default_estimator},
};

use super::{Fees, timed};
use crate::ChainError;

/// One gwei in wei.
const GWEI: u128 = 1_000_000_000;

/// Two fee answers differing by more than this factor disagree: base fees move at most
/// 12.5 % a block, so nodes a block or two apart stay well within it.
const DISAGREEING_FACTOR: u128 = 3;

/// The most any transaction the service signs pays per gas (`monitor.max_fee_per_gas_gwei`
/// and `monitor.max_priority_fee_per_gas_gwei`, in wei).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeeCaps {
    /// Highest `maxFeePerGas` (or legacy gas price).
    pub max_fee_per_gas: u128,
    /// Highest `maxPriorityFeePerGas`.
    pub max_priority_fee_per_gas: u128,
}

impl Default for FeeCaps {
    fn default() -> Self {
        Self {
            max_fee_per_gas: 1000 * GWEI,
            max_priority_fee_per_gas: 100 * GWEI,
        }
    }
}

/// What a node says a transaction should pay now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeeReading {
    /// The next block's base fee; `None` on a chain without one (the legacy gas price is
    /// then the whole fee).
    pub base_fee_per_gas: Option<u128>,
    /// The fees the node's answers suggest.
    pub suggested: Fees,
}

impl FeeReading {
    /// What a transaction must pay at least to be included: the base fee, or the gas price.
    fn floor(&self) -> u128 {
        self.base_fee_per_gas
            .unwrap_or(self.suggested.max_fee_per_gas)
    }
}

impl FeeCaps {
    /// The fees to sign at on `chain`: the suggestion held under both caps. Refused
    /// (`SERVICE_UNAVAILABLE`, nothing signed) while the chain's base fee is above the cap:
    /// a transaction under the cap could not be included.
    pub fn apply(&self, chain: &str, reading: FeeReading) -> Result<Fees, ChainError> {
        if reading.floor() > self.max_fee_per_gas {
            return Err(ChainError::Unavailable(format!(
                "the fee on {chain} is {} per gas, above the cap of {} (monitor.max_fee_per_gas_gwei); \
                 writes on {chain} wait until it falls",
                gwei(reading.floor()),
                gwei(self.max_fee_per_gas)
            )));
        }
        let max_fee_per_gas = reading.suggested.max_fee_per_gas.min(self.max_fee_per_gas);
        Ok(Fees {
            max_fee_per_gas,
            max_priority_fee_per_gas: reading
                .suggested
                .max_priority_fee_per_gas
                .min(self.max_priority_fee_per_gas)
                .min(max_fee_per_gas),
        })
    }
}

/// `wei` in gwei for messages, with up to 3 decimals.
fn gwei(wei: u128) -> String {
    let whole = wei / GWEI;
    let milli = (wei % GWEI) / 1_000_000;
    if milli == 0 {
        format!("{whole} gwei")
    } else {
        let decimals = format!("{milli:03}");
        format!("{whole}.{} gwei", decimals.trim_end_matches('0'))
    }
}

/// The node's fee suggestion: alloy's default EIP-1559 estimate (twice the next base fee
/// plus the 20th percentile tip of the last 10 blocks), else the legacy gas price.
pub(super) async fn read(provider: &RootProvider) -> Result<FeeReading, ChainError> {
    let history = timed(
        "read the fee history",
        provider.get_fee_history(
            alloy::providers::utils::EIP1559_FEE_ESTIMATION_PAST_BLOCKS,
            BlockNumberOrTag::Latest,
            &[alloy::providers::utils::EIP1559_FEE_ESTIMATION_REWARD_PERCENTILE],
        ),
    )
    .await;
    if let Ok(history) = history
        && let Some(base) = history.latest_block_base_fee().filter(|b| *b != 0)
    {
        let estimate = eip1559_default_estimator(base, &history.reward.unwrap_or_default());
        return Ok(FeeReading {
            base_fee_per_gas: Some(base),
            suggested: Fees {
                max_fee_per_gas: estimate.max_fee_per_gas,
                max_priority_fee_per_gas: estimate.max_priority_fee_per_gas,
            },
        });
    }
    let price = timed("read the gas price", provider.get_gas_price().into_future()).await?;
    Ok(FeeReading {
        base_fee_per_gas: None,
        suggested: Fees {
            max_fee_per_gas: price,
            max_priority_fee_per_gas: price,
        },
    })
}

/// The reading to trust among the answers of a chain's RPC URLs (those that answered): the
/// median, when more than half of them agree with it within `DISAGREEING_FACTOR`. A node
/// answering absurd fees is then outvoted, and two nodes that disagree are both distrusted.
pub(super) fn agreed(chain: &str, mut answers: Vec<FeeReading>) -> Result<FeeReading, ChainError> {
    answers.sort_by_key(FeeReading::floor);
    let Some(&median) = answers.get(answers.len().saturating_sub(1) / 2) else {
        return Err(ChainError::Unavailable(format!(
            "no RPC URL of {chain} answered its fees"
        )));
    };
    let near = |a: &FeeReading| {
        let (lo, hi) = (a.floor().min(median.floor()), a.floor().max(median.floor()));
        hi <= lo.saturating_mul(DISAGREEING_FACTOR)
    };
    if answers.iter().filter(|a| near(a)).count() * 2 > answers.len() {
        // Each part is its own median: a node agreeing on the base fee cannot bring an
        // absurd tip along.
        let middle = |part: fn(&FeeReading) -> u128| {
            let mut parts: Vec<u128> = answers.iter().map(part).collect();
            parts.sort_unstable();
            parts[(parts.len() - 1) / 2]
        };
        return Ok(FeeReading {
            base_fee_per_gas: median.base_fee_per_gas,
            suggested: Fees {
                max_fee_per_gas: middle(|a| a.suggested.max_fee_per_gas),
                max_priority_fee_per_gas: middle(|a| a.suggested.max_priority_fee_per_gas),
            },
        });
    }
    let (low, high) = (answers[0].floor(), answers[answers.len() - 1].floor());
    Err(ChainError::Unavailable(format!(
        "the RPC URLs of {chain} disagree about its fees ({} to {} per gas); writes on {chain} \
         wait until they agree",
        gwei(low),
        gwei(high)
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(base: u128, tip: u128) -> FeeReading {
        FeeReading {
            base_fee_per_gas: Some(base * GWEI),
            suggested: Fees {
                max_fee_per_gas: (2 * base + tip) * GWEI,
                max_priority_fee_per_gas: tip * GWEI,
            },
        }
    }

    fn caps(max: u128, tip: u128) -> FeeCaps {
        FeeCaps {
            max_fee_per_gas: max * GWEI,
            max_priority_fee_per_gas: tip * GWEI,
        }
    }

    #[test]
    fn fees_under_the_caps_are_kept() {
        let fees = caps(100, 5).apply("base", reading(10, 2)).unwrap();
        assert_eq!(fees.max_fee_per_gas, 22 * GWEI);
        assert_eq!(fees.max_priority_fee_per_gas, 2 * GWEI);
    }

    #[test]
    fn both_fees_are_held_under_their_caps() {
        let fees = caps(100, 5).apply("base", reading(45, 400)).unwrap();
        assert_eq!(fees.max_fee_per_gas, 100 * GWEI);
        assert_eq!(fees.max_priority_fee_per_gas, 5 * GWEI);
    }

    #[test]
    fn a_base_fee_above_the_cap_is_refused_naming_chain_and_cap() {
        let err = caps(100, 5).apply("base", reading(101, 1)).unwrap_err();
        let ChainError::Unavailable(message) = err else {
            panic!("{err:?}")
        };
        assert!(message.contains("base"), "{message}");
        assert!(message.contains("100 gwei"), "{message}");
        assert!(message.contains("101 gwei"), "{message}");
    }

    #[test]
    fn a_legacy_gas_price_above_the_cap_is_refused() {
        let legacy = FeeReading {
            base_fee_per_gas: None,
            suggested: Fees {
                max_fee_per_gas: 150 * GWEI,
                max_priority_fee_per_gas: 150 * GWEI,
            },
        };
        assert!(caps(100, 5).apply("bsc", legacy).is_err());
        let fees = caps(200, 5).apply("bsc", legacy).unwrap();
        assert_eq!(fees.max_fee_per_gas, 150 * GWEI);
    }

    #[test]
    fn one_absurd_answer_among_three_is_outvoted() {
        let trusted = agreed(
            "base",
            vec![reading(10, 1), reading(90_000, 1), reading(11, 1)],
        )
        .unwrap();
        assert_eq!(trusted, reading(11, 1));
    }

    #[test]
    fn a_node_agreeing_on_the_base_fee_brings_no_absurd_tip() {
        let trusted = agreed(
            "base",
            vec![reading(10, 1), reading(10, 900), reading(10, 2)],
        )
        .unwrap();
        assert_eq!(trusted.suggested.max_priority_fee_per_gas, 2 * GWEI);
        assert_eq!(trusted.suggested.max_fee_per_gas, 22 * GWEI);
    }

    #[test]
    fn two_answers_that_disagree_are_both_distrusted() {
        let err = agreed("base", vec![reading(10, 1), reading(500, 1)]).unwrap_err();
        assert!(matches!(err, ChainError::Unavailable(ref m) if m.contains("disagree")));
        assert_eq!(
            agreed("base", vec![reading(10, 1), reading(12, 1)]).unwrap(),
            reading(10, 1)
        );
    }

    #[test]
    fn one_answer_is_taken_and_none_is_unavailable() {
        assert_eq!(agreed("base", vec![reading(7, 1)]).unwrap(), reading(7, 1));
        assert!(agreed("base", vec![]).is_err());
    }

    #[test]
    fn gwei_figures_read_well() {
        assert_eq!(gwei(100 * GWEI), "100 gwei");
        assert_eq!(gwei(1_500_000_000), "1.5 gwei");
    }
}
