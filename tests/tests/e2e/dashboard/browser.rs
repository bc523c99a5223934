//! The dashboard in a real browser: `tests/browser/dashboard.mjs` drives Debian's Chromium
//! (headless, through playwright-core, both installed by the test command) against the real
//! binary, as a new operator would use it. This test arranges what a browser cannot (a
//! funded wallet with a transaction, a key past its expiry, a write held for approval), runs
//! the script, checks that the write it approved lands, and keeps its screenshots in
//! `target/test-artifacts/dashboard/<store>/`.

use anyhow::Context;
use serde_json::json;
use walletops_tests::{Backend, on_one_backend, workspace_root};

use super::funded;

async fn a_new_operator_uses_the_dashboard(b: Backend) -> anyhow::Result<()> {
    let (anvil, svc, wallet) = funded(b).await?;
    let api = svc.rest(&svc.api_key);
    let sent = api
        .post(
            "/send",
            &json!({"chain": "anvil", "from": wallet.to_string(), "to": "0x1111111111111111111111111111111111111111", "asset": "native", "amount": "1000000000000000"}),
        )
        .await?;
    anyhow::ensure!(sent.status == 200, "{}", sent.text);
    let tx = sent.body["id"].as_str().context("no id")?.to_owned();
    // A key past its expiry, as 7 days would make it.
    let out = svc
        .cli(&["keys", "create", "--name", "old key", "--expires", "7d"])
        .await?;
    let expired = out.api_key().context("no key printed")?[5..9].to_owned();
    svc.expire_key(&expired).await?;
    // A spend limit on it, for the keys table to show.
    let limited = svc
        .cli(&[
            "keys",
            "limit",
            &expired,
            "--chain",
            "anvil",
            "--daily",
            "5000000000000000000",
        ])
        .await?;
    anyhow::ensure!(limited.success, "{}", limited.stderr);
    // A write of the first key held for approval, for the script to approve.
    let first = svc.api_key.split('_').nth(1).unwrap_or_default().to_owned();
    let guarded = svc
        .cli(&[
            "keys",
            "limit",
            &first,
            "--chain",
            "anvil",
            "--approve-above",
            "1000000000000000",
        ])
        .await?;
    anyhow::ensure!(guarded.success, "{}", guarded.stderr);
    let held = api
        .post(
            "/send",
            &json!({"chain": "anvil", "to": "0x1111111111111111111111111111111111111111", "asset": "native", "amount": "2000000000000000"}),
        )
        .await?;
    anyhow::ensure!(held.status == 202, "{}", held.text);
    let held = held.body["id"].as_str().context("no id")?.to_owned();
    // Money from outside, for the deposits page.
    let deposit = anvil
        .send_as(
            walletops_tests::anvil::DEV_ACCOUNT,
            Some(wallet),
            alloy::primitives::Bytes::new(),
            alloy::primitives::U256::from(3_000_000_000_000_000u64),
        )
        .await?;
    let deposit = format!("{:#x}", deposit.transaction_hash);
    walletops_tests::poll_until("the deposit to be found", || async {
        let found = api.get("/deposits").await?;
        Ok(found.text.contains(&deposit).then_some(()))
    })
    .await?;
    let store = match b {
        Backend::Sqlite => "sqlite",
        Backend::Postgres => "postgres",
    };
    let out_dir = workspace_root()
        .join("target/test-artifacts/dashboard")
        .join(store);
    let root = workspace_root();
    let run = tokio::process::Command::new("node")
        .arg(root.join("tests/browser/dashboard.mjs"))
        .current_dir(&root)
        .env("BASE", &svc.http)
        .env("LINK", &svc.sign_in_link)
        .env("EXPIRED", &expired)
        .env("WALLET", wallet.to_string())
        .env("TX", &tx)
        .env("HELD", &held)
        .env("DEPOSIT", &deposit)
        .env("OUT", &out_dir)
        .kill_on_drop(true)
        .output();
    let done = tokio::time::timeout(std::time::Duration::from_secs(240), run)
        .await
        .context("the browser script did not finish in 240 s")??;
    anyhow::ensure!(
        done.status.success(),
        "the browser script failed:\n{}\n{}",
        String::from_utf8_lossy(&done.stdout),
        String::from_utf8_lossy(&done.stderr)
    );
    for page in [
        "sign-in",
        "set-password",
        "keys-created",
        "revoke",
        "wallets",
        "transactions",
        "approvals",
        "deposits",
        "payouts-preview",
        "payout",
    ] {
        let shot = out_dir.join(format!("{page}.png"));
        anyhow::ensure!(shot.exists(), "no screenshot {}", shot.display());
    }
    // Approved in the browser, the held write is signed and lands.
    let made = walletops_tests::poll_until(&format!("approval {held} to be submitted"), || async {
        let reply = api.get(&format!("/approvals/{held}")).await?;
        anyhow::ensure!(reply.status == 200, "{}", reply.text);
        Ok((reply.body["state"] == "submitted").then_some(reply.body))
    })
    .await?;
    assert_eq!(made["decidedBy"], "dashboard:owner");
    // The payout made in the browser paid each of its two recipients once.
    let payouts = api.get("/payouts").await?;
    assert_eq!(
        payouts.body["payouts"][0]["totals"]["CONFIRMED"], 2,
        "{}",
        payouts.text
    );
    for (to, wei) in [("01", 1_000u64), ("02", 2_000)] {
        let to: alloy::primitives::Address =
            format!("0x22222222222222222222222222222222222222{to}").parse()?;
        assert_eq!(anvil.balance(to).await?, alloy::primitives::U256::from(wei));
    }
    api.wait_for_status(
        made["transactionId"].as_str().unwrap_or_default(),
        "CONFIRMED",
    )
    .await?;
    Ok(())
}

on_one_backend!(a_new_operator_uses_the_dashboard);
