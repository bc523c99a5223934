//! A simulation's balances before and after held against its instructions' effects.

use alloy::primitives::U256;
use serde_json::json;
use walletops_domain::{Effects, Flow, WalletAddress};

use super::*;

const WALLET: Pubkey = Pubkey::new_from_array([7; 32]);
const OTHER: Pubkey = Pubkey::new_from_array([8; 32]);
const MINT: Pubkey = Pubkey::new_from_array([9; 32]);
const PROGRAM: Pubkey = Pubkey::new_from_array([10; 32]);

fn token_balance(index: u8, owner: &Pubkey, amount: u64) -> serde_json::Value {
    json!({"accountIndex": index, "mint": MINT.to_string(), "owner": owner.to_string(),
        "programId": spl_token_interface::ID.to_string(),
        "uiTokenAmount": {"amount": amount.to_string(), "decimals": 0,
            "uiAmount": amount as f64, "uiAmountString": amount.to_string()}})
}

/// A simulation in which the wallet (the fee payer, paying 5,000) went from 1,000,000 to
/// 989,000 lamports, its token account (index 1) from 100 to 40 and another owner's (index 2)
/// from 0 to 60.
fn simulated() -> RpcSimulateTransactionResult {
    serde_json::from_value(json!({
        "err": null, "logs": [], "accounts": null, "unitsConsumed": 1000,
        "returnData": null, "innerInstructions": [], "fee": 5000,
        "preBalances": [1_000_000, 2_039_280, 2_039_280],
        "postBalances": [989_000, 2_039_280, 2_039_280],
        "preTokenBalances": [token_balance(1, &WALLET, 100), token_balance(2, &OTHER, 0)],
        "postTokenBalances": [token_balance(1, &WALLET, 40), token_balance(2, &OTHER, 60)],
    }))
    .expect("a simulation result")
}

#[test]
fn the_wallets_falls_leave_the_fee_and_other_owners_out() {
    let keys = [WALLET, Pubkey::new_unique(), Pubkey::new_unique()];
    assert_eq!(
        falls(&WALLET, &keys, &simulated()),
        vec![(Asset::Native, 6_000), (asset(MINT), 60)]
    );
}

#[test]
fn without_the_nodes_balances_or_fee_nothing_is_read_from_them() {
    let keys = [WALLET, Pubkey::new_unique(), Pubkey::new_unique()];
    let mut result = simulated();
    result.fee = None;
    result.pre_token_balances = None;
    assert_eq!(falls(&WALLET, &keys, &result), vec![]);
}

#[test]
fn a_fall_beyond_what_the_instructions_move_is_an_outflow_to_the_called_program() {
    let token = asset(MINT);
    let seen = |asset, amount: u64| Flow {
        asset,
        counterparty: WalletAddress::Solana(OTHER),
        amount: U256::from(amount),
        token_id: None,
    };
    let mut effects = Effects {
        outflows: vec![seen(token, 60), seen(Asset::Native, 1_000)],
        ..Effects::default()
    };
    reconcile(
        &mut effects,
        PROGRAM,
        &[(Asset::Native, 6_000), (token, 60)],
    );
    assert_eq!(
        effects.outflows,
        vec![
            seen(token, 60),
            seen(Asset::Native, 1_000),
            Flow {
                asset: Asset::Native,
                counterparty: WalletAddress::Solana(PROGRAM),
                amount: U256::from(5_000),
                token_id: None,
            },
        ]
    );
}

#[test]
fn rent_moved_into_the_wallets_own_new_account_is_no_fall() {
    let keys = [
        WALLET,
        Pubkey::new_unique(),
        Pubkey::new_unique(),
        Pubkey::new_unique(),
    ];
    let mut result = simulated();
    result.pre_balances = Some(vec![1_000_000 + 2_039_280, 2_039_280, 2_039_280, 0]);
    result.post_balances = Some(vec![989_000, 2_039_280, 2_039_280, 2_039_280]);
    if let Some(post) = result.post_token_balances.as_mut() {
        post.push(serde_json::from_value(token_balance(3, &WALLET, 0)).expect("a token balance"));
    }
    assert_eq!(
        falls(&WALLET, &keys, &result),
        vec![(Asset::Native, 6_000), (asset(MINT), 60)]
    );
}
