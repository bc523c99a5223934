//! The verdict on effects, rule by rule.

use alloy::primitives::{Address, U256};
use uuid::Uuid;
use walletops_domain::{
    Asset, Effects, Flow, Grant, GrantKind, SpendLimit, SpendStanding, WalletAddress,
};

use super::{describe, verdict};
use crate::error::WalletOpsError;

const CHAIN: &str = "ethereum";

fn token(n: u8) -> Asset {
    Asset::Token(WalletAddress::Evm(Address::repeat_byte(n)))
}

fn stranger() -> WalletAddress {
    WalletAddress::Evm(Address::repeat_byte(0xee))
}

fn out(asset: Asset, amount: u64) -> Flow {
    Flow {
        asset,
        counterparty: stranger(),
        amount: U256::from(amount),
        token_id: None,
    }
}

fn standing(asset: Asset, per_write: u64, budget: u64, spent: u64) -> SpendStanding {
    SpendStanding {
        limit: SpendLimit {
            key_id: Uuid::nil(),
            chain: CHAIN.to_owned(),
            asset: asset.name(),
            max_per_transaction: Some(U256::from(per_write)),
            daily_budget: Some(U256::from(budget)),
            approval_above: None,
        },
        spent_24h: U256::from(spent),
    }
}

fn forbidden(verdict: super::Verdict) -> String {
    match verdict.refusal() {
        Some(WalletOpsError::Forbidden(why)) => why,
        other => panic!("expected FORBIDDEN, got {other:?}"),
    }
}

#[test]
fn every_asset_moved_is_reserved_against_its_own_limit() {
    let effects = Effects {
        outflows: vec![
            out(token(1), 600),
            out(Asset::Native, 5),
            out(token(1), 300),
        ],
        ..Effects::default()
    };
    let limits = [
        standing(token(1), 1_000, 5_000, 0),
        standing(Asset::Native, 10, 10, 0),
    ];
    let verdict = verdict(Uuid::nil(), CHAIN, &effects, &limits);
    assert!(verdict.refusals.is_empty(), "{:?}", verdict.refusals);
    let spends: Vec<(String, U256)> = verdict
        .spends
        .into_iter()
        .map(|s| (s.asset, s.amount))
        .collect();
    assert_eq!(
        spends,
        [
            (token(1).name(), U256::from(900)),
            ("native".to_owned(), U256::from(5))
        ]
    );
}

#[test]
fn an_asset_without_a_limit_is_refused_by_name() {
    let effects = Effects {
        outflows: vec![out(token(2), 1)],
        ..Effects::default()
    };
    let why = forbidden(verdict(
        Uuid::nil(),
        CHAIN,
        &effects,
        &[standing(token(1), 1_000, 1_000, 0)],
    ));
    assert!(why.contains(&token(2).name()), "{why}");
    // A limit on the same asset of another chain is no permission here.
    let mut elsewhere = standing(token(2), 1_000, 1_000, 0);
    elsewhere.limit.chain = "base".to_owned();
    forbidden(verdict(Uuid::nil(), CHAIN, &effects, &[elsewhere]));
}

#[test]
fn a_grant_counts_as_moving_its_amount_and_an_unlimited_one_is_refused() {
    let grant = |amount: Option<u64>| Effects {
        grants: vec![Grant {
            kind: GrantKind::Allowance,
            asset: token(1),
            spender: stranger(),
            amount: amount.map(U256::from),
        }],
        ..Effects::default()
    };
    let limits = [standing(token(1), 1_000, 5_000, 4_500)];
    let why = forbidden(verdict(Uuid::nil(), CHAIN, &grant(Some(600)), &limits));
    assert!(why.contains("24-hour budget"), "{why}");
    assert_eq!(
        verdict(Uuid::nil(), CHAIN, &grant(Some(500)), &limits).spends[0].amount,
        U256::from(500)
    );
    let why = forbidden(verdict(Uuid::nil(), CHAIN, &grant(None), &limits));
    assert!(
        why.contains("unlimited") && why.contains(&stranger().to_string()),
        "{why}"
    );
}

#[test]
fn the_per_write_maximum_holds_the_sum_of_one_asset() {
    let effects = Effects {
        outflows: vec![out(token(1), 600), out(token(1), 600)],
        ..Effects::default()
    };
    let why = forbidden(verdict(
        Uuid::nil(),
        CHAIN,
        &effects,
        &[standing(token(1), 1_000, 10_000, 0)],
    ));
    assert!(
        why.contains("in one write") && why.contains("1200"),
        "{why}"
    );
}

#[test]
fn a_write_passing_a_threshold_on_any_asset_is_held_for_it() {
    let effects = Effects {
        outflows: vec![out(Asset::Native, 5), out(token(1), 700)],
        ..Effects::default()
    };
    let mut held = standing(token(1), 1_000, 10_000, 0);
    held.limit.approval_above = Some(U256::from(500));
    let verdict = verdict(
        Uuid::nil(),
        CHAIN,
        &effects,
        &[standing(Asset::Native, 10, 10, 0), held],
    );
    let (spend, threshold) = verdict.holds.first().cloned().expect("held");
    assert_eq!(
        (spend.asset, spend.amount, threshold),
        (token(1).name(), U256::from(700), U256::from(500))
    );
}

#[test]
fn effects_that_move_nothing_pass_and_say_so() {
    let effects = Effects {
        inflows: vec![out(token(3), 10)],
        ..Effects::default()
    };
    let verdict = verdict(Uuid::nil(), CHAIN, &effects, &[standing(token(1), 1, 1, 0)]);
    assert!(verdict.spends.is_empty() && verdict.holds.is_empty());
    assert_eq!(describe(&effects), "moves nothing out of the wallet");
    let sent = Effects {
        outflows: vec![out(token(1), 7)],
        ..Effects::default()
    };
    assert!(
        describe(&sent).starts_with("sends 7 of 0x0101"),
        "{}",
        describe(&sent)
    );
}

#[test]
fn every_rule_broken_is_named_and_unknown_effects_are_unavailable() {
    let effects = Effects {
        outflows: vec![out(token(2), 1), out(token(1), 2_000)],
        ..Effects::default()
    };
    let verdict = verdict(
        Uuid::nil(),
        CHAIN,
        &effects,
        &[standing(token(1), 1_000, 1_500, 0)],
    );
    assert_eq!(verdict.reasons().count(), 3, "{:?}", verdict.refusals);
    let why = forbidden(verdict);
    assert!(
        why.contains("which has none") && why.contains("in one write") && why.contains("24-hour"),
        "{why}"
    );
    let unknown = super::Verdict {
        refusals: vec![super::Refusal::Unreadable("anvil lacks both".to_owned())],
        ..super::Verdict::default()
    };
    assert!(matches!(
        unknown.refusal(),
        Some(WalletOpsError::ServiceUnavailable(why)) if why == "anvil lacks both"
    ));
}
