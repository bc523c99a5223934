//! An EVM call's logs read into effects on its wallet: what leaves, what comes in, what is
//! granted, and what is somebody else's business.

use alloy::primitives::{Address, U256, address};
use alloy::sol_types::SolEvent;
use walletops_domain::{Asset, GrantKind, WalletAddress};

use super::*;

const WALLET: Address = address!("1000000000000000000000000000000000000001");
const STRANGER: Address = address!("2000000000000000000000000000000000000002");
const TOKEN: Address = address!("3000000000000000000000000000000000000003");
const OTHER: Address = address!("4000000000000000000000000000000000000004");

fn log(address: Address, event: &impl SolEvent) -> Log {
    let data = event.encode_log_data();
    Log {
        address,
        topics: data.topics().to_vec(),
        data: data.data.clone(),
    }
}

fn token() -> Asset {
    Asset::Token(WalletAddress::Evm(TOKEN))
}

fn erc20(from: Address, to: Address, value: u64) -> Log {
    let value = U256::from(value);
    log(TOKEN, &Erc20::Transfer { from, to, value })
}

#[test]
fn token_and_native_moves_are_read_from_the_wallets_side() {
    let logs = [
        erc20(WALLET, STRANGER, 5_000),
        erc20(STRANGER, WALLET, 7),
        // An internal call of a contract passing the wallet's value on: only the first hop
        // is the wallet's.
        log(
            NATIVE_TRANSFERS,
            &Erc20::Transfer {
                from: WALLET,
                to: OTHER,
                value: U256::from(100),
            },
        ),
        log(
            NATIVE_TRANSFERS,
            &Erc20::Transfer {
                from: OTHER,
                to: STRANGER,
                value: U256::from(100),
            },
        ),
    ];
    let effects = effects_of(WALLET, &logs);
    assert_eq!(effects.outflow_of(token()), U256::from(5_000));
    assert_eq!(effects.inflow_of(token()), U256::from(7));
    assert_eq!(effects.outflow_of(Asset::Native), U256::from(100));
    assert_eq!(
        effects.outflows[0].counterparty,
        WalletAddress::Evm(STRANGER)
    );
    assert_eq!(effects.assets_at_stake(), [token(), Asset::Native]);
}

#[test]
fn moves_between_others_and_to_itself_are_not_the_wallets() {
    let logs = [
        erc20(STRANGER, OTHER, 9),
        erc20(WALLET, WALLET, 9),
        erc20(WALLET, STRANGER, 0),
    ];
    assert_eq!(effects_of(WALLET, &logs), Effects::default());
}

#[test]
fn an_allowance_of_the_maximum_is_unlimited_and_a_smaller_one_is_not() {
    let approve = |value: U256| {
        log(
            TOKEN,
            &Erc20::Approval {
                owner: WALLET,
                spender: STRANGER,
                value,
            },
        )
    };
    let effects = effects_of(WALLET, &[approve(U256::MAX), approve(U256::from(5))]);
    assert_eq!(effects.grants.len(), 2);
    assert_eq!(effects.grants[0].kind, GrantKind::Allowance);
    assert_eq!(effects.grants[0].amount, None);
    assert_eq!(effects.grants[1].amount, Some(U256::from(5)));
    assert_eq!(effects.grants[1].spender, WalletAddress::Evm(STRANGER));
    // Setting an allowance to zero takes a hold away, and another owner's is not ours.
    let revoked = effects_of(WALLET, &[approve(U256::ZERO)]);
    assert!(revoked.grants.is_empty());
    assert!(effects_of(OTHER, &[approve(U256::MAX)]).grants.is_empty());
}

#[test]
fn non_fungible_transfers_and_operators_are_read() {
    let id = U256::from(42);
    let logs = [
        log(
            TOKEN,
            &Erc721::Transfer {
                from: WALLET,
                to: STRANGER,
                tokenId: id,
            },
        ),
        log(
            TOKEN,
            &Erc721::ApprovalForAll {
                owner: WALLET,
                operator: STRANGER,
                approved: true,
            },
        ),
        log(
            TOKEN,
            &Erc721::ApprovalForAll {
                owner: WALLET,
                operator: OTHER,
                approved: false,
            },
        ),
        log(
            TOKEN,
            &Erc1155::TransferBatch {
                operator: STRANGER,
                from: WALLET,
                to: OTHER,
                ids: vec![U256::from(1), U256::from(2)],
                values: vec![U256::from(10), U256::from(20)],
            },
        ),
    ];
    let effects = effects_of(WALLET, &logs);
    assert_eq!(effects.outflows.len(), 3);
    assert_eq!(effects.outflows[0].token_id, Some(id));
    assert_eq!(effects.outflows[0].amount, U256::from(1));
    assert_eq!(effects.outflows[2].token_id, Some(U256::from(2)));
    assert_eq!(effects.outflow_of(token()), U256::from(31));
    assert_eq!(effects.grants.len(), 1, "a revoked operator grants nothing");
    assert_eq!(effects.grants[0].kind, GrantKind::All);
    assert_eq!(effects.grants[0].amount, None);
}

#[test]
fn permit2_allowances_are_read_only_from_permit2() {
    let max = (U256::from(1) << 160) - U256::from(1);
    let approval = |amount: U256| Permit2::Approval {
        owner: WALLET,
        token: TOKEN,
        spender: STRANGER,
        amount: amount.to(),
        expiration: alloy::primitives::aliases::U48::from(1),
    };
    let effects = effects_of(
        WALLET,
        &[
            log(PERMIT2, &approval(max)),
            log(PERMIT2, &approval(U256::from(3))),
        ],
    );
    assert_eq!(effects.grants.len(), 2);
    assert_eq!(effects.grants[0].asset, token());
    assert_eq!(effects.grants[0].amount, None);
    assert_eq!(effects.grants[1].amount, Some(U256::from(3)));
    // The same event from any other contract is no allowance of Permit2's.
    assert!(
        effects_of(WALLET, &[log(OTHER, &approval(max))])
            .grants
            .is_empty()
    );
}

