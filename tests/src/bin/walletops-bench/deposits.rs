//! Deposits: how many credits a service finds per second (all of them in one block, timed
//! from its mining until the last is listed), and how long after a deposit's inclusion its
//! `deposit.pending` webhook arrives (each its own block), on a service of its own over a
//! fresh anvil whose scan polls every `POLL_MS`.

use std::time::{Duration, Instant};

use alloy::primitives::{Address, Bytes, U256};
use serde_json::{Value, json};
use walletops_tests::{
    Backend, Service,
    anvil::{Anvil, DEV_ACCOUNT},
    poll_until,
    webhooks::Receiver,
};

use crate::report::{ms, verdict};

/// The scan's poll interval in this run.
const POLL_MS: u64 = 500;

/// What the deposit runs measured.
#[derive(Debug, Clone)]
pub(crate) struct Figures {
    /// Deposits made at once, and how long until every one was listed.
    pub(crate) found: (u64, Duration),
    /// Each timed deposit's delay from its receipt to its `deposit.pending` webhook, sorted.
    pub(crate) delays: Vec<Duration>,
    /// Deposits listed more than once, or missing, after the runs.
    pub(crate) wrong: usize,
}

impl Figures {
    fn rate(&self) -> f64 {
        self.found.0 as f64 / self.found.1.as_secs_f64()
    }

    fn p50(&self) -> Duration {
        self.delays
            .get(self.delays.len() / 2)
            .copied()
            .unwrap_or_default()
    }

    /// The goal of a delay: one poll interval and a second.
    fn goal() -> Duration {
        Duration::from_millis(POLL_MS) + Duration::from_secs(1)
    }

    /// Prints the figures and the delay's goal line.
    pub(crate) fn print(&self) {
        println!(
            "deposits found {:.1}/s ({} deposits, {:.3} s), listed wrongly {}",
            self.rate(),
            self.found.0,
            self.found.1.as_secs_f64(),
            self.wrong
        );
        let worst = self.delays.last().copied().unwrap_or_default();
        println!(
            "deposit inclusion to its deposit.pending webhook {:.0} ms at p50, {:.0} ms at most, polling every {POLL_MS} ms (goal <= {:.0} ms: {})",
            ms(self.p50()),
            ms(worst),
            ms(Self::goal()),
            verdict(self.p50() <= Self::goal() && self.wrong == 0)
        );
    }

    /// The figures, for `--json`.
    pub(crate) fn json(&self) -> Value {
        json!({
            "deposits": self.found.0,
            "seconds": self.found.1.as_secs_f64(),
            "per_second": self.rate(),
            "poll_interval_ms": POLL_MS,
            "pending_webhook_p50_ms": ms(self.p50()),
            "pending_webhook_max_ms": ms(self.delays.last().copied().unwrap_or_default()),
            "timed": self.delays.len(),
            "wrong": self.wrong,
        })
    }
}

/// The caller's deposits listed, every page.
async fn listed(api: &walletops_tests::Rest) -> anyhow::Result<Vec<Value>> {
    let mut all = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/deposits?limit=500&cursor={c}"),
            None => "/deposits?limit=500".to_owned(),
        };
        let page = api.get(&path).await?;
        anyhow::ensure!(page.status == 200, "GET /deposits: {}", page.text);
        all.extend(
            page.body["deposits"]
                .as_array()
                .cloned()
                .unwrap_or_default(),
        );
        match page.body["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return Ok(all),
        }
    }
}

/// `many` deposits made as fast as anvil mines them, then `timed` one at a time.
pub(crate) async fn deposits(many: u64, timed: u64) -> anyhow::Result<Figures> {
    let anvil = Anvil::start().await?;
    let toml = format!("[chains.anvil.deposits]\npoll_interval_ms = {POLL_MS}\n");
    let svc = Service::start_with(Backend::Sqlite, anvil.service_options(&toml, &[])).await?;
    let api = svc.rest(&svc.api_key);
    let receiver = Receiver::start().await?;
    receiver.register(&api, &["deposit.pending"]).await?;
    let wallet: Address = api.default_wallet("ethereum").await?.parse()?;
    let pay = |wei: u64| anvil.send_as(DEV_ACCOUNT, Some(wallet), Bytes::new(), U256::from(wei));
    // All of them in one block, mined at once: the scan's own rate, not the sender's.
    anvil.set_automine(false).await?;
    for i in 0..many {
        let tx = json!({"from": DEV_ACCOUNT, "to": wallet, "value": format!("{:#x}", 1_000 + i)});
        anvil.rpc("eth_sendTransaction", json!([tx])).await?;
    }
    anvil.mine().await?;
    let started = Instant::now();
    anvil.set_automine(true).await?;
    poll_until("every deposit to be listed", || async {
        Ok((listed(&api).await?.len() as u64 >= many).then_some(()))
    })
    .await?;
    let found = (many, started.elapsed());
    let mut delays = Vec::new();
    for i in 0..timed {
        let sent = pay(10_000 + i).await?;
        let included = Instant::now();
        let hash = format!("{:#x}", sent.transaction_hash);
        loop {
            let arrived = receiver.received().iter().any(|r| {
                r.event_type() == "deposit.pending"
                    && r.body["hash"].as_str() == Some(hash.as_str())
            });
            if arrived {
                delays.push(included.elapsed());
                break;
            }
            anyhow::ensure!(
                included.elapsed() < Duration::from_secs(60),
                "no deposit.pending webhook for {hash}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    delays.sort();
    let all = listed(&api).await?;
    let mut hashes: Vec<&str> = all.iter().filter_map(|d| d["hash"].as_str()).collect();
    hashes.sort_unstable();
    hashes.dedup();
    let expected = usize::try_from(many + timed)?;
    let wrong = all.len().abs_diff(expected) + all.len().abs_diff(hashes.len());
    Ok(Figures {
        found,
        delays,
        wrong,
    })
}
