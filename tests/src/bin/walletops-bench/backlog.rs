//! The monitor at scale: open records held unmined by an anvil that does not mine, sent from
//! many wallets through a gateway that counts the service's requests to the node. At each
//! backlog size the service's monitor sweeps for a while, and its metrics say how many sweeps
//! it made, how long they took and how many records they took up; with the gateway's count
//! and the service's CPU that gives a sweep's wall time, node requests per sweep and CPU per
//! record swept, in the steady state (after one pass of the monitor over the backlog).

use std::{
    sync::atomic::{AtomicU64, Ordering},
    time::Duration,
};

use alloy::primitives::{Address, U256};
use anyhow::{Context, ensure};
use futures::StreamExt;
use serde_json::{Value, json};
use walletops_proto::v1 as pb;
use walletops_tests::{
    Backend, Rest, Service,
    anvil::Anvil,
    as_admin,
    gateway::Gateway,
    metrics::{monitor_sweeps, scrape_text},
    poll_until,
};

use crate::{ETH, cpu::Probe, sends::RECIPIENT};

/// Node requests per sweep, per 50 records swept: at most one.
pub(crate) const REQUESTS_PER_50_GOAL: f64 = 1.0;
/// CPU per record swept at the largest backlog over the smallest: a linear cost keeps it
/// near 1.
pub(crate) const LINEAR_GOAL: f64 = 1.5;

/// What the monitor did with `open` records held unmined.
#[derive(Debug)]
pub(crate) struct Backlog {
    pub(crate) open: u64,
    pub(crate) sweeps: f64,
    pub(crate) sweep_ms: f64,
    /// Records leased per sweep, and of them followed with calls of their own.
    pub(crate) swept: f64,
    pub(crate) full: f64,
    pub(crate) requests: f64,
    /// The service's CPU per record swept, in microseconds.
    pub(crate) cpu_us: Option<f64>,
}

impl Backlog {
    /// Node requests per sweep for each 50 records swept.
    pub(crate) fn requests_per_50(&self) -> f64 {
        50.0 * self.requests / self.swept.max(1.0)
    }

    pub(crate) fn line(&self) -> String {
        format!(
            "monitor at {:>5} open records: {:.1} sweeps, a sweep {:.1} ms over {:.0} records ({:.1} followed in full), {:.1} node requests a sweep, CPU {} a record swept",
            self.open,
            self.sweeps,
            self.sweep_ms,
            self.swept,
            self.full,
            self.requests,
            self.cpu_us
                .map_or("n/a".to_owned(), |us| format!("{us:.1} µs")),
        )
    }

    pub(crate) fn json(&self) -> Value {
        json!({
            "open_records": self.open,
            "sweeps": self.sweeps,
            "sweep_ms": self.sweep_ms,
            "records_per_sweep": self.swept,
            "followed_in_full_per_sweep": self.full,
            "node_requests_per_sweep": self.requests,
            "node_requests_per_50_records": self.requests_per_50(),
            "cpu_us_per_record": self.cpu_us,
        })
    }
}

/// `count` more EVM wallets of the service's first user, each given ether to spend.
pub(crate) async fn funded_wallets(
    svc: &Service,
    anvil: &Anvil,
    count: usize,
) -> anyhow::Result<Vec<Address>> {
    let admin = pb::admin_service_client::AdminServiceClient::new(svc.admin_channel().await?);
    let made = futures::stream::iter(0..count)
        .map(|_| {
            let mut admin = admin.clone();
            async move {
                let req = as_admin(pb::CreateWalletRequest {
                    user: "owner".to_owned(),
                    chain_type: "ethereum".to_owned(),
                    make_default: None,
                    custody: String::new(),
                })?;
                let wallet = admin.create_wallet(req).await?.into_inner();
                let address: Address = wallet
                    .wallet
                    .context("no wallet in the answer")?
                    .address
                    .parse()?;
                anvil.set_balance(address, U256::from(1000 * ETH)).await?;
                Ok::<_, anyhow::Error>(address)
            }
        })
        .buffer_unordered(8)
        .collect::<Vec<_>>()
        .await;
    made.into_iter().collect()
}