#[test]
fn every_approval_is_read_and_the_state_decides_what_it_granted() {
    let approval = |value: u64| {
        log(
            TOKEN,
            &Erc20::Approval {
                owner: WALLET,
                spender: STRANGER,
                value: U256::from(value),
            },
        )
    };
    // No guess drops an `Approval` beside a `Transfer` out of the wallet (ERC-1363's
    // `approveAndCall` emits both): the log alone is a grant.
    let logs = [approval(9_000), erc20(WALLET, OTHER, 1)];
    let mut effects = effects_of(WALLET, &logs);
    assert_eq!(effects.grants.len(), 1, "{effects:?}");
    // The allowance read around the write decides: one that fell (a `transferFrom` that
    // spent it) grants nothing; one that rose grants what it is after the write.
    let allowance = |before: u64, after: U256| StateReads {
        allowances: vec![(
            TOKEN,
            STRANGER,
            Change {
                before: U256::from(before),
                after,
            },
        )],
        ..StateReads::default()
    };
    reconcile(&mut effects, OTHER, &allowance(10_000, U256::from(9_000)));
    assert!(effects.grants.is_empty(), "{effects:?}");
    let mut effects = effects_of(WALLET, &logs);
    reconcile(
        &mut effects,
        OTHER,
        &allowance(0, U256::MAX - U256::from(1)),
    );
    assert_eq!(effects.grants.len(), 1);
    assert_eq!(effects.grants[0].amount, None, "MAX less the unit pulled");
    assert_eq!(effects.outflow_of(token()), U256::from(1));
}

#[test]
fn a_balance_that_falls_past_the_events_is_an_outflow_to_the_called_contract() {
    let mut effects = effects_of(WALLET, &[erc20(WALLET, STRANGER, 1)]);
    let reads = StateReads {
        native: Some(Change {
            before: U256::from(1_000_000),
            after: U256::from(1_000_000 - 21_000 - 500),
        }),
        fee: U256::from(21_000),
        tokens: vec![(
            TOKEN,
            Change {
                before: U256::from(10_000),
                after: U256::ZERO,
            },
        )],
        allowances: Vec::new(),
    };
    reconcile(&mut effects, OTHER, &reads);
    assert_eq!(effects.outflow_of(token()), U256::from(10_000));
    assert_eq!(effects.outflow_of(Asset::Native), U256::from(500));
    assert!(
        effects.outflows[1..]
            .iter()
            .all(|f| f.counterparty == WalletAddress::Evm(OTHER)),
        "{effects:?}"
    );
    // A fall the events already show adds nothing; the fee alone is no outflow.
    let mut honest = effects_of(WALLET, &[erc20(WALLET, STRANGER, 10_000)]);
    let fee_only = StateReads {
        native: Some(Change {
            before: U256::from(1_000_000),
            after: U256::from(1_000_000 - 21_000),
        }),
        fee: U256::from(21_000),
        ..reads
    };
    reconcile(&mut honest, OTHER, &fee_only);
    assert_eq!(honest.outflows.len(), 1, "{honest:?}");
}

#[test]
fn unindexed_transfers_operators_and_credit_delegations_are_read() {
    let unindexed = log(
        TOKEN,
        &Erc20Unindexed::Transfer {
            from: WALLET,
            to: STRANGER,
            value: U256::from(42),
        },
    );
    let operator = log(
        TOKEN,
        &Holds::AuthorizedOperator {
            operator: STRANGER,
            tokenHolder: WALLET,
        },
    );
    let credit = log(
        OTHER,
        &Holds::BorrowAllowanceDelegated {
            fromUser: WALLET,
            toUser: STRANGER,
            asset: TOKEN,
            amount: U256::from(7),
        },
    );
    let effects = effects_of(WALLET, &[unindexed, operator, credit]);
    assert_eq!(effects.outflow_of(token()), U256::from(42));
    assert_eq!(effects.grants.len(), 2, "{effects:?}");
    assert_eq!(effects.grants[0].kind, GrantKind::All);
    assert_eq!(effects.grants[0].amount, None);
    assert_eq!(effects.grants[1].kind, GrantKind::Delegation);
    assert_eq!(effects.grants[1].asset, token());
    assert_eq!(effects.grants[1].amount, Some(U256::from(7)));
}

#[test]
fn a_declared_send_or_allowance_is_a_floor_of_the_effects() {
    // A token that shows its simulation 1 unit of a 5,000 send counts 5,000.
    let mut effects = effects_of(WALLET, &[erc20(WALLET, STRANGER, 1)]);
    let send = Declared::Send {
        asset: token(),
        to: STRANGER,
        amount: U256::from(5_000),
    };
    at_least(&mut effects, send);
    assert_eq!(effects.outflow_of(token()), U256::from(5_000));
    // More than declared stays what it is.
    let mut more = effects_of(WALLET, &[erc20(WALLET, STRANGER, 9_000)]);
    at_least(&mut more, send);
    assert_eq!(more.outflow_of(token()), U256::from(9_000));
    // An approval that shows no grant still grants what it sets.
    let mut silent = Effects::default();
    at_least(
        &mut silent,
        Declared::Allowance {
            token: TOKEN,
            spender: STRANGER,
            amount: U256::from(700),
        },
    );
    assert_eq!(silent.grants.len(), 1);
    assert_eq!(silent.grants[0].amount, Some(U256::from(700)));
}
