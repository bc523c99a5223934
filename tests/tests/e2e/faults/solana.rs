//! Solana sends under RPC faults: 50 at once, over the litesvm node. (A node behind is an
//! EVM fault of the proxy: its Solana counterpart, an older slot, is not injected.)

use std::str::FromStr;

use serde_json::json;
use solana_pubkey::Pubkey;
use solana_rpc_client::nonblocking::rpc_client::RpcClient;
use walletops_tests::{
    Backend, Options, Service,
    faults::{Fault, FaultProxy},
    solana_node::SolanaNode,
};

use super::{REQUEST_TIMEOUT, Route, send_through, under_http_faults};

const SENDS: u64 = 50;

/// Lamports each send pays: above the rent-exempt minimum, so the first to land opens the
/// recipient's account whichever it is.
const AMOUNT: u64 = 1_000_000;

async fn sends_survive(fault: Fault, route: Route, b: Backend) -> anyhow::Result<()> {
    let node = SolanaNode::start("127.0.0.1:0".parse()?).await?;
    let proxy = FaultProxy::start(&node.url()).await?;
    let urls = match route {
        Route::Only => format!("\"{}\"", proxy.url()),
        Route::First => format!("\"{}\", \"{}\"", proxy.url(), node.url()),
    };
    let toml = format!(
        "request_timeout_secs = {}\n[chains.solana-devnet]\nrpc_urls = [{urls}]\n[rate_limits]\nwrites_per_minute = 1000\nreads_per_minute = 100000\n[monitor]\npoll_interval_ms = 100\n",
        REQUEST_TIMEOUT.as_secs()
    );
    let svc = Service::start_with(b, Options::with_config(toml)).await?;
    let api = svc.rest(&svc.api_key);
    let wallet = Pubkey::from_str(&api.default_wallet("solana").await?)?;
    node.airdrop(&wallet, 10_000_000_000)?;
    let recipient = Pubkey::new_unique();
    let send = json!({"chain": "solana-devnet", "to": recipient.to_string(), "asset": "native",
                      "amount": AMOUNT.to_string()});
    let ids = send_through(&proxy, fault, &api, SENDS, &send).await?;
    for id in &ids {
        api.wait_for_status(id, "CONFIRMED").await?;
    }
    // No payment twice, none lost.
    let paid = RpcClient::new(node.url()).get_balance(&recipient).await?;
    assert_eq!(
        paid,
        SENDS * AMOUNT,
        "the recipient got more or less than one payment per send"
    );
    Ok(())
}

under_http_faults! {}