/// `n` REST sends spread over `wallets`, `concurrency` at once; each must be accepted.
async fn send_from(
    api: &Rest,
    wallets: &[Address],
    n: u64,
    concurrency: usize,
) -> anyhow::Result<()> {
    let next = AtomicU64::new(0);
    let next = &next;
    let results = futures::stream::iter(0..concurrency)
        .map(|_| async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    return Ok::<_, anyhow::Error>(());
                }
                let from = wallets[usize::try_from(i)? % wallets.len()];
                let body = json!({"chain": "anvil", "from": from.to_string(), "to": RECIPIENT,
                                  "asset": "native", "amount": "1"});
                let reply = api.post("/send", &body).await?;
                ensure!(reply.status == 200, "{} {}", reply.status, reply.text);
            }
        })
        .buffer_unordered(concurrency)
        .collect::<Vec<_>>()
        .await;
    results.into_iter().collect()
}

/// Transactions in anvil's pool, pending and queued.
async fn pooled(anvil: &Anvil) -> anyhow::Result<u64> {
    let status = anvil.rpc("txpool_status", json!([])).await?;
    let count = |v: &Value| {
        v.as_str()
            .and_then(|s| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok())
            .or_else(|| v.as_u64())
            .unwrap_or(0)
    };
    Ok(count(&status["pending"]) + count(&status["queued"]))
}

/// The monitor's sweeps at each backlog of `sizes` (ascending) open records across `wallets`
/// wallets, each watched for `window`, records counting as stuck after `stuck_after_secs`.
pub(crate) async fn monitor_at_scale(
    sizes: &[u64],
    wallets: usize,
    concurrency: usize,
    window: Duration,
    stuck_after_secs: u64,
) -> anyhow::Result<Vec<Backlog>> {
    let anvil = Anvil::start_with(&["--no-mining"]).await?;
    let gateway = Gateway::start(anvil.url()).await?;
    // With an hour's stuck time, records stay within it for the whole phase: what is measured
    // is the watching of a backlog, not its replacements (once a stuck time each).
    let options = anvil.service_options_via(
        gateway.url(),
        &format!("[monitor]\nstuck_after_secs = {stuck_after_secs}\n"),
        &[
            ("WALLETOPS_METRICS_ADDR", "127.0.0.1:0"),
            ("WALLETOPS_RATE_LIMITS__WRITES_PER_MINUTE", "1000000"),
        ],
    );
    let svc = Service::start_with(Backend::Sqlite, options).await?;
    let metrics_url = svc.metrics_url.clone().context("no metrics listener")?;
    let api = svc.rest(&svc.api_key);
    let wallets = funded_wallets(&svc, &anvil, wallets).await?;
    let probe = Probe {
        walletops: svc.pid(),
        anvil: None,
        client: None,
        postgres: false,
    };
    let mut figures = Vec::new();
    let mut open = 0;
    for &size in sizes {
        println!(
            "  {} more sends from {} wallets, none mined ...",
            size - open,
            wallets.len()
        );
        send_from(&api, &wallets, size - open, concurrency).await?;
        open = size;
        poll_until("every send to reach the node's pool", || async {
            Ok((pooled(&anvil).await? >= open).then_some(()))
        })
        .await?;
        let counters =
            || async { Ok::<_, anyhow::Error>(monitor_sweeps(&scrape_text(&metrics_url).await?)) };
        // Watched in the steady state, once the monitor has swept every open record since the
        // sends: a record's first visit leases it from nobody and asks the node whether it
        // holds it, and the sends' own tail (events numbered, broadcast times written) falls
        // in the same seconds. At 10,000 a 10 s window is about one pass, so every visit in
        // it would be a first one; at 1,000, one in ten.
        let swept_before = counters().await?[2];
        poll_until("the monitor to sweep every open record once", || async {
            Ok((counters().await?[2] - swept_before >= open as f64).then_some(()))
        })
        .await?;
        let before = (counters().await?, gateway.requests());
        let ((), cpu) = probe.measure(tokio::time::sleep(window)).await;
        let after = (counters().await?, gateway.requests());
        let [sweeps, seconds, swept, full] = std::array::from_fn(|i| after.0[i] - before.0[i]);
        ensure!(sweeps > 0.0, "the monitor made no sweep in {window:?}");
        let backlog = Backlog {
            open,
            sweeps,
            sweep_ms: 1000.0 * seconds / sweeps,
            swept: swept / sweeps,
            full: full / sweeps,
            requests: (after.1 - before.1) as f64 / sweeps,
            cpu_us: cpu
                .walletops
                .map(|t| 1e6 * t.as_secs_f64() / swept.max(1.0)),
        };
        println!("  {}", backlog.line());
        figures.push(backlog);
    }
    Ok(figures)
}
