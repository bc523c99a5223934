//! The verdict on effects, rule by rule.

use alloy::primitives::{Address, Selector, U256};
use uuid::Uuid;
use walletops_domain::{
    Allowed, Asset, Effects, Flow, Grant, GrantKind, PolicyRule, SpendLimit, SpendStanding,
    WalletAddress,
};

use super::{Act, Refusal, Verdict, describe, rules::Rules, verdict_on_limits};
use crate::error::WalletOpsError;

/// The verdict of limits alone: a key without a policy.
fn verdict(key: Uuid, chain: &str, effects: &Effects, standings: &[SpendStanding]) -> Verdict {
    verdict_on_limits(key, chain, effects, standings)
}

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

fn rule(chain: &str, allowed: Allowed) -> PolicyRule {
    PolicyRule {
        key_id: Uuid::nil(),
        chain: chain.to_owned(),
        allowed,
    }
}

fn broken(rules: &[PolicyRule], act: Act, effects: &Effects) -> Vec<String> {
    Rules::new(rules, CHAIN)
        .broken(&act, Some(effects))
        .into_iter()
        .map(|r| match r {
            Refusal::Forbidden(why) | Refusal::Unreadable(why) => why,
        })
        .collect()
}

fn friend() -> WalletAddress {
    WalletAddress::Evm(Address::repeat_byte(0xaa))
}

#[test]
fn recipients_are_read_from_the_effects_on_every_chain() {
    let pays = |to: WalletAddress| Effects {
        outflows: vec![Flow {
            counterparty: to,
            ..out(token(1), 5)
        }],
        ..Effects::default()
    };
    let rules = [rule(CHAIN, Allowed::Recipient(friend()))];
    assert!(broken(&rules, Act::Transfer, &pays(friend())).is_empty());
    let why = broken(&rules, Act::Transfer, &pays(stranger()));
    assert!(
        why.len() == 1
            && why[0].contains("allowed recipients")
            && why[0].contains(&stranger().to_string()),
        "{why:?}"
    );
    // A recipient allowed on another chain is no permission here.
    let elsewhere = [rule("base", Allowed::Recipient(stranger()))];
    assert_eq!(
        broken(&elsewhere, Act::Transfer, &pays(stranger())).len(),
        1
    );
    // A swap's sold amount is the swap guard's to judge.
    let swap = Act::Swap { bought: None };
    assert!(broken(&rules, swap, &pays(stranger())).is_empty());
}

#[test]
fn a_key_held_to_recipients_swaps_only_into_its_listed_tokens() {
    let nothing = Effects::default();
    let listed = WalletAddress::Evm(Address::repeat_byte(0x11));
    let unlisted = WalletAddress::Evm(Address::repeat_byte(0x22));
    let buys = |t: WalletAddress| Act::Swap { bought: Some(t) };
    let recipients = [rule(CHAIN, Allowed::Recipient(friend()))];
    let why = broken(&recipients, buys(listed), &nothing);
    assert!(
        why.len() == 1 && why[0].contains("allowed tokens") && why[0].contains(&listed.to_string()),
        "{why:?}"
    );
    assert!(broken(&recipients, Act::Swap { bought: None }, &nothing).is_empty());
    let tokens = [
        rule(CHAIN, Allowed::Recipient(friend())),
        rule(CHAIN, Allowed::Token(listed)),
    ];
    assert!(broken(&tokens, buys(listed), &nothing).is_empty());
    assert_eq!(broken(&tokens, buys(unlisted), &nothing).len(), 1);
    // A token listed on another chain is no permission here.
    let elsewhere = [rule("base", Allowed::Token(listed))];
    assert_eq!(broken(&elsewhere, buys(listed), &nothing).len(), 1);
    // A key with no recipient or token rule buys what it likes.
    assert!(broken(&[], buys(unlisted), &nothing).is_empty());
}

#[test]
fn chains_and_contracts_are_allow_lists() {
    let nothing = Effects::default();
    let on_base = [rule("base", Allowed::Chain)];
    let why = broken(&on_base, Act::Transfer, &nothing);
    assert!(
        why[0].contains("allowed chains") && why[0].contains(CHAIN),
        "{why:?}"
    );
    assert!(broken(&[rule(CHAIN, Allowed::Chain)], Act::Transfer, &nothing).is_empty());

    let transfer: Selector = [0xa9, 0x05, 0x9c, 0xbb].into();
    let call = |contract, selector| Act::Call {
        contract,
        selector,
        holds_allowance: false,
        unexplained: None,
    };
    let rules = [rule(CHAIN, Allowed::Contract(friend(), Some(transfer)))];
    assert!(broken(&rules, call(friend(), Some(transfer)), &nothing).is_empty());
    let why = broken(&rules, call(stranger(), Some(transfer)), &nothing);
    assert!(why[0].contains(&stranger().to_string()), "{why:?}");
    let why = broken(&rules, call(friend(), Some([1, 2, 3, 4].into())), &nothing);
    assert!(
        why[0].contains("0x01020304") && why[0].contains("0xa9059cbb"),
        "{why:?}"
    );
    assert_eq!(broken(&rules, call(friend(), None), &nothing).len(), 1);
    let any = [rule(CHAIN, Allowed::Contract(friend(), None))];
    assert!(broken(&any, call(friend(), None), &nothing).is_empty());
    // Contract rules judge contract calls; a send is judged by its effects.
    assert!(broken(&rules, Act::Transfer, &nothing).is_empty());
}

