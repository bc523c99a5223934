//! Fee caps from the first signature: a node answering absurd fees, alone or among a chain's
//! RPC URLs, never gets a transaction signed above the operator's caps.

use alloy::primitives::{Address, utils::parse_ether};
use serde_json::{Value, json};
use walletops_tests::{
    Backend, Rest, Service,
    anvil::{Anvil, quantity},
    faults::{Fault, FaultProxy},
    poll_until,
};

const GWEI: u128 = 1_000_000_000;

fn send() -> Value {
    json!({"chain": "anvil", "to": super::RECIPIENT, "asset": "native", "amount": "1000"})
}

/// A service reaching anvil over `urls` with `caps_toml` in `[monitor]`, its wallet funded.
async fn service(
    anvil: &Anvil,
    urls: &[&str],
    caps_toml: &str,
) -> anyhow::Result<(Service, Address)> {
    let options = anvil.service_options_over(urls, &format!("[monitor]\n{caps_toml}\n"), &[]);
    let svc = Service::start_with(Backend::Sqlite, options).await?;
    let wallet = anvil
        .fund_default_wallet(&svc.rest(&svc.api_key), parse_ether("1")?)
        .await?;
    Ok((svc, wallet))
}

/// Asserts the send is refused 503 in words holding each of `words`, nothing signed.
async fn refused(api: &Rest, anvil: &Anvil, wallet: Address, words: &[&str]) -> anyhow::Result<()> {
    let unavailable = (503, "SERVICE_UNAVAILABLE");
    anvil
        .assert_refused(wallet, api, ("/send", &send()), unavailable, words)
        .await
}

/// The fees transaction `id` was signed with, read from the node: (max fee, tip) in wei.
async fn signed_fees(api: &Rest, anvil: &Anvil, id: &str) -> anyhow::Result<(u128, u128)> {
    let record = api.wait_for_status(id, "CONFIRMED").await?;
    let tx = anvil
        .rpc("eth_getTransactionByHash", json!([record["hash"]]))
        .await?;
    Ok((
        quantity(&tx["maxFeePerGas"])?,
        quantity(&tx["maxPriorityFeePerGas"])?,
    ))
}

/// Sends until the service accepts (a fee reading is reused for a second); the record's id.
async fn accepted(api: &Rest) -> anyhow::Result<String> {
    poll_until("the send to be accepted", || async {
        let reply = api.post("/send", &send()).await?;
        Ok((reply.status == 200).then(|| reply.body["id"].as_str().unwrap_or_default().to_owned()))
    })
    .await
}

#[tokio::test]
async fn a_base_fee_above_the_cap_refuses_the_first_write_naming_chain_and_cap()
-> anyhow::Result<()> {
    let anvil = Anvil::start().await?;
    let proxy = FaultProxy::start(anvil.url()).await?;
    let (svc, wallet) = service(&anvil, &[proxy.url()], "max_fee_per_gas_gwei = 1000").await?;
    let api = svc.rest(&svc.api_key);
    proxy
        .inject(Fault::Fees {
            base_gwei: 5000,
            tip_gwei: 1,
        })
        .await?;
    refused(&api, &anvil, wallet, &["anvil", "1000 gwei", "5000 gwei"]).await?;
    // Once the fee falls, the same write goes through.
    proxy.clear().await?;
    let id = accepted(&api).await?;
    let (max_fee, _) = signed_fees(&api, &anvil, &id).await?;
    assert!(max_fee <= 1000 * GWEI);
    Ok(())
}

#[tokio::test]
async fn an_absurd_tip_is_held_to_the_priority_cap_from_the_first_signature() -> anyhow::Result<()>
{
    let anvil = Anvil::start().await?;
    let proxy = FaultProxy::start(anvil.url()).await?;
    let caps = "max_fee_per_gas_gwei = 50\nmax_priority_fee_per_gas_gwei = 2";
    let (svc, _) = service(&anvil, &[proxy.url()], caps).await?;
    let api = svc.rest(&svc.api_key);
    proxy
        .inject(Fault::Fees {
            base_gwei: 1,
            tip_gwei: 900,
        })
        .await?;
    let id = accepted(&api).await?;
    let (max_fee, tip) = signed_fees(&api, &anvil, &id).await?;
    assert_eq!(tip, 2 * GWEI, "the tip is the priority cap");
    assert!(max_fee <= 50 * GWEI, "max fee {max_fee} above the cap");
    Ok(())
}

#[tokio::test]
async fn rpc_urls_that_disagree_about_fees_are_not_trusted() -> anyhow::Result<()> {
    let anvil = Anvil::start().await?;
    let proxy = FaultProxy::start(anvil.url()).await?;
    proxy
        .inject(Fault::Fees {
            base_gwei: 500,
            tip_gwei: 1,
        })
        .await?;
    // Under the cap, but a hundred times what the other node says.
    let (svc, wallet) = service(&anvil, &[proxy.url(), anvil.url()], "").await?;
    let api = svc.rest(&svc.api_key);
    refused(&api, &anvil, wallet, &["anvil", "disagree"]).await?;
    Ok(())
}

#[tokio::test]
async fn one_absurd_node_among_three_is_outvoted() -> anyhow::Result<()> {
    let anvil = Anvil::start().await?;
    let proxy = FaultProxy::start(anvil.url()).await?;
    proxy
        .inject(Fault::Fees {
            base_gwei: 500,
            tip_gwei: 400,
        })
        .await?;
    let (svc, _) = service(&anvil, &[proxy.url(), anvil.url(), anvil.url()], "").await?;
    let api = svc.rest(&svc.api_key);
    let id = accepted(&api).await?;
    let (max_fee, tip) = signed_fees(&api, &anvil, &id).await?;
    assert!(max_fee < 10 * GWEI, "paid the absurd node's fee: {max_fee}");
    assert!(tip < GWEI, "paid the absurd node's tip: {tip}");
    Ok(())
}
