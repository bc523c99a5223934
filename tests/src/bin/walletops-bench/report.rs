//! The figures of a run and the summary they print: rates, latencies, CPU per send, and
//! whether the goals were met.

use std::time::Duration;

use crate::{cpu::CpuUse, reads::TOKENS};

/// Throughput goal: WalletOps sends/s over raw sends/s.
const SEND_RATIO_GOAL: f64 = 0.7;

/// Latency goal: 50-token median over 1-token median.
const READ_RATIO_GOAL: f64 = 1.5;

/// Latency goal: what WalletOps adds to the aggregator's quote, at the median, in ms.
const QUOTE_ADDED_GOAL_MS: f64 = 1.0;

/// `total` per send, in milliseconds, or "n/a".
fn per_send(total: Option<Duration>, sends: u64) -> String {
    ms_per_send(total, sends).map_or_else(|| "n/a".to_owned(), |t| format!("{t:.3} ms"))
}

/// `total` per send, in milliseconds.
fn ms_per_send(total: Option<Duration>, sends: u64) -> Option<f64> {
    total.map(|t| ms(t) / sends as f64)
}

/// The WalletOps throughput run and what the chain shows of it.
#[derive(Debug)]
pub(crate) struct SendRun {
    pub(crate) elapsed: Duration,
    pub(crate) cpu: CpuUse,
    /// Nonces in `0..N` that no returned hash was mined with.
    pub(crate) gaps: usize,
    /// Hashes returned twice, nonces mined twice, and transactions beyond the N requested.
    pub(crate) duplicates: usize,
    /// Returned hashes the chain does not hold as a mined transaction of the wallet, nor a
    /// replacement of it by WalletOps' monitor.
    pub(crate) missing: usize,
    /// Sends mined as a replacement the monitor made (a higher fee at the same nonce), not
    /// with the hash first returned: anvil left the first one queued (foundry-rs/foundry#10122).
    pub(crate) replaced: usize,
}

impl SendRun {
    /// Sends per second of a run of `n`.
    fn rate(&self, n: u64) -> f64 {
        n as f64 / self.elapsed.as_secs_f64()
    }

    /// Whether the chain shows a correctness failure.
    pub(crate) fn failed(&self) -> bool {
        self.gaps > 0 || self.duplicates > 0 || self.missing > 0
    }

    /// The progress line of a run of `n`.
    pub(crate) fn print(&self, n: u64) {
        println!(
            "  {:.1} sends/s, gaps {}, duplicates {}, missing {}, replaced {}",
            self.rate(n),
            self.gaps,
            self.duplicates,
            self.missing,
            self.replaced
        );
    }
}

/// Latencies of one kind of request.
#[derive(Debug)]
pub(crate) struct Latency {
    pub(crate) median: Duration,
    pub(crate) p95: Duration,
}

impl Latency {
    /// Nearest-rank median and p95 of `samples`.
    pub(crate) fn of(mut samples: Vec<Duration>) -> Self {
        samples.sort_unstable();
        let rank = |p: f64| {
            let n = samples.len();
            let idx = ((p * n as f64).ceil() as usize).clamp(1, n) - 1;
            samples[idx]
        };
        Self {
            median: rank(0.5),
            p95: rank(0.95),
        }
    }
}

/// Everything the summary prints.
#[derive(Debug)]
pub(crate) struct Report {
    pub(crate) sends: u64,
    /// Through the REST edge.
    pub(crate) walletops: SendRun,
    /// Straight to the gRPC core.
    pub(crate) grpc: SendRun,
    pub(crate) raw: Duration,
    pub(crate) raw_cpu: CpuUse,
    pub(crate) one_token: Latency,
    pub(crate) all_tokens: Latency,
    /// Quotes through the REST edge.
    pub(crate) quote: Latency,
    /// The same quotes asked of the aggregator alone.
    pub(crate) quote_alone: Latency,
}

impl Report {
    /// Raw sends per second.
    fn raw_rate(&self) -> f64 {
        self.sends as f64 / self.raw.as_secs_f64()
    }

    /// Whether the chain shows a correctness failure of a WalletOps run.
    pub(crate) fn failed(&self) -> bool {
        self.walletops.failed() || self.grpc.failed()
    }

