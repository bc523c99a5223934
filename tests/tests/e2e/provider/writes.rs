//! Writes from provider wallets, signed by the provider and landed on the nodes: approvals,
//! contract calls, swaps on anvil and Solana, and a Solana send.

use alloy::primitives::utils::parse_ether;
use serde_json::json;
use walletops_tests::{
    Backend, anvil::Anvil, on_both_backends, solana_node::SolanaNode, venue::Venue,
};

use super::{DID, Linked};

async fn approvals_and_contract_calls_from_a_provider_wallet_are_mined(
    b: Backend,
) -> anyhow::Result<()> {
    let linked = Linked::open(b, |_| {}).await?;
    let token = linked.anvil.deploy_token("PRV", 18).await?;
    let counter = linked.anvil.deploy_counter().await?;
    let approve = linked
        .api()
        .post(
            "/token/approve",
            &json!({"chain": "anvil", "token": token.to_string(),
                    "spender": "0x2222222222222222222222222222222222222222", "amount": "777"}),
        )
        .await?;
    anyhow::ensure!(approve.body["status"] == "SUBMITTED", "{approve:?}");
    let call = linked
        .api()
        .post(
            "/contracts/send",
            &json!({"chain": "anvil", "to": counter.to_string(), "function": "add(uint256)", "args": ["7"]}),
        )
        .await?;
    anyhow::ensure!(call.body["status"] == "SUBMITTED", "{call:?}");
    for reply in [approve, call] {
        let id = reply.body["id"].as_str().unwrap_or_default();
        linked.api().wait_for_status(id, "CONFIRMED").await?;
    }
    assert_eq!(
        linked.anvil.nonce(linked.wallet).await?,
        2,
        "both from the provider wallet"
    );
    assert_eq!(linked.privy.rpc_calls(), 2);
    Ok(())
}

async fn a_swap_from_a_provider_wallet_is_signed_by_the_provider(b: Backend) -> anyhow::Result<()> {
    // The pool and its aggregator go up before the service, which is pointed at them.
    let anvil_first = Anvil::start().await?;
    let venue = Venue::open(&anvil_first, "PSW", 10).await?;
    let token = venue.token;
    let linked = Linked::on(b, anvil_first, &venue.toml(), |_| {}).await?;
    linked.link().await?;
    let reply = linked
        .api()
        .post(
            "/trade/swap",
            &json!({"chain": "anvil", "fromToken": "NATIVE", "toToken": token.to_string(),
                    "amount": parse_ether("1")?.to_string()}),
        )
        .await?;
    anyhow::ensure!(reply.body["status"] == "SUBMITTED", "{reply:?}");
    let id = reply.body["id"].as_str().unwrap_or_default();
    let record = linked.api().wait_for_status(id, "CONFIRMED").await?;
    let bought = linked.anvil.token_balance(token, linked.wallet).await?;
    assert_eq!(record["dstAmount"], bought.to_string(), "{record}");
    assert_eq!(linked.privy.rpc_calls(), 1, "signed by the provider");
    Ok(())
}

async fn a_solana_swap_from_a_provider_wallet_lands(b: Backend) -> anyhow::Result<()> {
    use walletops_tests::{fakes::jupiter::JupiterFake, solana_node as sn};
    let node = SolanaNode::start("127.0.0.1:0".parse()?).await?;
    let rpc = solana_rpc_client::nonblocking::rpc_client::RpcClient::new(node.url());
    let (jupiter, mint) =
        JupiterFake::with_new_pool(&node, 100_000_000_000, 1_000_000_000_000, 6).await?;
    let mut sol = None;
    let linked = Linked::unlinked(
        b,
        &format!(
            "[chains.solana]\nrpc_url = \"{}\"\n[trade.solana]\nbase_url = \"{}\"\n",
            node.url(),
            jupiter.url()
        ),
        &[],
        |privy| sol = Some(privy.add_embedded_solana(DID, 0, true).0),
    )
    .await?;
    let sol = sol.expect("a Solana wallet");
    linked.link().await?;
    node.airdrop(&sol, 10_000_000_000)?;
    let reply = linked
        .api()
        .post(
            "/trade/swap",
            &json!({"chain": "solana", "fromToken": "NATIVE", "toToken": mint.to_string(),
                    "amount": "1000000000"}),
        )
        .await?;
    anyhow::ensure!(reply.body["status"] == "SUBMITTED", "{reply:?}");
    let id = reply.body["id"].as_str().unwrap_or_default();
    let record = linked.api().wait_for_status(id, "CONFIRMED").await?;
    assert_eq!(record["from"], sol.to_string(), "{record}");
    let bought = sn::token_balance(&rpc, &sol, &mint).await?;
    assert_eq!(record["dstAmount"], bought.to_string(), "{record}");
    assert_eq!(linked.privy.rpc_calls(), 1, "signed by the provider");
    Ok(())
}

async fn a_solana_send_from_a_provider_wallet_lands(b: Backend) -> anyhow::Result<()> {
    let node = SolanaNode::start("127.0.0.1:0".parse()?).await?;
    let mut sol = None;
    let linked = Linked::unlinked(
        b,
        &format!("[chains.solana-devnet]\nrpc_url = \"{}\"\n", node.url()),
        &[],
        |privy| sol = Some(privy.add_embedded_solana(DID, 0, true).0),
    )
    .await?;
    let sol = sol.expect("a Solana wallet");
    linked.link().await?;
    node.airdrop(&sol, 1_000_000_000)?;
    let to = solana_pubkey::Pubkey::new_unique();
    let reply = linked
        .api()
        .post(
            "/send",
            &json!({"chain": "solana-devnet", "to": to.to_string(), "asset": "native", "amount": "1234567"}),
        )
        .await?;
    anyhow::ensure!(reply.body["status"] == "SUBMITTED", "{reply:?}");
    let id = reply.body["id"].as_str().unwrap_or_default();
    let record = linked.api().wait_for_status(id, "CONFIRMED").await?;
    assert_eq!(record["from"], sol.to_string(), "{record}");
    let rpc = solana_rpc_client::nonblocking::rpc_client::RpcClient::new(node.url());
    assert_eq!(rpc.get_balance(&to).await?, 1_234_567);
    Ok(())
}

on_both_backends!(
    approvals_and_contract_calls_from_a_provider_wallet_are_mined,
    a_swap_from_a_provider_wallet_is_signed_by_the_provider,
    a_solana_swap_from_a_provider_wallet_lands,
    a_solana_send_from_a_provider_wallet_lands,
);
