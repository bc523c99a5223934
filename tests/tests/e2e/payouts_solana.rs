//! Payouts on the Solana test node: items of one asset packed several to a transaction,
//! each item following its transaction, every recipient paid exactly once (balances read on
//! the node), recipients' token accounts made by the payer.

use std::str::FromStr;

use anyhow::Context as _;
use serde_json::{Value, json};
use solana_keypair::Keypair;
use solana_pubkey::Pubkey;
use solana_rpc_client::nonblocking::rpc_client::RpcClient;
use solana_signer::Signer as _;
use walletops_tests::{
    Backend, Service, on_both_backends, poll_until,
    solana_node::{self as sol, SolanaNode},
};

const SOL: u64 = 1_000_000_000;

async fn a_solana_payout_packs_items_and_pays_each_once(b: Backend) -> anyhow::Result<()> {
    let node = SolanaNode::start("127.0.0.1:0".parse()?).await?;
    let svc = Service::start_with(b, node.service_options("", "")).await?;
    let api = svc.rest(&svc.api_key);
    let wallet = Pubkey::from_str(&api.default_wallet("solana").await?)?;
    node.airdrop(&wallet, 10 * SOL)?;
    let rpc = RpcClient::new(node.url());
    let payer = Keypair::new();
    node.airdrop(&payer.pubkey(), 10 * SOL)?;
    let mint = sol::create_mint(&rpc, &payer, &spl_token_interface::ID, 6).await?;
    sol::mint_to(&rpc, &payer, &mint, &wallet, 1_000_000_000).await?;
    // 150 SOL items and 50 token items, interleaved, each to a recipient of its own.
    let recipients: Vec<Pubkey> = (0..200).map(|_| Pubkey::new_unique()).collect();
    let amount = |k: usize| {
        if k % 4 == 3 {
            1_000 + k as u64
        } else {
            SOL / 1000 + k as u64
        }
    };
    let items: Vec<Value> = recipients
        .iter()
        .enumerate()
        .map(|(k, to)| {
            if k % 4 == 3 {
                json!({"to": to.to_string(), "asset": "spl", "token": mint.to_string(), "amount": amount(k).to_string()})
            } else {
                json!({"to": to.to_string(), "asset": "native", "amount": amount(k).to_string()})
            }
        })
        .collect();
    let made = api
        .post(
            "/payouts",
            &json!({"chain": "solana-devnet", "items": items}),
        )
        .await?;
    assert_eq!(made.status, 202, "{}", made.text);
    let id = made.body["id"].as_str().context("an id")?.to_owned();
    let done = poll_until("the payout to complete", || async {
        let p = api.get(&format!("/payouts/{id}")).await?;
        Ok((p.body["state"] == "COMPLETED").then_some(p.body))
    })
    .await?;
    assert_eq!(done["totals"]["CONFIRMED"], 200, "{}", done["totals"]);
    // Packed: several items to a transaction, of one asset each.
    let transactions = done["transactionCount"].as_u64().context("a count")?;
    assert!(
        (10..=40).contains(&transactions),
        "{transactions} transactions for 200 items"
    );
    let mut by_hash: std::collections::HashMap<String, Vec<&Value>> = Default::default();
    for item in done["items"].as_array().context("items")? {
        let hash = item["hash"].as_str().context("a signature")?.to_owned();
        by_hash.entry(hash).or_default().push(item);
    }
    assert_eq!(by_hash.len() as u64, transactions);
    for (hash, items) in &by_hash {
        assert!(
            items.iter().all(|i| i["asset"] == items[0]["asset"]),
            "{hash} moves two assets"
        );
    }
    // Every recipient paid exactly its amount, once.
    for (k, to) in recipients.iter().enumerate() {
        let held = if k % 4 == 3 {
            sol::token_balance(&rpc, to, &mint).await?
        } else {
            rpc.get_balance(to).await?
        };
        assert_eq!(held, amount(k), "recipient {k} paid exactly once");
    }
    Ok(())
}

on_both_backends!(a_solana_payout_packs_items_and_pays_each_once);
