//! RPC faults under load. The chain's RPC URL goes through a fault-injection proxy (alone, or
//! first of two, the second straight to the node); with a fault injected, keyed sends go out
//! at once, each retried by its client until it is answered. Under every fault: each answer
//! comes within the request timeout, no payment is made twice, no nonce is skipped, no record
//! is lost, and every record is final once the fault clears.

mod broadcast;
mod evm;
mod solana;

use std::time::{Duration, Instant};

use serde_json::Value;
use walletops_tests::{
    Rest, WAIT_TIMEOUT,
    faults::{Fault, FaultProxy},
    poll_until,
};

/// The service's request timeout in these tests (its default).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// How much later than the request timeout an answer may arrive: the edge's own work and
/// the loopback hop, on a loaded machine.
const ANSWER_MARGIN: Duration = Duration::from_secs(3);

/// Makes the send `body` once, as a client that retries would: under one idempotency key
/// while the outcome is unknown (a timeout, 503, 429), under a new key only once the service
/// says the key's request failed for good (409 `IDEMPOTENT_REPLAY`: nothing was signed).
/// The record's id. Every answer, accepted or not, must come within the request timeout.
async fn pay_once(api: &Rest, body: &Value) -> anyhow::Result<String> {
    let body = body.to_string();
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

/// Makes `sends` sends of `body` at once with `fault` injected in `proxy` until it has met
/// enough calls (or every send is answered: failing over, the service stops calling the
/// faulty URL); the records' ids, one per send, checked distinct.
async fn send_through(
    proxy: &FaultProxy,
    fault: Fault,
    api: &Rest,
    sends: u64,
    body: &Value,
) -> anyhow::Result<Vec<String>> {
    proxy.inject(fault).await?;
    let sending = tokio::spawn(futures::future::join_all((0..sends).map(|_| {
        let (api, body) = (api.clone(), body.clone());
        async move { pay_once(&api, &body).await }
    })));
    poll_until("calls to meet the fault", || async {
        Ok((proxy.faulted() >= faulted_calls(fault) || sending.is_finished()).then_some(()))
    })
    .await?;
    proxy.clear().await?;
    assert!(proxy.faulted() > 0, "no call met the fault");
    let mut ids = Vec::new();
    for id in sending.await? {
        ids.push(id?);
    }
    // No record lost: one per send.
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len() as u64, sends);
    Ok(ids)
}

/// A test per fault and route, of `sends_survive` of the enclosing module.
macro_rules! under_faults {
    ($($name:ident: $fault:ident, $route:ident;)+) => {
        $(
            async fn $name(b: walletops_tests::Backend) -> anyhow::Result<()> {
                sends_survive(
                    walletops_tests::faults::Fault::$fault,
                    super::Route::$route,
                    b,
                )
                .await
            }
        )+
        walletops_tests::on_one_backend!($($name,)+);
    };
}
use under_faults;

/// `under_faults!` for every fault of the HTTP layer, by both routes, and the `extra` tests.
macro_rules! under_http_faults {
    ($($name:ident: $fault:ident, $route:ident;)*) => {
        super::under_faults! {
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
            $($name: $fault, $route;)*
        }
    };
}
use under_http_faults;
