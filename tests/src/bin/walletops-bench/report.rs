//! The figures of a run, the summary they print with each goal's verdict, and the same
//! figures as JSON (`--json FILE`) so that runs can be compared.

use std::time::Duration;

use serde_json::{Value, json};

use crate::{
    backlog::{Backlog, LINEAR_GOAL, REQUESTS_PER_50_GOAL},
    cpu::CpuUse,
    latency::Spread,
    reads::TOKENS,
};

/// The service's own CPU per REST send on SQLite, in ms.
const CPU_PER_SEND_GOAL_MS: f64 = 0.40;

/// Instructions per REST send on SQLite, and per cached balance read (callgrind).
const INSTRUCTIONS_GOALS: (f64, f64) = (0.9e6, 150e3);

/// PostgreSQL's REST send rate over SQLite's.
const POSTGRES_RATIO_GOAL: f64 = 0.8;

/// What the service adds to a 50-token read (its median minus the node's own call's) over
/// what it adds to a 1-token read.
const READ_ADDED_RATIO_GOAL: f64 = 1.2;

/// What WalletOps adds to the aggregator's quote, at the median, in ms.
const QUOTE_ADDED_GOAL_MS: f64 = 1.0;

/// Cached balance reads per second under load over a bare HTTP handler's.
const READ_LOAD_GOAL: f64 = 0.20;

/// What WalletOps adds to the node's own calls for a send at concurrency 1, at p50, in ms.
const ADDED_LATENCY_GOAL_MS: f64 = 1.0;

/// The idle service's CPU, in percent of one core.
const IDLE_CPU_GOAL_PERCENT: f64 = 1.0;

/// Resident memory goals, in MB: idle after start, after the sends, with the idle
/// connections open.
const MEMORY_GOALS_MB: (f64, f64, f64) = (30.0, 60.0, 120.0);

/// `d` in milliseconds.
pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The nearest-rank `p` percentile (0 to 1) of `sorted`, which is not empty.
pub(crate) fn rank(sorted: &[Duration], p: f64) -> Duration {
    let n = sorted.len();
    sorted[((p * n as f64).ceil() as usize).clamp(1, n) - 1]
}

/// `total` per send, in milliseconds.
fn ms_per_send(total: Option<Duration>, sends: u64) -> Option<f64> {
    total.map(|t| ms(t) / sends as f64)
}

pub(crate) fn verdict(ok: bool) -> &'static str {
    if ok { "met" } else { "MISSED" }
}

/// What the chain shows of a wallet's writes (`sends::chain_view`).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ChainView {
    /// Nonces in the writes' range that no returned hash was mined with.
    pub(crate) gaps: usize,
    /// Hashes returned twice, nonces mined twice, and transactions beyond those requested.
    pub(crate) duplicates: usize,
    /// Returned hashes the chain does not hold as a mined transaction of the wallet, nor a
    /// replacement of it by WalletOps' monitor.
    pub(crate) missing: usize,
    /// Writes mined as a replacement the monitor made (a higher fee at the same nonce), not
    /// with the hash first returned: anvil left the first one queued (foundry-rs/foundry#10122).
    pub(crate) replaced: usize,
}

impl ChainView {
    /// This view and `next` counted as one.
    pub(crate) fn and(self, next: Self) -> Self {
        Self {
            gaps: self.gaps + next.gaps,
            duplicates: self.duplicates + next.duplicates,
            missing: self.missing + next.missing,
            replaced: self.replaced + next.replaced,
        }
    }

    /// Whether the chain shows a correctness failure.
    pub(crate) fn failed(&self) -> bool {
        self.gaps > 0 || self.duplicates > 0 || self.missing > 0
    }
}

/// A throughput run and what the chain shows of it.
#[derive(Debug)]
pub(crate) struct SendRun {
    pub(crate) sends: u64,
    pub(crate) elapsed: Duration,
    pub(crate) cpu: CpuUse,
    pub(crate) chain: ChainView,
}

