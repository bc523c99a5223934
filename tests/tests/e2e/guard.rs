//! The wallet guard: `walletops wallets guard enable` delegates the wallet by EIP-7702 to the
//! guard contract (deployed by the same transaction where the chain has none); a limited
//! key's write then runs as the wallet's `execute` with checks, and the execution-time attack
//! that a simulation cannot see (a contract a stranger arms in the same block, ahead of the
//! write) ends reverted on chain with nothing lost. `guard disable` gives the wallet back its
//! empty code.

use alloy::{
    primitives::{Address, Bytes, U256},
    sol,
    sol_types::SolCall,
};
use serde_json::json;
use walletops_tests::{Backend, Rest, anvil::KeyedWallet, on_both_backends};

use crate::frozen::{armed_skimmer, overtaken};

sol! {
    function execute(bytes32 mode, bytes executionData);
}

const STRANGER: &str = "0x5555555555555555555555555555555555555555";

/// The guard's address, printed by `guard enable`, read off its output.
fn guard_named_in(stdout: &str) -> anyhow::Result<Address> {
    let at = stdout
        .split_whitespace()
        .skip_while(|w| *w != "guard")
        .nth(1)
        .ok_or_else(|| anyhow::anyhow!("no guard address in {stdout}"))?;
    Ok(at.trim_end_matches([',', '.']).parse()?)
}

async fn a_guarded_wallet_reverts_a_write_that_takes_more_than_reserved(
    b: Backend,
) -> anyhow::Result<()> {
    let keyed = KeyedWallet::start(b).await?;
    let (anvil, wallet) = (&keyed.anvil, keyed.wallet);
    let (token, skimmer) = armed_skimmer(&keyed).await?;
    let owner = keyed.svc.rest(&keyed.svc.api_key);

    // Enabled: the guard is deployed by the delegating transaction, the wallet's code names it.
    let out = guard_cli(&keyed, "enable").await?;
    assert!(out.stdout.contains("deployed by it"), "{}", out.stdout);
    let guard = guard_named_in(&out.stdout)?;
    let code = |at: Address| async move {
        let code = anvil.rpc("eth_getCode", json!([at, "latest"])).await?;
        anyhow::Ok(code.as_str().unwrap_or_default().to_owned())
    };
    assert!(code(guard).await?.len() > 100, "no guard code deployed");
    assert_eq!(
        code(wallet).await?,
        format!("0xef0100{}", hex_of(guard)),
        "the wallet delegates to the guard"
    );
    // No one but the wallet itself executes through it.
    let stranger_call = anvil
        .rpc(
            "eth_call",
            json!([{"from": STRANGER, "to": wallet,
                "input": Bytes::from(executeCall { mode: [0u8; 32].into(), executionData: Bytes::new() }.abi_encode())}, "latest"]),
        )
        .await;
    assert!(
        stranger_call.is_err(),
        "a stranger executed through the wallet: {stranger_call:?}"
    );

    // Simulated unarmed (1 unit), overtaken in its block by a stranger arming the contract:
    // the guard's check reverts it on chain, and nothing leaves the wallet.
    let api = keyed.svc.rest(&keyed.key);
    let id = overtaken(&keyed, skimmer, token).await?;
    let record = api.wait_for_status(&id, "REVERTED").await?;
    assert_eq!(record["guarded"], true, "{record}");
    // Reverted by the guard's check, not for want of gas.
    let hash = json!(record["hash"]);
    let sent = anvil.rpc("eth_getTransactionByHash", json!([hash])).await?;
    let receipt = anvil
        .rpc("eth_getTransactionReceipt", json!([hash]))
        .await?;
    let number = |v: &serde_json::Value| {
        u64::from_str_radix(v.as_str().unwrap_or_default().trim_start_matches("0x"), 16)
    };
    assert!(
        number(&receipt["gasUsed"])? < number(&sent["gas"])?,
        "{receipt} {sent}"
    );
    assert_eq!(anvil.token_balance(token, skimmer).await?, U256::ZERO);
    assert_eq!(
        anvil.token_balance(token, wallet).await?,
        U256::from(10_000)
    );

    // An honest write through the guard is made as asked, and says it was guarded; the
    // owner's key has no limits, and its writes are not wrapped.
    assert_eq!(paid(&api, token, 5).await?["guarded"], true);
    assert_eq!(
        anvil.token_balance(token, STRANGER.parse()?).await?,
        U256::from(5)
    );
    assert_eq!(paid(&owner, token, 1).await?["guarded"], false);

    // Disabled: the wallet's code is empty again and the key's writes unguarded.
    guard_cli(&keyed, "disable").await?;
    assert_eq!(code(wallet).await?, "0x");
    assert_eq!(paid(&api, token, 5).await?["guarded"], false);

    // Enabled again: the guard is there already, only the delegation is sent.
    let out = guard_cli(&keyed, "enable").await?;
    assert!(!out.stdout.contains("deployed by it"), "{}", out.stdout);
    assert_eq!(guard_named_in(&out.stdout)?, guard);

    // A wallet whose code no longer delegates to the guard (delegated elsewhere outside
    // the service) would have its calls do nothing: the key's writes are refused, unsigned.
    let body = json!({"chain": "anvil", "asset": "erc20", "token": token.to_string(),
        "to": STRANGER, "amount": "5"});
    anvil.rpc("anvil_setCode", json!([wallet, "0x"])).await?;
    anvil
        .assert_refused(
            wallet,
            &api,
            ("/send", &body),
            (502, "SEND_FAILED"),
            &["guard", "not the delegation"],
        )
        .await?;
    Ok(())
}

on_both_backends!(a_guarded_wallet_reverts_a_write_that_takes_more_than_reserved);

/// `walletops wallets guard ACTION` of the keyed wallet on anvil, which must succeed.
async fn guard_cli(
    keyed: &KeyedWallet,
    action: &str,
) -> anyhow::Result<walletops_tests::CliOutput> {
    let wallet = keyed.wallet.to_string();
    let out = keyed
        .svc
        .cli(&["wallets", "guard", action, &wallet, "--chain", "anvil"])
        .await?;
    anyhow::ensure!(out.success, "guard {action}: {}", out.stderr);
    Ok(out)
}

/// `api`'s payment of `amount` of `token` to the stranger, once confirmed.
async fn paid(api: &Rest, token: Address, amount: u64) -> anyhow::Result<serde_json::Value> {
    let reply = api
        .post(
            "/send",
            &json!({"chain": "anvil", "asset": "erc20", "token": token.to_string(),
                "to": STRANGER, "amount": amount.to_string()}),
        )
        .await?;
    anyhow::ensure!(reply.status == 200, "{}", reply.text);
    api.wait_for_status(reply.body["id"].as_str().unwrap_or_default(), "CONFIRMED")
        .await
}

/// `address` as lowercase hex without `0x`.
fn hex_of(address: Address) -> String {
    alloy::primitives::hex::encode(address.as_slice())
}
