//! Webhooks: endpoints managed over REST, gRPC and the CLI, and deliveries checked by a
//! receiver that verifies every signature (`walletops_tests::webhooks`): every event, in
//! order per transaction, the same `webhook-id` on every attempt, after a crash too, once
//! across cores, dead-lettered and replayed.

mod delivery;
mod fairness;
mod management;
mod ownership;
mod targets;

use alloy::primitives::utils::parse_ether;
use serde_json::json;
use walletops_tests::{Backend, Options, Rest, Service, anvil::Anvil, webhooks::Received};

/// Fast retries: the first after 200 ms, none more than a second apart; an endpoint has two
/// seconds to answer.
const FAST_RETRIES: [(&str, &str); 3] = [
    ("WALLETOPS_WEBHOOKS__FIRST_RETRY_MS", "200"),
    ("WALLETOPS_WEBHOOKS__MAX_RETRY_INTERVAL_SECS", "1"),
    ("WALLETOPS_WEBHOOKS__TIMEOUT_SECS", "2"),
];

/// A service on `anvil` with fast retries, `env` besides.
fn options(anvil: &Anvil, env: &[(&str, &str)]) -> Options {
    let all: Vec<(&str, &str)> = FAST_RETRIES.iter().chain(env).copied().collect();
    anvil.service_options("", &all)
}

/// A service on a new anvil, its default wallet funded.
async fn funded(b: Backend, env: &[(&str, &str)]) -> anyhow::Result<(Anvil, Service)> {
    let anvil = Anvil::start().await?;
    let svc = Service::start_with(b, options(&anvil, env)).await?;
    anvil
        .fund_default_wallet(&svc.rest(&svc.api_key), parse_ether("10")?)
        .await?;
    Ok((anvil, svc))
}

/// Sends 1000 wei on anvil; the record's id.
pub(crate) async fn send(api: &Rest) -> anyhow::Result<String> {
    let reply = api
        .post(
            "/send",
            &json!({"chain": "anvil", "to": "0x1111111111111111111111111111111111111111",
                    "asset": "native", "amount": "1000"}),
        )
        .await?;
    anyhow::ensure!(reply.status == 200, "{}", reply.text);
    Ok(reply.body["id"].as_str().unwrap_or_default().to_owned())
}

/// Whether `received` has taken the submitted and confirmed events of each of `ids`.
fn all_settled(received: &[Received], ids: &[String]) -> bool {
    ids.iter().all(|id| {
        ["transaction.submitted", "transaction.confirmed"]
            .iter()
            .all(|t| {
                received
                    .iter()
                    .any(|d| d.taken() && d.transaction() == id && d.event_type() == *t)
            })
    })
}

/// Every delivery verified; per transaction, the taken ones in event order (submitted
/// before confirmed), each event taken once.
fn verified_and_in_order(received: &[Received], ids: &[String]) {
    assert!(
        received.iter().all(|d| d.verified),
        "a delivery failed verification: {received:?}"
    );
    for id in ids {
        let taken: Vec<String> = received
            .iter()
            .filter(|d| d.taken() && d.transaction() == id)
            .map(Received::event_type)
            .collect();
        assert_eq!(
            taken,
            ["transaction.submitted", "transaction.confirmed"],
            "{id}"
        );
    }
}
