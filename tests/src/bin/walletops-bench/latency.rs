//! Latency at low load: sends one at a time through WalletOps, each beside the node's own
//! time for the calls a send makes of it (an estimate, a balance read, the broadcast), so
//! the difference is what the service adds.

use std::time::{Duration, Instant};

use alloy::primitives::{Address, U256};
use anyhow::{bail, ensure};
use serde_json::{Value, json};
use walletops_tests::anvil::Anvil;

use crate::{
    report::rank,
    sends::{AMOUNT_WEI, RECIPIENT, Sender, presigned},
};

/// Untimed pairs before measuring.
pub(crate) const WARMUP: u64 = 10;

/// Percentiles of one kind of call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Spread {
    pub(crate) p50: Duration,
    pub(crate) p99: Duration,
}

impl Spread {
    /// Nearest-rank p50 and p99 of `samples`.
    pub(crate) fn of(mut samples: Vec<Duration>) -> Self {
        samples.sort_unstable();
        Self {
            p50: rank(&samples, 0.5),
            p99: rank(&samples, 0.99),
        }
    }
}

/// `n` sends through `sender`, one at a time, each followed by the node's own estimate,
/// balance read and broadcast of a pre-signed transfer: the spreads of both.
pub(crate) async fn low_load(
    anvil: &Anvil,
    sender: &Sender,
    n: u64,
) -> anyhow::Result<(Spread, Spread)> {
    let (from, bodies, _) = presigned(anvil, n + WARMUP).await?;
    let http = walletops_tests::http::client();
    let call = |body: String| {
        let (http, url) = (http.clone(), anvil.url().to_owned());
        async move {
            let reply: Value = http
                .post(url)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await?
                .json()
                .await?;
            if let Some(err) = reply.get("error") {
                bail!("the node refused: {err}");
            }
            Ok(())
        }
    };
    let node_alone = |i: usize, from: Address| {
        let estimate = json!({"jsonrpc": "2.0", "id": 1, "method": "eth_estimateGas",
            "params": [{"from": from, "to": RECIPIENT, "value": format!("{:#x}", U256::from(AMOUNT_WEI))}]});
        let balance = json!({"jsonrpc": "2.0", "id": 2, "method": "eth_getBalance",
            "params": [from, "latest"]});
        let send = bodies[i].clone();
        async move {
            let start = Instant::now();
            call(estimate.to_string()).await?;
            call(balance.to_string()).await?;
            call(send).await?;
            Ok::<_, anyhow::Error>(start.elapsed())
        }
    };
    let (mut service, mut node) = (Vec::new(), Vec::new());
    for i in 0..usize::try_from(n + WARMUP)? {
        let start = Instant::now();
        sender.send().await?;
        let took = start.elapsed();
        let alone = node_alone(i, from).await?;
        if i >= usize::try_from(WARMUP)? {
            service.push(took);
            node.push(alone);
        }
    }
    ensure!(!service.is_empty(), "no timed sends");
    Ok((Spread::of(service), Spread::of(node)))
}
