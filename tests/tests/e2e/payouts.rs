//! Payouts against a real anvil: every item checked before anything is stored, each
//! recipient paid exactly once (balances read on the node) for 1,000 items and across a
//! SIGKILL of the service, the same payout answered to a replay of its key, another body
//! under it refused, `payout.completed` told once.

use alloy::primitives::{Address, U256};
use anyhow::Context as _;
use serde_json::{Value, json};
use walletops_tests::{
    Backend, Rest, Service, anvil::Anvil, on_both_backends, poll_until, poll_until_within,
    webhooks::Receiver,
};

const ETH: u128 = 1_000_000_000_000_000_000;

/// A recipient nobody else uses: `0x5e…` and its number.
fn recipient(n: u64) -> Address {
    Address::left_padding_from(&(0x5e00_0000_0000u64 + n).to_be_bytes())
}

/// Waits until payout `id` is completed; its body. It asks the list of completed payouts,
/// which holds none of a running payout's items, not to load the service it waits on.
async fn completed(api: &Rest, id: &str) -> anyhow::Result<Value> {
    // A thousand payments on a busy machine take a while.
    let long = 4 * walletops_tests::WAIT_TIMEOUT;
    poll_until_within("the payout to complete", long, || async {
        let done = api.get("/payouts?state=completed&limit=500").await?;
        Ok(done.text.contains(id).then_some(()))
    })
    .await?;
    Ok(api.get(&format!("/payouts/{id}")).await?.body)
}

/// `n` native items to `recipient(first..)`, item `k` paying `1_000 + k` wei.
fn native_items(first: u64, n: u64) -> Vec<Value> {
    (first..first + n)
        .map(|k| json!({"to": recipient(k).to_string(), "asset": "native", "amount": (1_000 + k).to_string()}))
        .collect()
}

/// Each of `n` recipients from `first` holds exactly what its item paid.
async fn each_paid_once(anvil: &Anvil, first: u64, n: u64) -> anyhow::Result<()> {
    for k in first..first + n {
        let paid = anvil.balance(recipient(k)).await?;
        anyhow::ensure!(
            paid == U256::from(1_000 + k),
            "recipient {k} holds {paid}, not {}",
            1_000 + k
        );
    }
    Ok(())
}

async fn an_evm_payout_pays_each_recipient_once(b: Backend) -> anyhow::Result<()> {
    let anvil = Anvil::start().await?;
    let svc = Service::start_with(b, anvil.service_options("", &[])).await?;
    let api = svc.rest(&svc.api_key);
    let receiver = Receiver::start().await?;
    receiver.register(&api, &["payout.completed"]).await?;
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
    // Checked only: the payout as it would be, nothing stored.
    let checked = api
        .post(
            "/payouts",
            &json!({"chain": "anvil", "items": items, "validateOnly": true}),
        )
        .await?;
    assert_eq!(checked.status, 200, "{}", checked.text);
    assert_eq!(checked.body["id"], "", "{}", checked.text);
    assert_eq!(checked.body["itemCount"], 20);
    assert_eq!(api.get("/payouts").await?.body["payouts"], json!([]));
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
    let done = completed(&api, &id).await?;
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
    // Told once, with its totals; listed with them.
    let told = receiver.wait_for_event(&id, "payout.completed").await?;
    assert_eq!(told.body["totals"]["CONFIRMED"], 20, "{}", told.body);
    assert_eq!(told.body["transactionCount"], 20, "{}", told.body);
    let listed = api.get("/payouts?state=completed&limit=10").await?;
    assert_eq!(
        listed.body["payouts"][0]["id"],
        id.as_str(),
        "{}",
        listed.text
    );
    assert_eq!(listed.body["payouts"][0]["itemCount"], 20);
    assert!(listed.body["payouts"][0].get("items").is_none());
    assert_eq!(
        api.get("/payouts?state=running").await?.body["payouts"],
        json!([])
    );
    assert_eq!(api.get("/payouts?state=lost").await?.status, 400);
    // Deliveries are at least once: one webhook id, whatever came again under it.
    let events: std::collections::HashSet<_> = receiver
        .taken()
        .into_iter()
        .filter(|r| r.event_type() == "payout.completed")
        .map(|r| r.id)
        .collect();
    assert_eq!(events.len(), 1, "payout.completed told once: {events:?}");
    Ok(())
}

async fn a_thousand_item_payout_pays_each_recipient_once(b: Backend) -> anyhow::Result<()> {
    let anvil = Anvil::start().await?;
    let svc = Service::start_with(b, anvil.service_options("", &[])).await?;
    let api = svc.rest(&svc.api_key);
    let wallet = anvil.fund_default_wallet(&api, U256::from(ETH)).await?;
    let body = json!({"chain": "anvil", "items": native_items(0, 1000)});
    let made = api.post("/payouts", &body).await?;
    assert_eq!(made.status, 202, "{}", made.text);
    let id = made.body["id"].as_str().context("an id")?.to_owned();
    let done = completed(&api, &id).await?;
    assert_eq!(done["totals"]["CONFIRMED"], 1000, "{}", done["totals"]);
    each_paid_once(&anvil, 0, 1000).await?;
    assert_eq!(anvil.nonce(wallet).await?, 1000);
    Ok(())
}

