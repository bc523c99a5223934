//! Every kind of write from an HSM wallet, signed by the token and read back on the nodes:
//! an approval, a contract call and a swap on anvil, a send and a swap on the Solana node.

use std::str::FromStr as _;

use alloy::primitives::{Address, U256, utils::parse_ether};
use anyhow::Context as _;
use sea_orm::ConnectionTrait as _;
use serde_json::{Value, json};
use solana_pubkey::Pubkey;
use solana_rpc_client::nonblocking::rpc_client::RpcClient;
use walletops_tests::{
    Backend, Rest, Service, anvil::Anvil, fakes::jupiter::JupiterFake, on_both_backends, softhsm,
    softhsm::SoftHsm, solana_node as sn, solana_node::SolanaNode, venue::Venue,
};

use super::{funded_evm_wallet, hsm_wallet};

/// Posts `body` to `path` and waits for the write to be confirmed: its record.
async fn confirmed(api: &Rest, path: &str, body: Value) -> anyhow::Result<Value> {
    let reply = api.post(path, &body).await?;
    anyhow::ensure!(reply.status == 200, "{path}: {}", reply.text);
    let id = reply.body["id"].as_str().context("an id")?;
    api.wait_for_status(id, "CONFIRMED").await
}

async fn approvals_calls_and_swaps_from_an_hsm_wallet_are_mined(b: Backend) -> anyhow::Result<()> {
    let token = SoftHsm::start()?;
    let anvil = Anvil::start().await?;
    let venue = Venue::open(&anvil, "HSW", 10).await?;
    let erc20 = anvil.deploy_token("HSA", 18).await?;
    let counter = anvil.deploy_counter().await?;
    let (name, value) = token.env();
    let options = anvil.service_options(
        &format!("{}{}", token.toml(), venue.toml()),
        &[(name.as_str(), value.as_str())],
    );
    let svc = Service::start_with(b, options).await?;
    let (wallet, _) = funded_evm_wallet(&svc, &token, &anvil, 10u128.pow(19)).await?;
    let api = svc.rest(&svc.api_key);
    let spender: Address = "0x2222222222222222222222222222222222222222".parse()?;
    confirmed(
        &api,
        "/token/approve",
        json!({"chain": "anvil", "token": erc20.to_string(), "spender": spender.to_string(),
               "amount": "777"}),
    )
    .await?;
    assert_eq!(
        anvil.allowance(erc20, wallet, spender).await?,
        U256::from(777)
    );
    confirmed(
        &api,
        "/contracts/send",
        json!({"chain": "anvil", "to": counter.to_string(), "function": "add(uint256)",
               "args": ["7"]}),
    )
    .await?;
    let (count, _, caller) = anvil.counter_state(counter).await?;
    assert_eq!(
        (count, caller),
        (U256::from(7), wallet),
        "called by the wallet"
    );
    let swap = confirmed(
        &api,
        "/trade/swap",
        json!({"chain": "anvil", "fromToken": "NATIVE", "toToken": venue.token.to_string(),
               "amount": parse_ether("1")?.to_string()}),
    )
    .await?;
    let bought = anvil.token_balance(venue.token, wallet).await?;
    assert!(bought > U256::ZERO, "the swap bought tokens");
    assert_eq!(swap["dstAmount"], bought.to_string(), "{swap}");
    assert_eq!(
        anvil.nonce(wallet).await?,
        3,
        "three writes, all signed by the token"
    );
    Ok(())
}

async fn a_solana_send_and_swap_from_an_hsm_wallet_land(b: Backend) -> anyhow::Result<()> {
    let token = SoftHsm::start()?;
    let node = SolanaNode::start("127.0.0.1:0".parse()?).await?;
    let (jupiter, mint) =
        JupiterFake::with_new_pool(&node, 100_000_000_000, 1_000_000_000_000, 6).await?;
    let mut options = node.service_options(
        &format!("[chains.solana]\nrpc_url = \"{}\"\n", node.url()),
        &format!(
            "{}[trade.solana]\nbase_url = \"{}\"\n",
            token.toml(),
            jupiter.url()
        ),
    );
    options.env.push(token.env());
    let svc = Service::start_with(b, options).await?;
    let (address, id) = hsm_wallet(&svc, &token, "solana").await?;
    let wallet = Pubkey::from_str(&address)?;
    node.airdrop(&wallet, 10_000_000_000)?;
    let api = svc.rest(&svc.api_key);
    let rpc = RpcClient::new(node.url());
    let to = Pubkey::new_unique();
    confirmed(
        &api,
        "/send",
        json!({"chain": "solana-devnet", "to": to.to_string(), "asset": "native",
               "amount": "5000000"}),
    )
    .await?;
    assert_eq!(rpc.get_balance(&to).await?, 5_000_000);
    let swap = confirmed(
        &api,
        "/trade/swap",
        json!({"chain": "solana", "fromToken": "NATIVE", "toToken": mint.to_string(),
               "amount": "1000000000"}),
    )
    .await?;
    assert_eq!(swap["from"], address.as_str(), "{swap}");
    let bought = sn::token_balance(&rpc, &wallet, &mint).await?;
    assert!(bought > 0, "the swap bought tokens");
    assert_eq!(swap["dstAmount"], bought.to_string(), "{swap}");
    let probed = token.probe_key(&id)?;
    assert!(probed.contains("value: refused"), "{probed}");

    // A wallet whose label names another key pair of the token (a record an operator's SQL
    // mixed up): the device signs, the signature does not verify under the wallet's key,
    // and nothing is sent. The answer names no module, token or device error.
    let mut svc = svc;
    let (_, other) = hsm_wallet(&svc, &token, "solana").await?;
    svc.database()
        .await?
        .execute_unprepared(&format!(
            "UPDATE wallets SET provider_wallet_id = '{other}' WHERE address = '{address}'"
        ))
        .await?;
    svc.restart().await?;
    let api = svc.rest(&svc.api_key);
    let before = rpc.get_balance(&to).await?;
    let reply = api
        .post(
            "/send",
            &json!({"chain": "solana-devnet", "from": address, "to": to.to_string(),
                    "asset": "native", "amount": "5000000"}),
        )
        .await?;
    reply.assert_error(503, "SERVICE_UNAVAILABLE")?;
    assert!(reply.text.contains("does not verify"), "{}", reply.text);
    assert!(
        !reply.text.contains(softhsm::MODULE) && !reply.text.contains(softhsm::LABEL),
        "no HSM details: {}",
        reply.text
    );
    assert_eq!(rpc.get_balance(&to).await?, before, "nothing sent");
    Ok(())
}

on_both_backends!(
    approvals_calls_and_swaps_from_an_hsm_wallet_are_mined,
    a_solana_send_and_swap_from_an_hsm_wallet_land,
);
