//! The 1inch v6 call-data checks, against calls built as the router's ABI encodes them.

use alloy::{
    primitives::{Address, U256, address},
    sol_types::SolCall as _,
};

use super::{AggregationRouterV6 as R, RouterTerms, check_call};
use walletops_chains::trade::NATIVE_TOKEN;

const WALLET: Address = address!("0x00000000000000000000000000000000000000a1");
const TOKEN: Address = address!("0x00000000000000000000000000000000000000b2");
const EXECUTOR: Address = address!("0x00000000000000000000000000000000000000e3");
const STRANGER: Address = address!("0x00000000000000000000000000000000000000f4");

fn terms(executors: &[Address]) -> RouterTerms<'_> {
    RouterTerms {
        wallet: WALLET,
        src: TOKEN,
        dst: NATIVE_TOKEN,
        amount: U256::from(1_000),
        bound: U256::from(900),
        executors,
    }
}

fn desc() -> R::SwapDescription {
    R::SwapDescription {
        srcToken: TOKEN,
        dstToken: NATIVE_TOKEN,
        srcReceiver: EXECUTOR,
        dstReceiver: WALLET,
        amount: U256::from(1_000),
        minReturnAmount: U256::from(900),
        flags: U256::ZERO,
    }
}

fn swap(desc: R::SwapDescription) -> Vec<u8> {
    R::swapCall {
        executor: EXECUTOR,
        desc,
        data: Default::default(),
    }
    .abi_encode()
}

fn word(a: Address) -> U256 {
    U256::from_be_bytes(a.into_word().0)
}

/// The check a refusal names.
fn refused(data: &[u8]) -> &'static str {
    check_call(data, &terms(&[EXECUTOR]))
        .expect_err("refused")
        .check
}

#[test]
fn selectors_are_the_routers() {
    assert_eq!(R::swapCall::SELECTOR, [0x07, 0xed, 0x23, 0x79]);
    assert_eq!(R::unoswapCall::SELECTOR, [0x83, 0x80, 0x0a, 0x8e]);
    assert_eq!(R::unoswapTo3Call::SELECTOR, [0xf7, 0xa7, 0x00, 0x56]);
    assert_eq!(R::ethUnoswapCall::SELECTOR, [0xa7, 0x6d, 0xfc, 0x3b]);
    assert_eq!(R::ethUnoswapTo2Call::SELECTOR, [0x0f, 0x44, 0x9d, 0x71]);
    assert_eq!(R::clipperSwapCall::SELECTOR, [0xd2, 0xd3, 0x74, 0xe5]);
    assert_eq!(R::clipperSwapToCall::SELECTOR, [0xc4, 0xd6, 0x52, 0xaf]);
}

#[test]
fn a_swap_to_the_wallet_through_a_listed_executor_at_the_bound_passes() {
    check_call(&swap(desc()), &terms(&[EXECUTOR])).expect("passes");
    let zero = R::SwapDescription {
        dstReceiver: Address::ZERO,
        ..desc()
    };
    check_call(&swap(zero), &terms(&[EXECUTOR])).expect("zero pays the caller");
}

#[test]
fn a_swap_is_refused_for_its_receiver_executor_minimum_or_terms() {
    let to_stranger = R::SwapDescription {
        dstReceiver: STRANGER,
        ..desc()
    };
    assert_eq!(refused(&swap(to_stranger)), "receiver");
    let input_to_stranger = R::SwapDescription {
        srcReceiver: STRANGER,
        ..desc()
    };
    assert_eq!(refused(&swap(input_to_stranger)), "executor");
    let low = R::SwapDescription {
        minReturnAmount: U256::from(899),
        ..desc()
    };
    assert_eq!(refused(&swap(low)), "minimum");
    let more = R::SwapDescription {
        amount: U256::from(1_001),
        ..desc()
    };
    assert_eq!(refused(&swap(more)), "calldata");
    let other_executor = R::swapCall {
        executor: STRANGER,
        desc: desc(),
        data: Default::default(),
    }
    .abi_encode();
    assert_eq!(refused(&other_executor), "executor");
}

#[test]
fn unoswaps_are_held_to_their_recipient_and_minimum() {
    let good = R::unoswapToCall {
        to: word(WALLET),
        token: word(TOKEN),
        amount: U256::from(1_000),
        minReturn: U256::from(950),
        dex: U256::from(7),
    };
    check_call(&good.abi_encode(), &terms(&[])).expect("passes");
    let elsewhere = R::unoswapToCall {
        to: word(STRANGER),
        ..good.clone()
    };
    assert_eq!(refused(&elsewhere.abi_encode()), "receiver");
    let low = R::unoswapCall {
        token: word(TOKEN),
        amount: U256::from(1_000),
        minReturn: U256::from(1),
        dex: U256::from(7),
    };
    assert_eq!(refused(&low.abi_encode()), "minimum");
    // A coin sale through a token's function: not the swap asked for.
    let coin = R::ethUnoswapCall {
        minReturn: U256::from(950),
        dex: U256::from(7),
    };
    assert_eq!(refused(&coin.abi_encode()), "calldata");
}

#[test]
fn limit_order_fills_and_other_functions_are_refused() {
    let mut fill = vec![0x9f, 0xda, 0x64, 0xbd];
    fill.extend([0u8; 64]);
    let refusal = check_call(&fill, &terms(&[EXECUTOR])).expect_err("refused");
    assert!(refusal.why.contains("fillOrder"), "{}", refusal.why);
    assert_eq!(refused(&[0xde, 0xad, 0xbe, 0xef]), "calldata");
    assert_eq!(refused(&[]), "calldata");
}
