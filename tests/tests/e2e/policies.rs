//! Key policies judged on effects: allowed recipients and spenders are read from what a
//! write's simulation says it does, not from the request's `to`; allowed contracts (with
//! their functions) and chains are allow-lists. The owner sets them with the CLI (here) or a
//! dashboard session (`dashboard::limits`). Every refusal is 403 FORBIDDEN naming the rule
//! and the address, with nothing signed (the wallet's nonce does not move).

use alloy::{
    primitives::{Address, U256},
    sol,
    sol_types::SolCall,
};
use serde_json::{Value, json};
use walletops_tests::{
    Backend, Rest, Service,
    anvil::{Anvil, KeyedWallet, call_body},
    on_both_backends,
};

const FRIEND: &str = "0xaAaAaAaaAaAaAaaAaAAAAAAAAaaaAaAaAaaAaaAa";
const STRANGER: &str = "0x5555555555555555555555555555555555555555";

sol! {
    function transfer(address to, uint256 amount) returns (bool);
    function approve(address spender, uint256 amount) returns (bool);
    function forward(address to);
}

fn address(text: &str) -> Address {
    text.parse().expect("an address")
}

/// A service on a new anvil whose default wallet holds a token, a relay contract, and a
/// second key without limits.
struct Setup {
    anvil: Anvil,
    svc: Service,
    wallet: Address,
    key: String,
    prefix: String,
    token: Address,
    relay: Address,
}

async fn setup(b: Backend) -> anyhow::Result<Setup> {
    let keyed = KeyedWallet::start(b).await?;
    let token = keyed.token().await?;
    let relay = keyed.anvil.deploy_relay().await?;
    let KeyedWallet {
        anvil,
        svc,
        wallet,
        key,
        prefix,
    } = keyed;
    Ok(Setup {
        anvil,
        svc,
        wallet,
        key,
        prefix,
        token,
        relay,
    })
}

/// Made and mined.
async fn made(api: &Rest, path: &str, body: &Value) -> anyhow::Result<()> {
    let reply = api.post(path, body).await?;
    assert_eq!(reply.status, 200, "{path}: {}", reply.text);
    api.wait_for_status(reply.body["id"].as_str().unwrap_or_default(), "CONFIRMED")
        .await?;
    Ok(())
}

/// A key allowed one recipient and one spender pays and approves only them, whatever the
/// request names: a `transfer` through `/contracts/send` (whose `to` is the token) and a
/// coin forwarded by a contract's internal call are judged by whom they pay.
async fn recipients_and_spenders_are_read_from_effects(b: Backend) -> anyhow::Result<()> {
    let Setup {
        anvil,
        svc,
        wallet,
        key,
        prefix,
        token,
        relay,
    } = setup(b).await?;
    svc.allow_key(&prefix, &["--chain", "anvil", "--recipient", FRIEND])
        .await?;
    let shown = svc
        .allow_key(&prefix, &["--chain", "anvil", "--spender", FRIEND])
        .await?;
    assert!(
        shown.contains("recipient on anvil") && shown.contains("spender on anvil"),
        "{shown}"
    );
    let api = svc.rest(&key);
    let send = |to: &str| json!({"chain": "anvil", "to": to, "asset": "native", "amount": "7"});
    made(&api, "/send", &send(FRIEND)).await?;
    anvil
        .assert_forbidden(
            wallet,
            &api,
            ("/send", &send(STRANGER)),
            &["allowed recipients", STRANGER],
        )
        .await?;
    let pay = |to: &str| {
        transferCall {
            to: address(to),
            amount: U256::from(5),
        }
        .abi_encode()
    };
    anvil
        .assert_forbidden(
            wallet,
            &api,
            ("/contracts/send", &call_body(token, pay(STRANGER), 0)),
            &["allowed recipients", STRANGER],
        )
        .await?;
    made(&api, "/contracts/send", &call_body(token, pay(FRIEND), 0)).await?;
    // The coin goes to the relay, whatever it does with it next.
    let forwarded = forwardCall {
        to: address(FRIEND),
    }
    .abi_encode();
    anvil
        .assert_forbidden(
            wallet,
            &api,
            ("/contracts/send", &call_body(relay, forwarded, 5)),
            &["allowed recipients", &relay.to_string()],
        )
        .await?;
    assert_eq!(anvil.balance(address(STRANGER)).await?, U256::ZERO);
    assert_eq!(anvil.balance(address(FRIEND)).await?, U256::from(7));
    assert_eq!(
        anvil.token_balance(token, address(FRIEND)).await?,
        U256::from(5)
    );

    let approve = |spender: &str, amount: U256| {
        call_body(
            token,
            approveCall {
                spender: address(spender),
                amount,
            }
            .abi_encode(),
            0,
        )
    };
    anvil
        .assert_forbidden(
            wallet,
            &api,
            ("/contracts/send", &approve(STRANGER, U256::from(1))),
            &["allowed spenders", STRANGER],
        )
        .await?;
    anvil
        .assert_forbidden(
            wallet,
            &api,
            (
                "/token/approve",
                &json!({"chain": "anvil", "token": token.to_string(), "spender": STRANGER,
                    "amount": "1"}),
            ),
            &["allowed spenders", STRANGER],
        )
        .await?;
    // A spender rule allows the spender, not an unlimited hold: a limited key grants even
    // an allowed spender only a bounded allowance, counted as moved.
    svc.limit_key(
        &prefix,
        &[
            "--chain",
            "anvil",
            "--asset",
            &token.to_string(),
            "--max-per-tx",
            "1000",
        ],
    )
    .await?;
    anvil
        .assert_forbidden(
            wallet,
            &api,
            ("/contracts/send", &approve(FRIEND, U256::MAX)),
            &["unlimited", FRIEND],
        )
        .await?;
    made(&api, "/contracts/send", &approve(FRIEND, U256::from(1000))).await?;
    assert_eq!(
        anvil.allowance(token, wallet, address(FRIEND)).await?,
        U256::from(1000)
    );
    Ok(())
}