#[test]
fn spenders_are_an_allow_list_and_no_spender_gets_an_unlimited_hold() {
    let grant = |spender| Effects {
        grants: vec![Grant {
            kind: GrantKind::Allowance,
            asset: token(1),
            spender,
            amount: None,
        }],
        ..Effects::default()
    };
    let rules = [rule(CHAIN, Allowed::Spender(friend()))];
    assert!(broken(&rules, Act::Transfer, &grant(friend())).is_empty());
    let why = broken(&rules, Act::Transfer, &grant(stranger()));
    assert!(why[0].contains("allowed spenders"), "{why:?}");
    // The spender rule allows the spender; it does not lift the limit. An unlimited hold on
    // a limited asset, or on one without a limit, is refused even to an allowed spender.
    for limits in [
        [standing(token(1), 1_000, 5_000, 0)],
        [standing(token(2), 1_000, 5_000, 0)],
    ] {
        let refused = verdict(Uuid::nil(), CHAIN, &grant(friend()), &limits);
        assert!(refused.spends.is_empty(), "{refused:?}");
        let why = forbidden(refused);
        assert!(
            why.contains("unlimited") && why.contains(&friend().to_string()),
            "{why}"
        );
    }
}

#[test]
fn without_spender_rules_recipient_rules_judge_grants() {
    let grant = |spender| Effects {
        grants: vec![Grant {
            kind: GrantKind::Allowance,
            asset: token(1),
            spender,
            amount: Some(U256::from(5)),
        }],
        ..Effects::default()
    };
    let rules = [rule(CHAIN, Allowed::Recipient(friend()))];
    assert!(broken(&rules, Act::Transfer, &grant(friend())).is_empty());
    let why = broken(&rules, Act::Transfer, &grant(stranger()));
    assert!(
        why.len() == 1
            && why[0].contains("allowed recipients")
            && why[0].contains(&stranger().to_string()),
        "{why:?}"
    );
    // Spender rules, once there, judge spenders alone.
    let both = [
        rule(CHAIN, Allowed::Recipient(friend())),
        rule(CHAIN, Allowed::Spender(stranger())),
    ];
    assert!(broken(&both, Act::Transfer, &grant(stranger())).is_empty());
    assert!(broken(&both, Act::Transfer, &grant(friend()))[0].contains("allowed spenders"));
}

#[test]
fn a_contract_holding_an_allowance_is_called_only_through_a_named_function() {
    let collect = Selector::from([1, 2, 3, 4]);
    let call = |holds_allowance| Act::Call {
        contract: friend(),
        selector: Some(collect),
        holds_allowance,
        unexplained: None,
    };
    let nothing = Effects::default();
    assert!(broken(&[], call(false), &nothing).is_empty());
    let why = broken(&[], call(true), &nothing);
    assert!(
        why.len() == 1 && why[0].contains("state change not understood"),
        "{why:?}"
    );
    // A rule for the contract without a function does not name what the call may do.
    let any = [rule(CHAIN, Allowed::Contract(friend(), None))];
    assert_eq!(broken(&any, call(true), &nothing).len(), 1);
    let named = [rule(CHAIN, Allowed::Contract(friend(), Some(collect)))];
    assert!(broken(&named, call(true), &nothing).is_empty());
}

#[test]
fn a_call_whose_state_changes_are_not_understood_needs_a_contract_rule() {
    let collect = Selector::from([1, 2, 3, 4]);
    let call = |selector| Act::Call {
        contract: friend(),
        selector: Some(selector),
        holds_allowance: false,
        unexplained: Some("it writes the storage of 0xaa".to_owned()),
    };
    let nothing = Effects::default();
    let why = broken(&[], call(collect), &nothing);
    assert!(
        why.len() == 1
            && why[0].contains("state change not understood")
            && why[0].contains("it writes the storage of 0xaa")
            && why[0].contains(&friend().to_string()),
        "{why:?}"
    );
    // Named by the owner, with any function or this one, the contract is trusted.
    let any = [rule(CHAIN, Allowed::Contract(friend(), None))];
    assert!(broken(&any, call(collect), &nothing).is_empty());
    let named = [rule(CHAIN, Allowed::Contract(friend(), Some(collect)))];
    assert!(broken(&named, call(collect), &nothing).is_empty());
    // Another function of it is refused by the contract rules themselves.
    assert!(!broken(&named, call(Selector::from([9, 9, 9, 9])), &nothing).is_empty());
}
