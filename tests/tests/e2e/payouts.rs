//! Payouts against a real anvil: every item checked before anything is stored, each
//! recipient paid exactly once (balances read on the node), the same payout answered to a
//! replay of its key, another body under it refused.

use alloy::primitives::{Address, U256};
use anyhow::Context as _;
use serde_json::{Value, json};
use walletops_tests::{Backend, Service, anvil::Anvil, on_both_backends, poll_until};

const ETH: u128 = 1_000_000_000_000_000_000;

/// A recipient nobody else uses: `0x5e…` and its number.
fn recipient(n: u64) -> Address {
    Address::left_padding_from(&(0x5e00_0000_0000u64 + n).to_be_bytes())
}

async fn an_evm_payout_pays_each_recipient_once(b: Backend) -> anyhow::Result<()> {
    let anvil = Anvil::start().await?;
    let svc = Service::start_with(b, anvil.service_options("", &[])).await?;
    let api = svc.rest(&svc.api_key);
    let wallet = anvil
        .fund_default_wallet(&api, U256::from(10 * ETH))
        .await?;
    let token = anvil.deploy_token("PAY", 6).await?;
    anvil.mint(token, wallet, U256::from(1_000_000u64)).await?;
    let items: Vec<Value> = (0..20u64)
        .map(|n| {
            if n < 15 {
                json!({"to": recipient(n).to_string(), "asset": "native", "amount": (1_000 + n).to_string(), "reference": format!("invoice {n}")})
            } else {
                json!({"to": recipient(n).to_string(), "asset": "erc20", "token": token.to_string(), "amount": (10 + n).to_string()})
            }
        })
        .collect();
    let body = json!({"chain": "anvil", "items": items}).to_string();
    let key = uuid::Uuid::new_v4().to_string();
    let made = api.post_with_key("/payouts", &key, &body).await?;
    assert_eq!(made.status, 202, "{}", made.text);
    let id = made.body["id"].as_str().context("an id")?.to_owned();
    assert_eq!(made.body["items"].as_array().map(Vec::len), Some(20));
    assert_eq!(made.body["items"][3]["reference"], "invoice 3");
    // The same request under its key: the same payout; another under it: refused.
    let again = api.post_with_key("/payouts", &key, &body).await?;
    assert_eq!(again.status, 202, "{}", again.text);
    assert_eq!(again.body["id"], id.as_str());
    let other = json!({"chain": "anvil", "items": [items[0]]}).to_string();
    let mismatch = api.post_with_key("/payouts", &key, &other).await?;
    assert_eq!(mismatch.status, 409, "{}", mismatch.text);
    assert_eq!(mismatch.body["code"], "IDEMPOTENT_BODY_MISMATCH");
    // Every item paid and final, the payout completed.
    let done = poll_until("the payout to complete", || async {
        let p = api.get(&format!("/payouts/{id}")).await?;
        Ok((p.body["state"] == "COMPLETED").then_some(p.body))
    })
    .await?;
    assert_eq!(done["totals"]["CONFIRMED"], 20, "{done}");
    assert!(done["completedAt"].is_string(), "{done}");
    for n in 0..20u64 {
        let item = &done["items"][n as usize];
        assert_eq!(item["state"], "CONFIRMED", "{item}");
        assert!(item["hash"].is_string(), "{item}");
        let paid = if n < 15 {
            anvil.balance(recipient(n)).await?
        } else {
            anvil.token_balance(token, recipient(n)).await?
        };
        let want = if n < 15 { 1_000 + n } else { 10 + n };
        assert_eq!(paid, U256::from(want), "recipient {n} paid exactly once");
    }
    // Twenty transactions of the wallet, no more: nothing paid twice.
    assert_eq!(anvil.nonce(wallet).await?, 20);
    Ok(())
}

async fn a_bad_row_refuses_the_whole_batch(b: Backend) -> anyhow::Result<()> {
    let anvil = Anvil::start().await?;
    let svc = Service::start_with(b, anvil.service_options("", &[])).await?;
    let api = svc.rest(&svc.api_key);
    let wallet = anvil.fund_default_wallet(&api, U256::from(ETH)).await?;
    let good =
        |n: u64| json!({"to": recipient(n).to_string(), "asset": "native", "amount": "1000"});
    let mut items: Vec<Value> = (0..6).map(good).collect();
    items[3]["to"] = json!("0x1234");
    items[5]["amount"] = json!("lots");
    let bad = api
        .post("/payouts", &json!({"chain": "anvil", "items": items}))
        .await?;
    assert_eq!(bad.status, 400, "{}", bad.text);
    assert_eq!(bad.body["code"], "INVALID_INPUT");
    for field in ["items[3].to", "items[5].amount"] {
        assert!(bad.text.contains(field), "{field} not named: {}", bad.text);
    }
    // More than the wallet holds, named per asset.
    let mut costly: Vec<Value> = (0..3).map(good).collect();
    costly[2]["amount"] = json!((2 * ETH).to_string());
    let short = api
        .post("/payouts", &json!({"chain": "anvil", "items": costly}))
        .await?;
    assert_eq!(short.body["code"], "INSUFFICIENT_FUNDS", "{}", short.text);
    assert!(short.text.contains("native"), "{}", short.text);
    // No key, no payout; none is empty, none over 1,000.
    let keyless = api
        .request(
            reqwest::Method::POST,
            "/payouts",
            &[],
            Some(&json!({"chain": "anvil", "items": [good(0)]}).to_string()),
        )
        .await?;
    assert_eq!(keyless.status, 400, "{}", keyless.text);
    assert!(keyless.text.contains("Idempotency-Key"), "{}", keyless.text);
    let empty = api
        .post("/payouts", &json!({"chain": "anvil", "items": []}))
        .await?;
    assert_eq!(empty.status, 400, "{}", empty.text);
    let many: Vec<Value> = (0..1001).map(good).collect();
    let over = api
        .post("/payouts", &json!({"chain": "anvil", "items": many}))
        .await?;
    assert_eq!(over.status, 400, "{}", over.text);
    // Nothing was sent.
    assert_eq!(anvil.nonce(wallet).await?, 0);
    assert_eq!(anvil.balance(recipient(0)).await?, U256::ZERO);
    Ok(())
}

on_both_backends!(
    an_evm_payout_pays_each_recipient_once,
    a_bad_row_refuses_the_whole_batch,
);