async fn a_payout_killed_midway_pays_each_item_once(b: Backend) -> anyhow::Result<()> {
    let anvil = Anvil::start().await?;
    // A record whose request died with the service is the monitor's once its hold ends.
    let options = anvil.service_options("", &[("WALLETOPS_REQUEST_TIMEOUT_SECS", "5")]);
    let mut svc = Service::start_with(b, options.clone()).await?;
    let api = svc.rest(&svc.api_key);
    let wallet = anvil.fund_default_wallet(&api, U256::from(ETH)).await?;
    let body = json!({"chain": "anvil", "items": native_items(2_000, 300)});
    let made = api.post("/payouts", &body).await?;
    assert_eq!(made.status, 202, "{}", made.text);
    let id = made.body["id"].as_str().context("an id")?.to_owned();
    // Some items paid, most not: the service dies without a word.
    poll_until("a few items to be paid", || async {
        Ok((anvil.nonce(wallet).await? >= 10).then_some(()))
    })
    .await?;
    svc.kill().await?;
    let paid_before = anvil.nonce(wallet).await?;
    assert!(paid_before < 300, "the payout was done before the kill");
    svc.relaunch(options).await?;
    let api = svc.rest(&svc.api_key);
    let done = completed(&api, &id).await?;
    assert_eq!(done["totals"]["CONFIRMED"], 300, "{}", done["totals"]);
    each_paid_once(&anvil, 2_000, 300).await?;
    assert_eq!(anvil.nonce(wallet).await?, 300, "nothing paid twice");
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

async fn a_csv_file_pays_on_the_command_line(b: Backend) -> anyhow::Result<()> {
    let anvil = Anvil::start().await?;
    let svc = Service::start_with(b, anvil.service_options("", &[])).await?;
    let api = svc.rest(&svc.api_key);
    let wallet = anvil.fund_default_wallet(&api, U256::from(ETH)).await?;
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("payroll.csv");
    let path = file.to_str().context("a path")?;
    let rows: Vec<String> = (0..5u64)
        .map(|k| {
            format!(
                "{},native,{},march {k}",
                recipient(3_000 + k),
                1_000 + 3_000 + k
            )
        })
        .collect();
    // A bad row: refused, named by its row, nothing stored.
    let mut bad = rows.clone();
    bad[2] = "0x1234,native,10,oops".to_owned();
    std::fs::write(
        &file,
        format!(
            "to,asset,amount,reference
{}
",
            bad.join(
                "
"
            )
        ),
    )?;
    let refused = svc
        .cli(&["payouts", "create", "--chain", "anvil", "--csv", path])
        .await?;
    assert!(!refused.success, "{}", refused.stdout);
    assert!(
        refused.stderr.contains("(row 4) items[2].to"),
        "{}",
        refused.stderr
    );
    std::fs::write(
        &file,
        format!(
            "to,asset,amount,reference
{}
",
            rows.join(
                "
"
            )
        ),
    )?;
    let checked = svc
        .cli(&[
            "payouts", "create", "--chain", "anvil", "--csv", path, "--check",
        ])
        .await?;
    assert!(checked.success, "{}", checked.stderr);
    assert!(
        checked.stdout.contains("Checked: 5 items"),
        "{}",
        checked.stdout
    );
    assert_eq!(api.get("/payouts").await?.body["payouts"], json!([]));
    let made = svc
        .cli(&["payouts", "create", "--chain", "anvil", "--csv", path])
        .await?;
    assert!(made.success, "{}", made.stderr);
    let id = made
        .stdout
        .split_whitespace()
        .nth(1)
        .context("the payout's id")?
        .to_owned();
    // The same file again: the same payout, nothing paid twice.
    let again = svc
        .cli(&["payouts", "create", "--chain", "anvil", "--csv", path])
        .await?;
    assert!(again.stdout.contains(&id), "{}", again.stdout);
    completed(&api, &id).await?;
    each_paid_once(&anvil, 3_000, 5).await?;
    assert_eq!(anvil.nonce(wallet).await?, 5);
    let shown = svc.cli(&["payouts", "show", &id]).await?;
    assert_eq!(
        shown.stdout.matches("CONFIRMED").count(),
        6,
        "{}",
        shown.stdout
    );
    let listed = svc.cli(&["payouts", "list"]).await?;
    assert!(listed.stdout.contains(&id), "{}", listed.stdout);
    Ok(())
}

/// A limited key's payout is judged per item and for its total: items each under the
/// approval threshold cannot add up past it, nor past the 24-hour budget.
async fn a_limited_keys_payout_is_judged_per_item_and_in_total(b: Backend) -> anyhow::Result<()> {
    let walletops_tests::anvil::KeyedWallet {
        anvil,
        svc,
        wallet,
        key,
        prefix,
    } = walletops_tests::anvil::KeyedWallet::start(b).await?;
    svc.limit_key(
        &prefix,
        &[
            "--chain",
            "anvil",
            "--max-per-tx",
            "5000",
            "--daily",
            "15000",
            "--approve-above",
            "9000",
        ],
    )
    .await?;
    let api = svc.rest(&key);
    let pay = |amounts: &[u64], first: u64| {
        let items: Vec<Value> = amounts
            .iter()
            .enumerate()
            .map(|(i, a)| json!({"to": recipient(first + i as u64).to_string(), "asset": "native", "amount": a.to_string()}))
            .collect();
        json!({"chain": "anvil", "items": items})
    };
    let refused = |reply: &walletops_tests::Reply, says: &str| {
        assert_eq!(reply.status, 403, "{}", reply.text);
        assert!(reply.text.contains(says), "{says}: {}", reply.text);
    };
    refused(
        &api.post("/payouts", &pay(&[4_000, 6_000], 4_000)).await?,
        "items[1]",
    );
    // Three items under the threshold each, above it together: refused whole.
    refused(
        &api.post("/payouts", &pay(&[4_000, 4_000, 4_000], 4_000))
            .await?,
        "approval threshold",
    );
    let token = anvil.deploy_token("LIM", 6).await?;
    let unlimited = json!({"chain": "anvil", "items": [{"to": recipient(4_000).to_string(), "asset": "erc20", "token": token.to_string(), "amount": "1"}]});
    refused(&api.post("/payouts", &unlimited).await?, "has none on");
    assert_eq!(anvil.nonce(wallet).await?, 0, "nothing was sent");
    let made = api.post("/payouts", &pay(&[4_000, 4_000], 4_000)).await?;
    assert_eq!(made.status, 202, "{}", made.text);
    completed(&api, made.body["id"].as_str().context("an id")?).await?;
    // 8,000 of the 15,000 spent: another 8,000 is past the budget.
    refused(
        &api.post("/payouts", &pay(&[4_000, 4_000], 4_010)).await?,
        "the payout's total",
    );
    assert_eq!(anvil.nonce(wallet).await?, 2);
    Ok(())
}

/// An item whose key an earlier version of the payouts runner used, keeping its request in
/// another form (a send under `/send`), is that item: the payout takes over its payment
/// instead of refusing the item for a body mismatch, and the recipient is paid once.
async fn an_item_made_in_an_earlier_form_is_taken_over_not_failed(
    b: Backend,
) -> anyhow::Result<()> {
    let anvil = Anvil::start().await?;
    let svc = Service::start_with(b, anvil.service_options("", &[])).await?;
    let api = svc.rest(&svc.api_key);
    anvil
        .fund_default_wallet(&api, U256::from(10 * ETH))
        .await?;
    let payout_key = uuid::Uuid::new_v4();
    // The key the runner derives for item 0 (`Payout::item_key`), used as an older runner
    // did: the item's payment as a send.
    let item_key = uuid::Uuid::new_v5(&payout_key, b"payout item 0");
    let to = recipient(9_000);
    let sent = api
        .post_with_key(
            "/send",
            &item_key.to_string(),
            &json!({"chain": "anvil", "to": to.to_string(), "asset": "native", "amount": "7000"})
                .to_string(),
        )
        .await?;
    assert_eq!(sent.status, 200, "{}", sent.text);
    let paid = sent.body["id"].as_str().context("a send id")?.to_owned();
    let items = json!([
        {"to": to.to_string(), "asset": "native", "amount": "7000"},
        {"to": recipient(9_001).to_string(), "asset": "native", "amount": "7001"},
    ]);
    let made = api
        .post_with_key(
            "/payouts",
            &payout_key.to_string(),
            &json!({"chain": "anvil", "items": items}).to_string(),
        )
        .await?;
    assert_eq!(made.status, 202, "{}", made.text);
    let payout = completed(&api, made.body["id"].as_str().context("an id")?).await?;
    assert_eq!(
        payout["items"][0]["transactionId"],
        paid.as_str(),
        "{payout}"
    );
    assert_ne!(payout["items"][0]["state"], "FAILED", "{payout}");
    assert_eq!(anvil.balance(to).await?, U256::from(7_000u64), "paid once");
    assert_eq!(anvil.balance(recipient(9_001)).await?, U256::from(7_001u64));
    Ok(())
}

on_both_backends!(
    an_item_made_in_an_earlier_form_is_taken_over_not_failed,
    a_limited_keys_payout_is_judged_per_item_and_in_total,
    a_csv_file_pays_on_the_command_line,
    an_evm_payout_pays_each_recipient_once,
    a_thousand_item_payout_pays_each_recipient_once,
    a_payout_killed_midway_pays_each_item_once,
    a_bad_row_refuses_the_whole_batch,
);
