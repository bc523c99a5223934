//! RPC faults under load. The chain's first RPC URL goes through a fault-injection proxy, the
//! second straight to the node; with a fault injected, 200 keyed sends go out at once, each
//! retried by its client under the same key until it is answered. Under every fault: each
//! answer comes within the request timeout, no payment is made twice, no nonce is skipped, no
//! record is lost, and every record is final once the fault clears.

use std::time::{Duration, Instant};

use alloy::primitives::{Address, U256, utils::parse_ether};
use serde_json::json;
use walletops_tests::{
    Backend, Rest, Service, WAIT_TIMEOUT,
    anvil::{Anvil, MIXED_MINING},
    faults::{Fault, FaultProxy},
    on_both_backends, poll_until,
};

const SENDS: u64 = 200;

/// Wei each send pays.
const AMOUNT: u64 = 1_000;

/// The service's request timeout in these tests (its default).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// How much later than the request timeout an answer may arrive: the edge's own work and
/// the loopback hop, on a loaded machine.
const ANSWER_MARGIN: Duration = Duration::from_secs(3);

/// Pays `AMOUNT` to `to` once, as a client that retries would: under one idempotency key
/// while the outcome is unknown (a timeout, 503, 429), under a new key only once the service
/// says the key's request failed for good (409 `IDEMPOTENT_REPLAY`: nothing was signed).
/// The record's id. Every answer, accepted or not, must come within the request timeout.
async fn pay_once(api: &Rest, to: Address) -> anyhow::Result<String> {
    let body = json!({"chain": "anvil", "to": to.to_string(), "asset": "native",
                      "amount": AMOUNT.to_string()})
    .to_string();
    let deadline = Instant::now() + WAIT_TIMEOUT * 2;
    let mut key = uuid::Uuid::new_v4().to_string();
    loop {
        let asked = Instant::now();
        let reply = api.post_with_key("/send", &key, &body).await;
        let took = asked.elapsed();
        anyhow::ensure!(
            took <= REQUEST_TIMEOUT + ANSWER_MARGIN,
            "send {key} was answered after {took:?}"
        );
        match reply {
            Ok(reply) if reply.status == 200 => {
                return Ok(reply.body["id"].as_str().unwrap_or_default().to_owned());
            }
            Ok(reply) if reply.code() == Some("IDEMPOTENT_REPLAY") => {
                key = uuid::Uuid::new_v4().to_string();
            }
            // Refusals a client retries: a spent budget, a node unreachable or slow.
            Ok(reply) if matches!(reply.status.as_u16(), 429 | 502 | 503) => {}
            Ok(reply) => anyhow::bail!("send {key} refused: {} {}", reply.status, reply.text),
            Err(_) => {}
        }
        anyhow::ensure!(Instant::now() < deadline, "send {key} never accepted");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// How the service reaches the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    /// Through the proxy alone: nothing to fail over to.
    Only,
    /// Through the proxy first, straight to the node second.
    First,
}

/// Faulted calls after which `fault` clears: well into the sends. Stalled calls hold the
/// node's few connections (and every call queued behind them) for 20 s each: a few suffice.
fn faulted_calls(fault: Fault) -> u64 {
    match fault {
        Fault::Stall => 4,
        _ => 20,
    }
}

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
    proxy.inject(fault).await?;
    let sending = tokio::spawn(futures::future::join_all((0..SENDS).map(|_| {
        let api = api.clone();
        async move { pay_once(&api, recipient).await }
    })));
    // The fault lasts until it has met a number of calls (or the sends are all answered:
    // failing over, the service stops calling the faulty URL), the sends in flight meanwhile.
    poll_until("calls to meet the fault", || async {
        Ok((proxy.faulted() >= faulted_calls(fault) || sending.is_finished()).then_some(()))
    })
    .await?;
    proxy.clear().await?;
    assert!(proxy.faulted() > 0, "no call met the fault");
    let sent = sending.await?;
    let mut ids = Vec::new();
    for id in sent {
        ids.push(id?);
    }
    // No record lost: one per key.
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len() as u64, SENDS);
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

/// A test per fault and route.
macro_rules! under_faults {
    ($($name:ident: $fault:ident, $route:ident;)+) => {
        $(
            async fn $name(b: Backend) -> anyhow::Result<()> {
                sends_survive(Fault::$fault, Route::$route, b).await
            }
        )+
        on_both_backends!($($name,)+);
    };
}

under_faults! {
    server_errors_fail_over: ServerError, First;
    server_errors_on_the_only_url: ServerError, Only;
    rate_limits_fail_over: RateLimited, First;
    rate_limits_on_the_only_url: RateLimited, Only;
    reset_connections_fail_over: Reset, First;
    reset_connections_on_the_only_url: Reset, Only;
    stalled_answers_fail_over: Stall, First;
    stalled_answers_on_the_only_url: Stall, Only;
    truncated_answers_fail_over: Truncated, First;
    truncated_answers_on_the_only_url: Truncated, Only;
    a_node_behind_first: Stale, First;
    a_node_behind_alone: Stale, Only;
}
