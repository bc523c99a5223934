//! Solana rent is SOL sent: a token send or payout item to a recipient without its token
//! account creates that account with the wallet's lamports, which go to whoever may close
//! it. A key limited on a mint alone (no SOL may leave) cannot fund accounts for others; a
//! key with a SOL limit has the rent counted against it. Balances are read on the node.

use std::str::FromStr;

use anyhow::Context as _;
use serde_json::{Value, json};
use solana_keypair::Keypair;
use solana_pubkey::Pubkey;
use solana_rpc_client::nonblocking::rpc_client::RpcClient;
use solana_signer::Signer as _;
use walletops_tests::{
    Backend, Service, on_both_backends,
    solana_node::{self as sol, SolanaNode},
};

const SOL: u64 = 1_000_000_000;
const CHAIN: &str = "solana-devnet";

fn send(to: &Pubkey, mint: &Pubkey, amount: u64) -> Value {
    json!({"chain": CHAIN, "to": to.to_string(), "asset": "spl", "token": mint.to_string(),
        "amount": amount.to_string()})
}

async fn rent_is_sol_sent_to_the_new_accounts_owner(b: Backend) -> anyhow::Result<()> {
    let node = SolanaNode::start("127.0.0.1:0".parse()?).await?;
    let svc = Service::start_with(b, node.service_options("", "")).await?;
    let owner = svc.rest(&svc.api_key);
    let wallet = Pubkey::from_str(&owner.default_wallet("solana").await?)?;
    node.airdrop(&wallet, 10 * SOL)?;
    let rpc = RpcClient::new(node.url());
    let payer = Keypair::new();
    node.airdrop(&payer.pubkey(), 10 * SOL)?;
    let mint = sol::create_mint(&rpc, &payer, &spl_token_interface::ID, 6).await?;
    sol::mint_to(&rpc, &payer, &mint, &wallet, 1_000_000).await?;
    // A recipient whose token account exists already costs no rent.
    let known = Pubkey::new_unique();
    sol::mint_to(&rpc, &payer, &mint, &known, 1).await?;
    let rent = rpc.get_minimum_balance_for_rent_exemption(165).await?;

    let key = svc.create_key("mint only").await?;
    let prefix = key.split('_').nth(1).unwrap_or_default().to_owned();
    let mint_text = mint.to_string();
    svc.limit_key(
        &prefix,
        &[
            "--chain",
            CHAIN,
            "--asset",
            &mint_text,
            "--max-per-tx",
            "100000",
            "--daily",
            "100000",
        ],
    )
    .await?;
    let api = svc.rest(&key);
    let lamports = rpc.get_balance(&wallet).await?;
    let fresh = Pubkey::new_unique();
    let refused = api.post("/send", &send(&fresh, &mint, 10)).await?;
    refused.assert_error(403, "FORBIDDEN")?;
    assert!(
        refused.text.contains("native") && refused.text.contains(&rent.to_string()),
        "the rent is named: {}",
        refused.text
    );
    let made = api.post("/send", &send(&known, &mint, 10)).await?;
    assert_eq!(made.status, 200, "no rent: {}", made.text);
    api.wait_for_status(made.body["id"].as_str().unwrap_or_default(), "CONFIRMED")
        .await?;

    // A 200-item payout to new recipients: refused for the key; the owner's check shows
    // the rent it would pay.
    let payout = fresh_payout(&mint, 200);
    let refused = api.post("/payouts", &payout).await?;
    refused.assert_error(403, "FORBIDDEN")?;
    assert!(refused.text.contains("rent"), "{}", refused.text);
    let mut checked = payout.clone();
    checked["validateOnly"] = json!(true);
    let preview = owner.post("/payouts", &checked).await?;
    assert_eq!(preview.status, 200, "{}", preview.text);
    assert_eq!(
        preview.body["rent"],
        (200 * rent).to_string(),
        "{}",
        preview.text
    );
    assert_eq!(
        sol::token_balance(&rpc, &fresh, &mint).await?,
        0,
        "nothing reached the fresh address"
    );
    assert!(
        rpc.get_balance(&wallet).await? > lamports - SOL / 100,
        "the wallet paid no rent"
    );

    // With a SOL limit, the rent counts against it.
    svc.limit_key(
        &prefix,
        &[
            "--chain",
            CHAIN,
            "--asset",
            "native",
            "--max-per-tx",
            &(rent - 1).to_string(),
        ],
    )
    .await?;
    let refused = api.post("/send", &send(&fresh, &mint, 10)).await?;
    refused.assert_error(403, "FORBIDDEN")?;
    assert!(
        refused.text.contains(&format!("at most {}", rent - 1)),
        "{}",
        refused.text
    );
    svc.limit_key(
        &prefix,
        &[
            "--chain",
            CHAIN,
            "--asset",
            "native",
            "--max-per-tx",
            &rent.to_string(),
        ],
    )
    .await?;
    let dry = api
        .post("/send?dryRun=true", &send(&fresh, &mint, 10))
        .await?;
    let reserved = dry.body["verdict"]["reservations"]
        .as_array()
        .context("reservations")?
        .iter()
        .find(|r| r["asset"] == "native")
        .map(|r| r["amount"].clone());
    assert_eq!(reserved, Some(json!(rent.to_string())), "{}", dry.text);
    let made = api.post("/send", &send(&fresh, &mint, 10)).await?;
    assert_eq!(made.status, 200, "{}", made.text);
    api.wait_for_status(made.body["id"].as_str().unwrap_or_default(), "CONFIRMED")
        .await?;
    assert_eq!(sol::token_balance(&rpc, &fresh, &mint).await?, 10);

    // With a SOL budget for 201 accounts, the 200-item payout is made, its rent counted
    // against the budget; another is refused on it.
    svc.limit_key(
        &prefix,
        &[
            "--chain",
            CHAIN,
            "--asset",
            "native",
            "--max-per-tx",
            &(200 * rent).to_string(),
            "--daily",
            &(201 * rent).to_string(),
        ],
    )
    .await?;
    let made = api.post("/payouts", &payout).await?;
    assert_eq!(made.status, 202, "{}", made.text);
    let id = made.body["id"].as_str().context("an id")?.to_owned();
    let done = walletops_tests::poll_until("the payout to complete", || async {
        let p = api.get(&format!("/payouts/{id}")).await?;
        Ok((p.body["state"] == "COMPLETED").then_some(p.body))
    })
    .await?;
    assert_eq!(done["totals"]["CONFIRMED"], 200, "{}", done["totals"]);
    let limits = svc.cli(&["keys", "limits", &prefix]).await?;
    assert!(
        limits.stdout.contains(&format!("spent {},", 201 * rent)),
        "{}",
        limits.stdout
    );
    // The budget has room for no more accounts.
    let refused = api.post("/payouts", &fresh_payout(&mint, 2)).await?;
    refused.assert_error(403, "FORBIDDEN")?;
    assert!(refused.text.contains("native"), "{}", refused.text);
    Ok(())
}

/// A payout of 1 token unit of `mint` to each of `n` fresh addresses.
fn fresh_payout(mint: &Pubkey, n: usize) -> Value {
    let items: Vec<Value> = (0..n)
        .map(|_| {
            json!({"to": Pubkey::new_unique().to_string(), "asset": "spl",
                "token": mint.to_string(), "amount": "1"})
        })
        .collect();
    json!({"chain": CHAIN, "items": items})
}

on_both_backends!(rent_is_sol_sent_to_the_new_accounts_owner);
