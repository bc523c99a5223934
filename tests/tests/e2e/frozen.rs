//! Execution checked against the simulation: a limited key's write that moves more on chain
//! than its simulation reserved (here, a contract a stranger arms in the same block, ahead
//! of the write) freezes the key's whole line at once, the excess charged to its budget,
//! `key.frozen` told, the dashboard showing it, until the owner unfreezes it.

use alloy::{
    primitives::{Address, U256},
    sol,
    sol_types::SolCall,
};
use serde_json::json;
use walletops_tests::{
    Backend,
    anvil::{DEV_ACCOUNT, KeyedWallet, call_body},
    on_both_backends,
    webhooks::Receiver,
};

sol! {
    function collectArmed(address token);
    function arm(bool on);
    function transfer(address to, uint256 amount) returns (bool);
}

const STRANGER: &str = "0x5555555555555555555555555555555555555555";

async fn a_write_that_moves_more_than_reserved_freezes_its_line(b: Backend) -> anyhow::Result<()> {
    let keyed = KeyedWallet::start(b).await?;
    let (anvil, wallet) = (&keyed.anvil, keyed.wallet);
    let receiver = Receiver::start().await?;
    receiver
        .register(&keyed.svc.rest(&keyed.svc.api_key), &["key.frozen"])
        .await?;
    let (token, skimmer) = armed_skimmer(&keyed).await?;
    let asset = token.to_string();

    // Simulated unarmed (1 unit), overtaken in its block by a stranger arming the contract.
    let api = keyed.svc.rest(&keyed.key);
    let id = overtaken(&keyed, skimmer, token).await?;
    api.wait_for_status(&id, "CONFIRMED").await?;
    assert_eq!(
        anvil.token_balance(token, skimmer).await?,
        U256::from(10_000)
    );

    // The line is frozen: the key's writes are refused, whatever they move.
    let told = receiver
        .wait_until("the key.frozen webhook", |r| {
            r.iter()
                .any(|d| d.taken() && d.event_type() == "key.frozen")
        })
        .await?;
    let frozen = told
        .iter()
        .find(|d| d.event_type() == "key.frozen")
        .expect("waited for");
    assert!(
        frozen.body["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("10000"),
        "{}",
        frozen.body
    );
    assert_eq!(frozen.body["transactionId"], id.as_str(), "{}", frozen.body);
    anvil.mint(token, wallet, U256::from(500)).await?;
    let pay = |amount: u64| {
        call_body(
            token,
            transferCall {
                to: STRANGER.parse::<Address>().expect("an address"),
                amount: U256::from(amount),
            }
            .abi_encode(),
            0,
        )
    };
    anvil
        .assert_forbidden(
            wallet,
            &api,
            ("/contracts/send", &pay(5)),
            &["frozen", "10000"],
        )
        .await?;

    // The owner unfreezes it; the excess stays charged to the budget.
    let out = keyed.svc.cli(&["keys", "unfreeze", &keyed.prefix]).await?;
    assert!(
        out.success && out.stdout.contains("Unfroze"),
        "{}",
        out.stderr
    );
    let again = keyed.svc.cli(&["keys", "unfreeze", &keyed.prefix]).await?;
    assert!(
        !again.success && again.stderr.contains("not frozen"),
        "{}",
        again.stderr
    );
    let limits = keyed.svc.cli(&["keys", "limits", &keyed.prefix]).await?;
    assert!(limits.stdout.contains("spent 10000,"), "{}", limits.stdout);
    keyed
        .svc
        .allow_key(&keyed.prefix, &["--chain", "anvil", "--contract", &asset])
        .await?;
    let reply = api.post("/contracts/send", &pay(5)).await?;
    assert_eq!(reply.status, 200, "{}", reply.text);
    Ok(())
}

on_both_backends!(a_write_that_moves_more_than_reserved_freezes_its_line);

/// `keyed`'s key limited to 1,000 a write of a token its wallet holds 10,000 of, the wallet's
/// owner having approved the Skimmer contract for all of it, the key allowed to call
/// `collectArmed`: the token and the Skimmer.
pub(crate) async fn armed_skimmer(keyed: &KeyedWallet) -> anyhow::Result<(Address, Address)> {
    let token = keyed.token().await?;
    let asset = token.to_string();
    keyed
        .svc
        .limit_key(
            &keyed.prefix,
            &[
                "--chain",
                "anvil",
                "--asset",
                &asset,
                "--max-per-tx",
                "1000",
                "--daily",
                "50000",
            ],
        )
        .await?;
    let skimmer = keyed.anvil.deploy("Skimmer").await?;
    let owner = keyed.svc.rest(&keyed.svc.api_key);
    let reply = owner
        .post(
            "/token/approve",
            &json!({"chain": "anvil", "token": asset,
                "spender": skimmer.to_string(), "amount": U256::MAX.to_string()}),
        )
        .await?;
    anyhow::ensure!(reply.status == 200, "{}", reply.text);
    owner
        .wait_for_status(reply.body["id"].as_str().unwrap_or_default(), "CONFIRMED")
        .await?;
    keyed
        .svc
        .allow_key(
            &keyed.prefix,
            &[
                "--chain",
                "anvil",
                "--contract",
                &skimmer.to_string(),
                "--function",
                "collectArmed(address)",
            ],
        )
        .await?;
    Ok((token, skimmer))
}

/// The key's `collectArmed` call, simulated while the Skimmer takes 1 unit, then overtaken
/// in its block by a stranger arming it: the record's id, its block mined.
pub(crate) async fn overtaken(
    keyed: &KeyedWallet,
    skimmer: Address,
    token: Address,
) -> anyhow::Result<String> {
    let anvil = &keyed.anvil;
    anvil.set_automine(false).await?;
    let reply = keyed
        .svc
        .rest(&keyed.key)
        .post(
            "/contracts/send",
            &call_body(skimmer, collectArmedCall { token }.abi_encode(), 0),
        )
        .await?;
    anyhow::ensure!(reply.status == 200, "{}", reply.text);
    let gwei = |n: u64| format!("{:#x}", U256::from(n) * U256::from(1_000_000_000u64));
    anvil
        .rpc(
            "eth_sendTransaction",
            json!([{"from": DEV_ACCOUNT, "to": skimmer,
                "input": alloy::primitives::Bytes::from(armCall { on: true }.abi_encode()),
                "gas": "0x30000", "maxFeePerGas": gwei(1_000), "maxPriorityFeePerGas": gwei(500)}]),
        )
        .await?;
    anvil.mine().await?;
    anvil.set_automine(true).await?;
    Ok(reply.body["id"].as_str().unwrap_or_default().to_owned())
}
