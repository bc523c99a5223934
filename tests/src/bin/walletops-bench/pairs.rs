//! PostgreSQL's send rate against SQLite's as the median of `PAIRS` back-to-back pairs of
//! REST runs, SQLite first in each: one pair moved between 0.66 and 0.91 from run to run.

use alloy::primitives::Address;
use serde_json::{Value, json};
use walletops_tests::{Rest, Service, anvil::Anvil};

use crate::{
    cpu::Probe,
    report::SendRun,
    sends::{Sender, all_settled, walletops_sends},
};

/// Pairs of runs.
pub(crate) const PAIRS: usize = 3;

/// One store's service: its process, a client, its wallet and that wallet's next nonce.
pub(crate) type Side<'a> = (&'a Service, &'a Rest, Address, u64, Probe);

/// Each pair's runs, SQLite's first.
#[derive(Debug)]
pub(crate) struct Pairs(Vec<(SendRun, SendRun)>);

/// `PAIRS` pairs of `n` REST sends at `concurrency`, each run settled before the next; the
/// runs and the wallets' nonces after them.
pub(crate) async fn pairs(
    anvil: &Anvil,
    (sqlite, postgres): (Side<'_>, Side<'_>),
    (n, concurrency): (u64, usize),
) -> anyhow::Result<(Pairs, u64, u64)> {
    let (mut lite_next, mut pg_next) = (sqlite.3, postgres.3);
    let mut runs = Vec::new();
    for _ in 0..PAIRS {
        let lite = settled_run(anvil, sqlite, lite_next, (n, concurrency)).await?;
        let pg = settled_run(anvil, postgres, pg_next, (n, concurrency)).await?;
        (lite_next, pg_next) = (lite_next + n, pg_next + n);
        runs.push((lite, pg));
    }
    Ok((Pairs(runs), lite_next, pg_next))
}

/// `n` REST sends on `side` from nonce `first`, settled.
async fn settled_run(
    anvil: &Anvil,
    (svc, api, wallet, _, probe): Side<'_>,
    first: u64,
    (n, concurrency): (u64, usize),
) -> anyhow::Result<SendRun> {
    let sender = Sender::Rest(api.clone());
    let run = walletops_sends(anvil, api, sender, wallet, (first, n), concurrency, probe).await?;
    all_settled(svc).await?;
    Ok(run)
}

impl Pairs {
    /// Each pair's ratio, sorted.
    fn ratios(&self) -> Vec<f64> {
        let mut ratios: Vec<f64> = self.0.iter().map(|(l, p)| p.rate() / l.rate()).collect();
        ratios.sort_by(f64::total_cmp);
        ratios
    }

    /// The median ratio.
    pub(crate) fn median(&self) -> f64 {
        let ratios = self.ratios();
        ratios.get(ratios.len() / 2).copied().unwrap_or(f64::NAN)
    }

    /// Whether the chain shows a correctness failure of a run.
    pub(crate) fn failed(&self) -> bool {
        self.0.iter().any(|(l, p)| l.failed() || p.failed())
    }

    /// The ratios, as the summary line shows them.
    pub(crate) fn listed(&self) -> String {
        let shown: Vec<String> = self.ratios().iter().map(|r| format!("{r:.2}")).collect();
        shown.join(", ")
    }

    pub(crate) fn json(&self) -> Value {
        json!({"ratios": self.ratios(), "median": self.median()})
    }
}
