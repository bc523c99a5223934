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
fn the_allowance_left_after_a_transfer_from_is_no_grant() {
    let left = |value: u64| {
        log(
            TOKEN,
            &Erc20::Approval {
                owner: WALLET,
                spender: STRANGER,
                value: U256::from(value),
            },
        )
    };
    // OpenZeppelin v4 emits what is left of the allowance before the transfer, older
    // versions after it: either way, a router spent the wallet's allowance.
    for logs in [
        vec![left(9_000), erc20(WALLET, OTHER, 1_000)],
        vec![erc20(WALLET, OTHER, 1_000), left(9_000)],
    ] {
        let effects = effects_of(WALLET, &logs);
        assert!(effects.grants.is_empty(), "{effects:?}");
        assert_eq!(effects.outflow_of(token()), U256::from(1_000));
    }
    // Apart from a transfer out of the wallet, an approval is a grant.
    let alone = effects_of(WALLET, &[left(9_000), erc20(OTHER, WALLET, 5)]);
    assert_eq!(alone.grants.len(), 1);
}