    /// Prints the summary table.
    pub(crate) fn print(&self) {
        let n = self.sends;
        let read_ratio = self.all_tokens.median.as_secs_f64() / self.one_token.median.as_secs_f64();
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let verdict = |ok: bool| if ok { "met" } else { "MISSED" };
        println!();
        println!("== summary ({n} sends) ==");
        println!(
            "raw sendRawTransaction {:>9.1}   ({:.3} s)",
            self.raw_rate(),
            self.raw.as_secs_f64()
        );
        for (label, run) in [
            ("WalletOps REST", &self.walletops),
            ("WalletOps gRPC", &self.grpc),
        ] {
            let ratio = run.rate(n) / self.raw_rate();
            println!(
                "{label} sends/s {:>9.1}   ({:.3} s)  ratio {ratio:.2} (goal >= {SEND_RATIO_GOAL}: {})  gaps {}  duplicates {}{}",
                run.rate(n),
                run.elapsed.as_secs_f64(),
                verdict(ratio >= SEND_RATIO_GOAL),
                run.gaps,
                run.duplicates,
                if run.missing > 0 {
                    format!("  missing {}", run.missing)
                } else {
                    String::new()
                } + &if run.replaced > 0 {
                    format!("  replaced {} (left queued by anvil)", run.replaced)
                } else {
                    String::new()
                }
            );
        }
        println!(
            "balance read 1 token   median {:>7.2} ms  p95 {:>7.2} ms",
            ms(self.one_token.median),
            ms(self.one_token.p95)
        );
        println!(
            "balance read {TOKENS} tokens median {:>7.2} ms  p95 {:>7.2} ms",
            ms(self.all_tokens.median),
            ms(self.all_tokens.p95)
        );
        println!(
            "ratio                  {read_ratio:>9.2}   (goal <= {READ_RATIO_GOAL}: {})",
            verdict(read_ratio <= READ_RATIO_GOAL)
        );
        let added = ms(self.quote.median) - ms(self.quote_alone.median);
        println!(
            "quote via WalletOps    median {:>7.2} ms  p95 {:>7.2} ms; aggregator alone median {:.2} ms  p95 {:.2} ms",
            ms(self.quote.median),
            ms(self.quote.p95),
            ms(self.quote_alone.median),
            ms(self.quote_alone.p95)
        );
        println!(
            "quote added by WalletOps {added:>7.2} ms at the median (goal <= {QUOTE_ADDED_GOAL_MS} ms: {})",
            verdict(added <= QUOTE_ADDED_GOAL_MS)
        );
        println!(
            "CPU per send: REST run walletops {}, anvil {}, bench client {}; gRPC run walletops {}, anvil {}, bench client {}; raw run anvil {}, bench client {} ({cores} cores)",
            per_send(self.walletops.cpu.walletops, n),
            per_send(self.walletops.cpu.anvil, n),
            per_send(self.walletops.cpu.client, n),
            per_send(self.grpc.cpu.walletops, n),
            per_send(self.grpc.cpu.anvil, n),
            per_send(self.grpc.cpu.client, n),
            per_send(self.raw_cpu.anvil, n),
            per_send(self.raw_cpu.client, n),
        );
        self.print_budget(cores);
        if self.failed() {
            println!("FAILED: the chain shows gaps, duplicates or missing transactions");
        }
    }

    /// What the send goal leaves the service: the CPU time a send may take in all, with
    /// every process on these cores busy, at `SEND_RATIO_GOAL` of the raw rate, less what
    /// anvil and the bench's clients used per send in each WalletOps run. Where the node and
    /// the clients alone use it up, no service could meet the goal on this machine.
    fn print_budget(&self, cores: usize) {
        let n = self.sends;
        let budget = 1000.0 * cores as f64 / (SEND_RATIO_GOAL * self.raw_rate());
        let mut line = format!(
            "CPU budget per send at the goal ({cores} cores at {SEND_RATIO_GOAL} of the raw rate): {budget:.3} ms"
        );
        for (label, run) in [("REST", &self.walletops), ("gRPC", &self.grpc)] {
            let (Some(node), Some(client), Some(service)) = (
                ms_per_send(run.cpu.anvil, n),
                ms_per_send(run.cpu.client, n),
                ms_per_send(run.cpu.walletops, n),
            ) else {
                continue;
            };
            line += &format!(
                "; {label} run: anvil {node:.3} + bench client {client:.3} leave {:.3} ms for a service that used {service:.3}",
                budget - node - client
            );
        }
        println!("{line}");
    }
}

/// `d` in milliseconds.
pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
