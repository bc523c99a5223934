//! The guard's checks and its call as the service encodes them, and where the guard lives.

use alloy::{
    primitives::{Address, U256, address},
    sol_types::{SolCall, SolValue},
};
use walletops_domain::{Asset, Effects, Flow, Grant, GrantKind, WalletAddress};

use super::*;

const TOKEN: Address = address!("00000000000000000000000000000000000000aa");
const OTHER: Address = address!("00000000000000000000000000000000000000bb");
const SPENDER: Address = address!("00000000000000000000000000000000000000cc");
const TARGET: Address = address!("00000000000000000000000000000000000000dd");

fn flow(asset: Asset, amount: u64) -> Flow {
    Flow {
        asset,
        counterparty: WalletAddress::Evm(OTHER),
        amount: U256::from(amount),
        token_id: None,
    }
}

fn check(token: Address, spender: Address, max: u64) -> Check {
    Check {
        token,
        spender,
        max: U256::from(max),
    }
}

#[test]
fn the_checks_bound_each_watched_balance_by_its_reservation_and_each_allowance_by_its_grant() {
    let token = Asset::Token(WalletAddress::Evm(TOKEN));
    let effects = Effects {
        outflows: vec![flow(token, 5), flow(Asset::Native, 7), flow(token, 2)],
        inflows: vec![],
        grants: vec![Grant {
            kind: GrantKind::Allowance,
            asset: token,
            spender: WalletAddress::Evm(SPENDER),
            amount: Some(U256::from(3)),
        }],
    };
    assert_eq!(
        checks(&effects, &[TOKEN], TARGET),
        vec![
            check(Address::ZERO, Address::ZERO, 7),
            check(TOKEN, Address::ZERO, 10),
            check(TOKEN, SPENDER, 3),
            check(TOKEN, TARGET, 0),
        ]
    );
}

#[test]
fn a_write_that_moves_nothing_may_move_nothing_and_the_token_called_is_no_spender() {
    assert_eq!(
        checks(&Effects::default(), &[TOKEN], TOKEN),
        vec![
            check(Address::ZERO, Address::ZERO, 0),
            check(TOKEN, Address::ZERO, 0),
        ]
    );
}

#[test]
fn the_wrapped_call_decodes_as_the_guard_reads_it() {
    let input = alloy::primitives::Bytes::from(vec![1, 2, 3]);
    let wanted = vec![check(TOKEN, Address::ZERO, 9)];
    let encoded = execute(TARGET, U256::from(4), &input, wanted.clone());
    let call = WalletGuard::executeCall::abi_decode(&encoded).expect("an execute call");
    assert_eq!(call.mode, BATCH_OP_DATA);
    let (calls, op_data) =
        <(Vec<Call>, alloy::primitives::Bytes)>::abi_decode_params(&call.executionData)
            .expect("calls and op data");
    assert_eq!(
        calls,
        vec![Call {
            target: TARGET,
            value: U256::from(4),
            data: input,
        }]
    );
    assert_eq!(<Vec<Check>>::abi_decode(&op_data).expect("checks"), wanted);
}

#[test]
fn the_guard_lives_where_the_proxy_deploys_its_code_and_a_delegation_names_it() {
    assert_eq!(
        guard_address(),
        DEPLOYER.create2(
            SALT,
            alloy::primitives::keccak256(WalletGuard::BYTECODE.as_ref())
        )
    );
    assert!(deployment_input().starts_with(SALT.as_slice()));
    let code = delegation_code(guard_address());
    assert_eq!(&code[..3], &[0xef, 0x01, 0x00]);
    assert_eq!(&code[3..], guard_address().as_slice());
}
