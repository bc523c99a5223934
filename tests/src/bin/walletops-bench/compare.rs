//! A send's cost beside an earlier build's (`--before BIN`): instructions, the service's CPU
//! and the node HTTP requests of a REST send on SQLite, each build measured the same way on
//! the same anvil in the same run.

use std::{path::Path, time::Duration};

use anyhow::Context;
use serde_json::{Value, json};
use walletops_tests::anvil::Anvil;

use crate::{
    cpu::Probe,
    instructions::{Counted, Served, WARMUP},
};

/// The goal: the effects check adds at most this share of a send's instructions.
const MOST_ADDED: f64 = 0.10;

/// One build's figures.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Side {
    pub(crate) counted: Counted,
    /// The service's CPU a send, over a run of its own without callgrind.
    pub(crate) cpu: Duration,
}

/// This build beside the earlier one.
#[derive(Debug, Clone)]
pub(crate) struct Compared {
    pub(crate) before_bin: std::path::PathBuf,
    pub(crate) before: Side,
    pub(crate) now: Side,
}

/// The service's CPU a REST send of `bin`, over `n` sends at `concurrency` after a warm-up,
/// until mined.
pub(crate) async fn cpu_per_send(
    anvil: &Anvil,
    bin: &Path,
    (n, concurrency): (u64, usize),
) -> anyhow::Result<Duration> {
    let served = Served::start(anvil, bin, None, concurrency).await?;
    let probe = Probe {
        walletops: Some(served.pid()?),
        anvil: None,
        client: None,
        postgres: false,
    };
    let (sent, cpu) = probe
        .measure(served.sends(anvil, WARMUP, n, concurrency))
        .await;
    sent?;
    Ok(cpu.walletops.context("no CPU time of the service")? / u32::try_from(n)?)
}

impl Compared {
    fn added(&self) -> f64 {
        self.now.counted.per_send / self.before.counted.per_send - 1.0
    }

    pub(crate) fn print(&self) {
        let (b, n) = (&self.before, &self.now);
        println!("this build beside {}:", self.before_bin.display());
        let added = self.added();
        println!(
            "  instructions per REST send: before {:.2} million, now {:.2} million, {:+.1} % (goal at most {:.0} % more: {})",
            b.counted.per_send / 1e6,
            n.counted.per_send / 1e6,
            100.0 * added,
            100.0 * MOST_ADDED,
            if added <= MOST_ADDED { "met" } else { "MISSED" }
        );
        println!(
            "  service CPU per REST send: before {:.3} ms, now {:.3} ms, {:+.1} %",
            1e3 * b.cpu.as_secs_f64(),
            1e3 * n.cpu.as_secs_f64(),
            100.0 * (n.cpu.as_secs_f64() / b.cpu.as_secs_f64() - 1.0)
        );
        let (rb, rn) = (
            b.counted.node_requests_per_send,
            n.counted.node_requests_per_send,
        );
        println!(
            "  node HTTP requests per send: before {rb:.2}, now {rn:.2} (goal no more: {})",
            // A sweep's share of a send varies by a request or two over the run.
            if rn <= rb + 0.05 { "met" } else { "MISSED" }
        );
    }

    pub(crate) fn json(&self) -> Value {
        let side = |s: &Side| {
            json!({
                "instructions_per_rest_send": s.counted.per_send,
                "cpu_ms_per_rest_send": 1e3 * s.cpu.as_secs_f64(),
                "node_requests_per_send": s.counted.node_requests_per_send,
            })
        };
        json!({
            "before_bin": self.before_bin.display().to_string(),
            "before": side(&self.before),
            "now": side(&self.now),
            "instructions_added": self.added(),
        })
    }
}
