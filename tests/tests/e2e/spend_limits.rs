//! Spend limits per key: a write that would exceed its key's limit is refused with 403
//! FORBIDDEN naming it, over REST, gRPC and MCP alike, and concurrent writes cannot
//! overspend a budget together: each is reserved in the transaction that signs it.

use alloy::primitives::{Address, U256};
use serde_json::json;
use walletops_proto::v1::{self as pb, wallet_ops_service_client::WalletOpsServiceClient};
use walletops_tests::{
    Backend,
    anvil::KeyedWallet,
    mcp::{call, connect},
    on_both_backends, reason, write_request,
};

const RECIPIENT: &str = "0x1111111111111111111111111111111111111111";

fn native(amount: &str) -> serde_json::Value {
    json!({"chain": "anvil", "to": RECIPIENT, "asset": "native", "amount": amount})
}

/// Twenty sends of 1000 wei at once under a 24-hour budget of 5000: exactly five are signed
/// and paid, the others refused naming the budget.
async fn concurrent_writes_cannot_overspend_a_budget(b: Backend) -> anyhow::Result<()> {
    let KeyedWallet {
        anvil,
        svc,
        wallet,
        key,
        prefix,
    } = KeyedWallet::start(b).await?;
    svc.limit_key(&prefix, &["--chain", "anvil", "--daily", "5000"])
        .await?;
    let api = svc.rest(&key);
    let recipient: Address = RECIPIENT.parse()?;
    let before = anvil.balance(recipient).await?;
    let payment = native("1000");
    let replies = futures::future::join_all((0..20).map(|_| api.post("/send", &payment))).await;
    let mut paid = Vec::new();
    for reply in replies {
        let reply = reply?;
        if reply.status == 200 {
            paid.push(reply.body["id"].as_str().unwrap_or_default().to_owned());
        } else {
            reply.assert_error(403, "FORBIDDEN")?;
            assert!(
                reply.text.contains("24-hour budget of 5000"),
                "{}",
                reply.text
            );
        }
    }
    assert_eq!(paid.len(), 5, "exactly the budget was signed");
    for id in &paid {
        api.wait_for_status(id, "CONFIRMED").await?;
    }
    assert_eq!(anvil.nonce(wallet).await?, 5, "nothing else was signed");
    assert_eq!(
        anvil.balance(recipient).await? - before,
        U256::from(5000u64)
    );
    let shown = svc.cli(&["keys", "limits", &prefix]).await?;
    assert!(
        shown.stdout.contains("spent 5000, left 0"),
        "{}",
        shown.stdout
    );
    // Another key of the same user is not held to it.
    let other = svc.rest(&svc.api_key);
    let reply = other.post("/send", &native("1000")).await?;
    assert_eq!(reply.status, 200, "{}", reply.text);
    Ok(())
}

/// A write over the per-write maximum is refused over REST, gRPC and MCP, before anything
/// is signed; one at the maximum passes. A token's limit is the token's.
async fn the_maximum_per_write_holds_on_every_surface(b: Backend) -> anyhow::Result<()> {
    let KeyedWallet {
        anvil,
        svc,
        wallet,
        key,
        prefix,
    } = KeyedWallet::start(b).await?;
    let token = anvil.deploy_token("LIM", 18).await?;
    svc.limit_key(&prefix, &["--chain", "anvil", "--max-per-tx", "100"])
        .await?;
    let shown = svc
        .limit_key(
            &prefix,
            &[
                "--chain",
                "anvil",
                "--asset",
                &token.to_string(),
                "--max-per-tx",
                "500",
            ],
        )
        .await?;
    assert!(shown.contains("at most 500 per write"), "{shown}");
    let api = svc.rest(&key);
    let refused = api.post("/send", &native("101")).await?;
    refused.assert_error(403, "FORBIDDEN")?;
    assert!(refused.text.contains("at most 100"), "{}", refused.text);
    let mut grpc = WalletOpsServiceClient::new(svc.channel().await?);
    let status = grpc
        .send(write_request(
            pb::SendRequest {
                chain: "anvil".to_owned(),
                to: RECIPIENT.to_owned(),
                asset: pb::Asset::Native.into(),
                amount: "101".to_owned(),
                ..Default::default()
            },
            &key,
            &uuid::Uuid::new_v4().to_string(),
        )?)
        .await
        .expect_err("over the limit");
    assert_eq!(reason(&status).as_deref(), Some("FORBIDDEN"), "{status:?}");
    let agent = connect(&svc, &key, true).await?;
    let (failed, body) = call(&agent, "send", native("101")).await?;
    assert!(failed && body["code"] == "FORBIDDEN", "{body}");
    let approval = json!({"chain": "anvil", "token": token.to_string(),
                          "spender": RECIPIENT, "amount": "501"});
    api.post("/token/approve", &approval)
        .await?
        .assert_error(403, "FORBIDDEN")?;
    assert_eq!(anvil.nonce(wallet).await?, 0, "nothing was signed");
    let at_most = api.post("/send", &native("100")).await?;
    assert_eq!(at_most.status, 200, "{}", at_most.text);
    // Removed, the native limit leaves the key with none on the coin: a key with any limit
    // moves only assets it has a limit on.
    svc.limit_key(&prefix, &["--chain", "anvil", "--remove"])
        .await?;
    let denied = api.post("/send", &native("101")).await?;
    denied.assert_error(403, "FORBIDDEN")?;
    assert!(denied.text.contains("native"), "{}", denied.text);
    // With its last limit removed, the key is held to none.
    let token = token.to_string();
    svc.limit_key(
        &prefix,
        &["--chain", "anvil", "--asset", &token, "--remove"],
    )
    .await?;
    let freed = api.post("/send", &native("101")).await?;
    assert_eq!(freed.status, 200, "{}", freed.text);
    Ok(())
}

on_both_backends!(
    concurrent_writes_cannot_overspend_a_budget,
    the_maximum_per_write_holds_on_every_surface,
);
