//! Master-key rotation and online backups. A rotation re-seals every wallet key while the
//! service runs: the running core keeps signing for the keys it holds and refuses the rest
//! with a clear SERVICE_UNAVAILABLE until restarted, and after a restart every wallet signs.
//! A backup taken while sends are under way restores to a service that has every write
//! acknowledged before it began, finds the later ones on chain, and sends on.

use alloy::{
    primitives::{B256, utils::parse_ether},
    providers::Provider as _,
};
use base64::{Engine as _, engine::general_purpose::STANDARD as BASE64};
use serde_json::{Value, json};
use walletops_proto::v1::{self as pb, admin_service_client::AdminServiceClient};
use walletops_tests::{
    Backend, Rest, Service, anvil::Anvil, as_admin, on_both_backends, reason, webhooks::Receiver,
};

const RECIPIENT: &str = "0x1111111111111111111111111111111111111111";

fn send_from(from: &str) -> Value {
    json!({"chain": "anvil", "from": from, "to": RECIPIENT, "asset": "native", "amount": "1000"})
}

/// Sends from `from` and waits until the send is confirmed; its id.
async fn confirmed(api: &Rest, from: &str) -> anyhow::Result<String> {
    let reply = api.post("/send", &send_from(from)).await?;
    anyhow::ensure!(reply.status == 200, "{}", reply.text);
    let id = reply.body["id"].as_str().unwrap_or_default().to_owned();
    api.wait_for_status(&id, "CONFIRMED").await?;
    Ok(id)
}

async fn a_rotated_master_key_keeps_every_wallet_signing(b: Backend) -> anyhow::Result<()> {
    let anvil = Anvil::start().await?;
    let mut svc = Service::start_with(b, anvil.service_options("", &[])).await?;
    let api = svc.rest(&svc.api_key);
    // A webhook secret is sealed under the master key too.
    let hook = Receiver::start().await?;
    hook.register(&api, &["transaction.confirmed"]).await?;
    let first = anvil
        .fund_default_wallet(&api, parse_ether("10")?)
        .await?
        .to_string();
    let made = svc
        .cli(&["wallets", "create", "--chain-type", "ethereum"])
        .await?;
    anyhow::ensure!(made.success, "{}", made.stderr);
    let second = made
        .stdout
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned();
    anvil
        .set_balance(second.parse()?, parse_ether("10")?)
        .await?;
    // The running core reads the first wallet's key now, not the second's.
    confirmed(&api, &first).await?;
    let old_key = std::fs::read_to_string(svc.data_dir().join("master.key"))?;
    let new_key_file = svc.data_dir().join("new.key");
    std::fs::write(
        &new_key_file,
        BASE64.encode(alloy::signers::local::PrivateKeySigner::random().to_bytes()),
    )?;
    let rotated = svc
        .cli(&[
            "keystore",
            "rotate",
            "--new-key-file",
            &new_key_file.display().to_string(),
        ])
        .await?;
    anyhow::ensure!(rotated.success, "{}", rotated.stderr);
    assert!(
        rotated.stdout.contains("Re-sealed 3 wallet keys"),
        "{}",
        rotated.stdout
    );
    let now_key = std::fs::read_to_string(svc.data_dir().join("master.key"))?;
    assert_eq!(
        now_key.trim(),
        std::fs::read_to_string(&new_key_file)?.trim()
    );
    assert_ne!(now_key, old_key);
    // Still on the old key: the key it holds signs, the others are refused, clearly, and
    // it makes no wallet under the old key.
    confirmed(&api, &first).await?;
    let refused = api.post("/send", &send_from(&second)).await?;
    refused.assert_error(503, "SERVICE_UNAVAILABLE")?;
    assert!(
        refused
            .text
            .contains("restart the core with the new master key"),
        "{}",
        refused.text
    );
    let err = AdminServiceClient::new(svc.admin_channel().await?)
        .create_wallet(as_admin(pb::CreateWalletRequest {
            user: "owner".to_owned(),
            chain_type: "ethereum".to_owned(),
            make_default: None,
            custody: String::new(),
        })?)
        .await
        .expect_err("a wallet sealed under the old key");
    assert_eq!(reason(&err).as_deref(), Some("SERVICE_UNAVAILABLE"));
    // Nor a webhook secret.
    api.post("/webhooks", &json!({"url": hook.url()}))
        .await?
        .assert_error(503, "SERVICE_UNAVAILABLE")?;
    // The refused send left its key free: after a restart on the new key, all sign.
    svc.restart().await?;
    let api = svc.rest(&svc.api_key);
    confirmed(&api, &first).await?;
    let last = confirmed(&api, &second).await?;
    // The webhook secret was re-sealed with the wallet keys: deliveries still verify.
    hook.wait_for_event(&last, "transaction.confirmed").await?;
    // The old key no longer opens the database.
    let elsewhere = tempfile::tempdir()?;
    std::fs::write(elsewhere.path().join("master.key"), &old_key)?;
    let old = svc
        .cli_in(
            elsewhere.path(),
            &["wallets", "create", "--chain-type", "ethereum"],
        )
        .await?;
    assert!(!old.success, "{}", old.stdout);
    Ok(())
}

