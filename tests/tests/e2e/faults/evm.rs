//! EVM sends under RPC faults: 200 at once, over anvil.

use alloy::primitives::{Address, U256, utils::parse_ether};
use serde_json::json;
use walletops_tests::{
    Backend, Service,
    anvil::{Anvil, MIXED_MINING},
    faults::{Fault, FaultProxy},
};

use super::{REQUEST_TIMEOUT, Route, send_through, under_http_faults};

const SENDS: u64 = 200;

/// Wei each send pays.
const AMOUNT: u64 = 1_000;

async fn sends_survive(fault: Fault, route: Route, b: Backend) -> anyhow::Result<()> {
    let anvil = Anvil::start_with(MIXED_MINING).await?;
    let proxy = FaultProxy::start(anvil.url()).await?;
    let urls = match route {
        Route::Only => vec![proxy.url()],
        Route::First => vec![proxy.url(), anvil.url()],
    };
    // A transaction anvil keeps queued for good (see MIXED_MINING) is replaced soon.
    let options = anvil.service_options_over(
        &urls,
        "[monitor]\npoll_interval_ms = 200\nstuck_after_secs = 3\n",
        &[(
            "WALLETOPS_REQUEST_TIMEOUT_SECS",
            &REQUEST_TIMEOUT.as_secs().to_string(),
        )],
    );
    let svc = Service::start_with(b, options).await?;
    let api = svc.rest(&svc.api_key);
    let wallet = anvil.fund_default_wallet(&api, parse_ether("1")?).await?;
    // A recipient of its own: its balance counts this test's payments alone.
    let recipient = Address::from_slice(&uuid::Uuid::new_v4().as_bytes()[..].repeat(2)[..20]);
    let send = json!({"chain": "anvil", "to": recipient.to_string(), "asset": "native",
                      "amount": AMOUNT.to_string()});
    let ids = send_through(&proxy, fault, &api, SENDS, &send).await?;
    for id in &ids {
        api.wait_for_status(id, "CONFIRMED").await?;
    }
    // No payment twice, no nonce skipped: exactly one transaction mined per key.
    assert_eq!(
        anvil.balance(recipient).await?,
        U256::from(SENDS * AMOUNT),
        "the recipient got more or less than one payment per key"
    );
    assert_eq!(anvil.nonce(wallet).await?, SENDS);
    Ok(())
}

under_http_faults! {
    a_node_behind_first: Stale, First;
    a_node_behind_alone: Stale, Only;
}