impl SendRun {
    /// Sends per second.
    pub(crate) fn rate(&self) -> f64 {
        self.sends as f64 / self.elapsed.as_secs_f64()
    }

    /// This run and `next` counted as one.
    pub(crate) fn and(self, next: Self) -> Self {
        let add = |a: Option<Duration>, b: Option<Duration>| Some(a? + b?);
        Self {
            sends: self.sends + next.sends,
            elapsed: self.elapsed + next.elapsed,
            cpu: CpuUse {
                walletops: add(self.cpu.walletops, next.cpu.walletops),
                walletops_kernel: add(self.cpu.walletops_kernel, next.cpu.walletops_kernel),
                store: add(self.cpu.store, next.cpu.store),
                anvil: add(self.cpu.anvil, next.cpu.anvil),
                client: add(self.cpu.client, next.cpu.client),
            },
            chain: self.chain.and(next.chain),
        }
    }

    /// Whether the chain shows a correctness failure.
    pub(crate) fn failed(&self) -> bool {
        self.chain.failed()
    }

    /// The service's own CPU per send, in ms (with its store's, on PostgreSQL).
    pub(crate) fn service_ms(&self) -> Option<f64> {
        let own = ms_per_send(self.cpu.walletops, self.sends)?;
        Some(own + ms_per_send(self.cpu.store, self.sends).unwrap_or(0.0))
    }

    /// The progress line.
    pub(crate) fn print(&self) {
        println!(
            "  {:.1} sends/s, gaps {}, duplicates {}, missing {}, replaced {}",
            self.rate(),
            self.chain.gaps,
            self.chain.duplicates,
            self.chain.missing,
            self.chain.replaced
        );
    }

    fn json(&self) -> Value {
        let per = |d: Option<Duration>| ms_per_send(d, self.sends);
        json!({
            "sends": self.sends,
            "seconds": self.elapsed.as_secs_f64(),
            "sends_per_second": self.rate(),
            "cpu_ms_per_send": {
                "walletops": per(self.cpu.walletops),
                "walletops_kernel": per(self.cpu.walletops_kernel),
                "postgres": per(self.cpu.store),
                "anvil": per(self.cpu.anvil),
                "bench_client": per(self.cpu.client),
            },
            "gaps": self.chain.gaps,
            "duplicates": self.chain.duplicates,
            "missing": self.chain.missing,
            "replaced": self.chain.replaced,
        })
    }
}

/// Median and p95 of one kind of request.
#[derive(Debug)]
pub(crate) struct Latency {
    pub(crate) median: Duration,
    pub(crate) p95: Duration,
}

impl Latency {
    /// Nearest-rank median and p95 of `samples`.
    pub(crate) fn of(mut samples: Vec<Duration>) -> Self {
        samples.sort_unstable();
        Self {
            median: rank(&samples, 0.5),
            p95: rank(&samples, 0.95),
        }
    }

    fn json(&self) -> Value {
        json!({"median_ms": ms(self.median), "p95_ms": ms(self.p95)})
    }
}

/// The REST and gRPC throughput runs on one store.
#[derive(Debug)]
pub(crate) struct StoreRuns {
    pub(crate) rest: SendRun,
    pub(crate) grpc: SendRun,
}

/// The SQLite service's resident memory.
#[derive(Debug)]
pub(crate) struct Memory {
    /// Each reading: all resident memory and its private part, in MB (`cpu::rss_mb`).
    pub(crate) idle_mb: Option<(f64, f64)>,
    /// After `sends` sends, all settled.
    pub(crate) after_sends_mb: Option<(f64, f64)>,
    pub(crate) sends: u64,
    /// With `connections` idle keep-alive connections open on the REST listener.
    pub(crate) connections_mb: Option<(f64, f64)>,
    pub(crate) connections: usize,
}