async fn a_backup_taken_under_load_restores(b: Backend) -> anyhow::Result<()> {
    let anvil = Anvil::start().await?;
    // A record copied before its broadcast was noted (the note is written behind) waits for
    // its request's hold, and one the monitor was following for its lease, before the
    // restored service takes it up: both kept short, so that a loaded machine settles them
    // well within the wait.
    let options = anvil.service_options(
        "[monitor]\nlease_secs = 5\n",
        &[("WALLETOPS_REQUEST_TIMEOUT_SECS", "15")],
    );
    let mut svc = Service::start_with(b, options).await?;
    let api = svc.rest(&svc.api_key);
    let wallet = anvil
        .fund_default_wallet(&api, parse_ether("10")?)
        .await?
        .to_string();
    let backup = svc.data_dir().join("backup.db");
    if b == Backend::Postgres {
        // The database's own tool does it; the command says how.
        let out = svc.cli(&["backup", &backup.display().to_string()]).await?;
        assert!(
            !out.success && out.stderr.contains("pg_dump"),
            "{}",
            out.stderr
        );
        return Ok(());
    }
    // Sends acknowledged before the backup begins, sends racing it, sends after it.
    let mut before = Vec::new();
    for _ in 0..5 {
        before.push(api.post("/send", &send_from(&wallet)).await?);
    }
    let racing = {
        let api = api.clone();
        let wallet = wallet.clone();
        tokio::spawn(async move {
            let mut replies = Vec::new();
            for _ in 0..10 {
                replies.push(api.post("/send", &send_from(&wallet)).await?);
            }
            anyhow::Ok(replies)
        })
    };
    let copied = svc.cli(&["backup", &backup.display().to_string()]).await?;
    anyhow::ensure!(copied.success, "{}", copied.stderr);
    let mut after = racing.await??;
    after.push(api.post("/send", &send_from(&wallet)).await?);
    for reply in before.iter().chain(&after) {
        anyhow::ensure!(reply.status == 200, "{}", reply.text);
    }
    // Restore: the service stopped, its database replaced by the copy.
    svc.kill().await?;
    let db = svc.data_dir().join("walletops.db");
    for stale in ["walletops.db-wal", "walletops.db-shm"] {
        let _ = std::fs::remove_file(svc.data_dir().join(stale));
    }
    std::fs::copy(&backup, &db)?;
    svc.relaunch(svc.options().clone()).await?;
    let api = svc.rest(&svc.api_key);
    // Everything acknowledged before the backup is in it, and settles.
    for reply in &before {
        api.wait_for_status(reply.body["id"].as_str().unwrap_or_default(), "CONFIRMED")
            .await?;
    }
    // What came later is in it too, or on chain: acknowledged money moved either way.
    for reply in &after {
        let id = reply.body["id"].as_str().unwrap_or_default();
        if api.get(&format!("/tx/{id}")).await?.status == 200 {
            api.wait_for_status(id, "CONFIRMED").await?;
        } else {
            let hash: B256 = reply.body["hash"].as_str().unwrap_or_default().parse()?;
            let receipt = anvil.provider().get_transaction_receipt(hash).await?;
            assert!(
                receipt.is_some(),
                "acknowledged send {id} neither restored nor on chain"
            );
        }
    }
    // And the restored service sends on: its nonce ledger catches up with the chain.
    confirmed(&api, &wallet).await?;
    Ok(())
}

on_both_backends!(
    a_rotated_master_key_keeps_every_wallet_signing,
    a_backup_taken_under_load_restores,
);
