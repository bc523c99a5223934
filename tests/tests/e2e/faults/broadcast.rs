//! A chain's several RPC URLs: a send is broadcast to every one of them.

use alloy::primitives::{hex, keccak256, utils::parse_ether};
use serde_json::json;
use walletops_tests::{
    Backend, Service,
    anvil::Anvil,
    gateway::{Gateway, Sends},
    on_one_backend,
};

/// A send goes to every RPC URL of its chain, not only to the first that answers: the second
/// URL's gateway, which keeps what it is sent, holds the very bytes the first one passed on.
async fn a_send_is_broadcast_to_every_rpc_url(b: Backend) -> anyhow::Result<()> {
    let anvil = Anvil::start().await?;
    let (first, second) = (
        Gateway::start(anvil.url()).await?,
        Gateway::start(anvil.url()).await?,
    );
    second.set(Sends::Refuse);
    let options = anvil.service_options_over(&[first.url(), second.url()], "", &[]);
    let svc = Service::start_with(b, options).await?;
    let api = svc.rest(&svc.api_key);
    anvil.fund_default_wallet(&api, parse_ether("1")?).await?;
    let reply = api
        .post(
            "/send",
            &json!({"chain": "anvil", "to": "0x1111111111111111111111111111111111111111",
                    "asset": "native", "amount": "1000"}),
        )
        .await?;
    assert_eq!(reply.status, 200, "{}", reply.text);
    api.wait_for_status(reply.body["id"].as_str().unwrap_or_default(), "CONFIRMED")
        .await?;
    let kept = second.refused();
    let [raw] = kept.as_slice() else {
        panic!(
            "the second URL was sent {} transactions, not one",
            kept.len()
        );
    };
    let hash = keccak256(hex::decode(raw)?);
    assert_eq!(reply.body["hash"], hash.to_string());
    Ok(())
}

on_one_backend!(a_send_is_broadcast_to_every_rpc_url);