/// Everything the summary prints.
#[derive(Debug)]
pub(crate) struct Report {
    pub(crate) sqlite: StoreRuns,
    pub(crate) postgres: StoreRuns,
    /// Back-to-back pairs of REST runs on each store.
    pub(crate) pairs: crate::pairs::Pairs,
    /// The extra sends that took the SQLite service to `memory.sends`.
    pub(crate) filler: Option<SendRun>,
    pub(crate) raw: SendRun,
    pub(crate) one_token: Latency,
    pub(crate) all_tokens: Latency,
    /// The node's own Multicall3 call for the same 1-token and 50-token reads.
    pub(crate) node_reads: (Latency, Latency),
    /// Quotes through the REST edge, and the same quotes asked of the aggregator alone.
    pub(crate) quote: Latency,
    pub(crate) quote_alone: Latency,
    /// Sends at concurrency 1 through REST, and the node's own calls for each.
    pub(crate) low_load: (Spread, Spread),
    pub(crate) low_load_sends: u64,
    /// Cached balance reads per second under wrk, and a bare handler's.
    pub(crate) read_load: (f64, f64),
    /// The SQLite service's CPU with no open record, in percent of one core.
    pub(crate) idle_cpu: Option<f64>,
    /// Instructions per REST send on SQLite under callgrind, and over how many sends.
    /// Per send and per cached read, and how many of each were made.
    pub(crate) instructions: Option<(crate::instructions::Counted, u64)>,
    /// A send's cost beside an earlier build's (`--before`).
    pub(crate) compared: Option<crate::compare::Compared>,
    /// One send's signature in the bench's process: the floor of the service's CPU per send
    /// on this machine.
    pub(crate) signature: Duration,
    /// The monitor's sweeps at each backlog of open records, smallest first.
    pub(crate) backlog: Vec<Backlog>,
    /// Deposits found per second and their webhooks' delay; `None`: not measured.
    pub(crate) deposits: Option<crate::deposits::Figures>,
    /// A payout's items per second against single sends; `None`: not measured.
    pub(crate) payouts: Option<crate::payouts::Figures>,
    pub(crate) congestion: Option<crate::congestion::Figures>,
    /// The wallet guard's extra gas per write.
    pub(crate) guard: crate::guard::GuardGas,
    /// HSM signatures per second and CPU per send against a keystore wallet's.
    pub(crate) hsm: Option<crate::hsm::Figures>,
    pub(crate) memory: Memory,
}

impl Report {
    /// Whether the chain shows a correctness failure of a WalletOps run.
    pub(crate) fn failed(&self) -> bool {
        [
            &self.sqlite.rest,
            &self.sqlite.grpc,
            &self.postgres.rest,
            &self.postgres.grpc,
        ]
        .into_iter()
        .chain(self.filler.as_ref())
        .any(SendRun::failed)
            || self.deposits.as_ref().is_some_and(|d| d.wrong > 0)
            || self.payouts.as_ref().is_some_and(|p| p.wrong > 0)
            || self
                .congestion
                .as_ref()
                .is_some_and(crate::congestion::Figures::failed)
            || self.hsm.as_ref().is_some_and(crate::hsm::Figures::failed)
            || self.pairs.failed()
    }