/// Contracts (optionally only some functions) and chains are allow-lists too; the owner's
/// key, without a policy, is not held to another key's.
async fn contracts_and_chains_are_allow_lists(b: Backend) -> anyhow::Result<()> {
    let Setup {
        anvil,
        svc,
        wallet,
        key,
        prefix,
        token,
        relay,
    } = setup(b).await?;
    let token_text = token.to_string();
    let shown = svc
        .allow_key(
            &prefix,
            &[
                "--chain",
                "anvil",
                "--contract",
                &token_text,
                "--function",
                "transfer(address,uint256)",
            ],
        )
        .await?;
    assert!(shown.contains("0xa9059cbb"), "{shown}");
    let api = svc.rest(&key);
    let pay = transferCall {
        to: address(FRIEND),
        amount: U256::from(5),
    }
    .abi_encode();
    made(&api, "/contracts/send", &call_body(token, pay, 0)).await?;
    let grant = approveCall {
        spender: address(FRIEND),
        amount: U256::from(5),
    }
    .abi_encode();
    anvil
        .assert_forbidden(
            wallet,
            &api,
            ("/contracts/send", &call_body(token, grant.clone(), 0)),
            &["allowed contracts", "0xa9059cbb", "0x095ea7b3"],
        )
        .await?;
    let forwarded = forwardCall {
        to: address(FRIEND),
    }
    .abi_encode();
    anvil
        .assert_forbidden(
            wallet,
            &api,
            ("/contracts/send", &call_body(relay, forwarded, 1)),
            &["allowed contracts", &relay.to_string()],
        )
        .await?;
    // The owner's key has no policy: the same call is made.
    made(
        &svc.rest(&svc.api_key),
        "/contracts/send",
        &call_body(token, grant, 0),
    )
    .await?;

    svc.allow_key(&prefix, &["--chain", "base"]).await?;
    let send = json!({"chain": "anvil", "to": FRIEND, "asset": "native", "amount": "1"});
    anvil
        .assert_forbidden(
            wallet,
            &api,
            ("/send", &send),
            &["allowed chains", "base", "anvil"],
        )
        .await?;
    svc.allow_key(&prefix, &["--chain", "anvil"]).await?;
    made(&api, "/send", &send).await?;
    // A bad rule is named and changes nothing.
    let out = svc
        .cli(&[
            "keys",
            "allow",
            &prefix,
            "--chain",
            "anvil",
            "--recipient",
            "0x1234",
        ])
        .await?;
    assert!(
        !out.success && out.stderr.contains("address"),
        "{}",
        out.stderr
    );
    let out = svc
        .cli(&["keys", "allow", &prefix, "--chain", "anvil", "--remove"])
        .await?;
    assert!(out.success, "{}", out.stderr);
    anvil
        .assert_forbidden(wallet, &api, ("/send", &send), &["allowed chains"])
        .await?;
    Ok(())
}

on_both_backends!(
    recipients_and_spenders_are_read_from_effects,
    contracts_and_chains_are_allow_lists,
);