    fn runs(&self) -> [(&'static str, &SendRun); 4] {
        [
            ("SQLite REST", &self.sqlite.rest),
            ("SQLite gRPC", &self.sqlite.grpc),
            ("PostgreSQL REST", &self.postgres.rest),
            ("PostgreSQL gRPC", &self.postgres.grpc),
        ]
    }

    /// Prints the summary: each figure, and each goal's line ending with its verdict.
    pub(crate) fn print(&self) {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        println!();
        println!("== summary ({cores} cores) ==");
        println!(
            "raw sendRawTransaction    {:>8.1} sends/s ({} sends, {:.3} s)",
            self.raw.rate(),
            self.raw.sends,
            self.raw.elapsed.as_secs_f64()
        );
        for (label, run) in self.runs() {
            println!(
                "WalletOps {label:<16}{:>8.1} sends/s ({} sends, {:.3} s)  gaps {}  duplicates {}{}",
                run.rate(),
                run.sends,
                run.elapsed.as_secs_f64(),
                run.chain.gaps,
                run.chain.duplicates,
                if run.chain.replaced > 0 {
                    format!("  replaced {} (left queued by anvil)", run.chain.replaced)
                } else {
                    String::new()
                }
            );
        }
        for (label, run) in self.runs() {
            let per = |d| ms_per_send(d, run.sends).map_or("n/a".to_owned(), |t| format!("{t:.3}"));
            println!(
                "CPU ms per send, {label:<16} walletops {}  postgres {}  anvil {}  bench client {}",
                per(run.cpu.walletops),
                per(run.cpu.store),
                per(run.cpu.anvil),
                per(run.cpu.client),
            );
        }
        let signature = ms(self.signature);
        println!("one send's signature on this machine {signature:.3} ms (k256, in the bench)");
        if let Some(cpu) = self.sqlite.rest.service_ms() {
            let run = &self.sqlite.rest;
            let kernel = ms_per_send(run.cpu.walletops_kernel, run.sends)
                .map_or("n/a".to_owned(), |k| format!("{k:.3}"));
            println!(
                "service CPU per REST send on SQLite {cpu:.3} ms ({kernel} ms in the kernel), {:.1} signatures' time (goal <= {CPU_PER_SEND_GOAL_MS} ms: {})",
                cpu / signature,
                verdict(cpu <= CPU_PER_SEND_GOAL_MS)
            );
        }
        if let Some((counted, n)) = self.instructions {
            let (send_goal, read_goal) = INSTRUCTIONS_GOALS;
            println!(
                "instructions per REST send on SQLite {:.2} million (callgrind, {n}; node HTTP requests per send {:.2}) (goal <= {:.1} million: {})",
                counted.per_send / 1e6,
                counted.node_requests_per_send,
                send_goal / 1e6,
                verdict(counted.per_send <= send_goal)
            );
            println!(
                "instructions per cached balance read {:.0} thousand (callgrind, {n}) (goal <= {:.0} thousand: {})",
                counted.per_read / 1e3,
                read_goal / 1e3,
                verdict(counted.per_read <= read_goal)
            );
        }
        if let Some(compared) = &self.compared {
            compared.print();
        }
        if let Some(cpu) = self.postgres.rest.service_ms() {
            println!("service and PostgreSQL CPU per REST send on PostgreSQL {cpu:.3} ms");
        }
        let ratio = self.postgres.rest.rate() / self.sqlite.rest.rate();
        let grpc_ratio = self.postgres.grpc.rate() / self.sqlite.grpc.rate();
        println!("PostgreSQL over SQLite, REST sends/s {ratio:.2} (gRPC {grpc_ratio:.2})");
        let median = self.pairs.median();
        println!(
            "PostgreSQL over SQLite, REST sends/s, median of {} back-to-back pairs {median:.2} ({}) (goal >= {POSTGRES_RATIO_GOAL}: {})",
            crate::pairs::PAIRS,
            self.pairs.listed(),
            verdict(median >= POSTGRES_RATIO_GOAL)
        );
        let (service, node) = self.low_load;
        let added = ms(service.p50) - ms(node.p50);
        println!(
            "send at concurrency 1   p50 {:>6.2} ms  p99 {:>6.2} ms; node's own calls p50 {:.2} ms  p99 {:.2} ms ({} sends)",
            ms(service.p50),
            ms(service.p99),
            ms(node.p50),
            ms(node.p99),
            self.low_load_sends
        );
        println!(
            "send latency added by WalletOps {added:.2} ms at p50 (goal <= {ADDED_LATENCY_GOAL_MS} ms: {})",
            verdict(added <= ADDED_LATENCY_GOAL_MS)
        );
        if let Some(idle) = self.idle_cpu {
            println!(
                "idle service CPU {idle:.2} % of a core (goal <= {IDLE_CPU_GOAL_PERCENT} %: {})",
                verdict(idle <= IDLE_CPU_GOAL_PERCENT)
            );
        }
        self.print_memory();
        self.print_backlog();
        let read_ratio = self.all_tokens.median.as_secs_f64() / self.one_token.median.as_secs_f64();
        println!(
            "balance read 1 token   median {:>7.2} ms  p95 {:>7.2} ms; {TOKENS} tokens median {:.2} ms  p95 {:.2} ms",
            ms(self.one_token.median),
            ms(self.one_token.p95),
            ms(self.all_tokens.median),
            ms(self.all_tokens.p95)
        );
        let (node_one, node_all) = &self.node_reads;
        let added = |walletops: &Latency, node: &Latency| ms(walletops.median) - ms(node.median);
        let (added_one, added_all) = (
            added(&self.one_token, node_one),
            added(&self.all_tokens, node_all),
        );
        println!(
            "balance read {TOKENS} tokens over 1 token {read_ratio:.2}; the node's own call {:.2} ms and {:.2} ms",
            ms(node_one.median),
            ms(node_all.median)
        );
        println!(
            "time WalletOps adds to a balance read: 1 token {added_one:.2} ms, {TOKENS} tokens {added_all:.2} ms, ratio {:.2} (goal <= {READ_ADDED_RATIO_GOAL}: {})",
            added_all / added_one,
            verdict(added_all / added_one <= READ_ADDED_RATIO_GOAL)
        );
        let (reads, bare) = self.read_load;
        println!(
            "cached balance reads under wrk {reads:.0}/s, bare axum handler {bare:.0}/s, ratio {:.2} (goal >= {READ_LOAD_GOAL}: {})",
            reads / bare,
            verdict(reads / bare >= READ_LOAD_GOAL)
        );
        let quote_added = ms(self.quote.median) - ms(self.quote_alone.median);
        println!(
            "quote via WalletOps    median {:>7.2} ms  p95 {:>7.2} ms; aggregator alone median {:.2} ms  p95 {:.2} ms",
            ms(self.quote.median),
            ms(self.quote.p95),
            ms(self.quote_alone.median),
            ms(self.quote_alone.p95)
        );
        println!(
            "quote added by WalletOps {quote_added:.2} ms at the median (goal <= {QUOTE_ADDED_GOAL_MS} ms: {})",
            verdict(quote_added <= QUOTE_ADDED_GOAL_MS)
        );
        if let Some(deposits) = &self.deposits {
            deposits.print();
        }
        if let Some(hsm) = &self.hsm {
            hsm.print();
        }
        self.guard.print();
        if let Some(congestion) = &self.congestion {
            congestion.print();
        }
        if let Some(payouts) = &self.payouts {
            payouts.print();
        }
        println!(
            "nonce gaps and duplicates in every run: {} (goal 0: {})",
            if self.failed() { "some" } else { "none" },
            verdict(!self.failed())
        );
    }

    fn print_memory(&self) {
        let m = &self.memory;
        let (idle, sends, connections) = MEMORY_GOALS_MB;
        for (what, value, goal) in [
            ("idle after start".to_owned(), m.idle_mb, idle),
            (format!("after {} sends", m.sends), m.after_sends_mb, sends),
            (
                format!("with {} idle connections", m.connections),
                m.connections_mb,
                connections,
            ),
        ] {
            match value {
                Some((mb, private)) => println!(
                    "resident memory {what} {mb:.1} MB, {private:.1} MB of it private (goal <= {goal} MB: {})",
                    verdict(mb <= goal)
                ),
                None => println!("resident memory {what}: n/a (no /proc)"),
            }
        }
    }

    fn print_backlog(&self) {
        for backlog in &self.backlog {
            println!("{}", backlog.line());
        }
        let (Some(least), Some(most)) = (self.backlog.first(), self.backlog.last()) else {
            return;
        };
        let per_50 = most.requests_per_50();
        println!(
            "node requests a sweep per 50 records swept at {} open records {per_50:.2} (goal <= {REQUESTS_PER_50_GOAL}: {})",
            most.open,
            verdict(per_50 <= REQUESTS_PER_50_GOAL)
        );
        if let (Some(a), Some(b)) = (least.cpu_us, most.cpu_us)
            && most.open > least.open
        {
            let growth = b / a;
            println!(
                "monitor CPU a record swept at {} over {} open records {growth:.2} (linear cost; goal <= {LINEAR_GOAL}: {})",
                most.open,
                least.open,
                verdict(growth <= LINEAR_GOAL)
            );
        }
    }

    /// Every figure, for `--json`.
    pub(crate) fn json(&self) -> Value {
        let (service, node) = self.low_load;
        json!({
            "cores": std::thread::available_parallelism().map_or(1, usize::from),
            "release": !cfg!(debug_assertions),
            "raw": self.raw.json(),
            "sqlite": {"rest": self.sqlite.rest.json(), "grpc": self.sqlite.grpc.json()},
            "postgres": {"rest": self.postgres.rest.json(), "grpc": self.postgres.grpc.json()},
            "filler": self.filler.as_ref().map(SendRun::json),
            "postgres_over_sqlite": {
                "rest": self.postgres.rest.rate() / self.sqlite.rest.rate(),
                "grpc": self.postgres.grpc.rate() / self.sqlite.grpc.rate(),
            },
            "low_load": {
                "sends": self.low_load_sends,
                "service_p50_ms": ms(service.p50),
                "service_p99_ms": ms(service.p99),
                "node_p50_ms": ms(node.p50),
                "node_p99_ms": ms(node.p99),
            },
            "idle_cpu_percent": self.idle_cpu,
            "instructions_per_rest_send": self.instructions.map(|(c, _)| c.per_send),
            "instructions_per_cached_read": self.instructions.map(|(c, _)| c.per_read),
            "node_requests_per_send": self.instructions.map(|(c, _)| c.node_requests_per_send),
            "before": self.compared.as_ref().map(crate::compare::Compared::json),
            "signature_ms": ms(self.signature),
            "monitor_backlog": self.backlog.iter().map(Backlog::json).collect::<Vec<_>>(),
            "memory_mb": {
                "idle": self.memory.idle_mb.map(|m| m.0),
                "idle_private": self.memory.idle_mb.map(|m| m.1),
                "after_sends": self.memory.after_sends_mb.map(|m| m.0),
                "after_sends_private": self.memory.after_sends_mb.map(|m| m.1),
                "sends": self.memory.sends,
                "idle_connections": self.memory.connections_mb.map(|m| m.0),
                "idle_connections_private": self.memory.connections_mb.map(|m| m.1),
                "connections": self.memory.connections,
            },
            "read_load": {
                "walletops_per_second": self.read_load.0,
                "bare_per_second": self.read_load.1,
                "ratio": self.read_load.0 / self.read_load.1,
            },
            "balance_read": {
                "one_token": self.one_token.json(),
                "tokens_50": self.all_tokens.json(),
                "node_one_token": self.node_reads.0.json(),
                "node_tokens_50": self.node_reads.1.json(),
            },
            "quote": {"walletops": self.quote.json(), "aggregator_alone": self.quote_alone.json()},
            "deposits": self.deposits.as_ref().map(crate::deposits::Figures::json),
            "payouts": self.payouts.as_ref().map(crate::payouts::Figures::json),
            "congestion": self.congestion.as_ref().map(crate::congestion::Figures::json),
            "guard": self.guard.json(),
            "hsm": self.hsm.as_ref().map(crate::hsm::Figures::json),
            "postgres_over_sqlite_pairs": self.pairs.json(),
            "correct": !self.failed(),
        })
    }
}
