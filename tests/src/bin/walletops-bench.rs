//! `walletops-bench`: send throughput of WalletOps (over REST, and straight to the gRPC core)
//! against raw `eth_sendRawTransaction`, and balance-read latency for 1 and 50 tokens beside
//! the node's own time for the same reads, measured side by side in one run on one anvil.
//!
//! Build both binaries with the same profile and run the bench from beside `walletops`:
//!
//! ```sh
//! cargo build --release --workspace --bins && ./target/release/walletops-bench
//! ```
//!
//! Exits non-zero when a send fails or the chain shows a nonce gap or a duplicate; a missed
//! speed goal is only reported.

use std::{
    collections::{BTreeMap, BTreeSet},
    future::Future,
    process::ExitCode,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use alloy::{
    consensus::{SignableTransaction, Transaction as _, TxEip1559, TxEnvelope},
    eips::eip2718::Encodable2718,
    primitives::{Address, B256, TxKind, U256},
    providers::{Provider, bindings::IMulticall3},
    rpc::types::TransactionRequest,
    signers::{SignerSync, local::PrivateKeySigner},
    sol_types::SolCall,
};
use anyhow::{Context, bail, ensure};
use clap::Parser;
use futures::{StreamExt, TryStreamExt};
use serde_json::{Value, json};
use tonic::transport::Channel;
use walletops_proto::v1::{self as pb, wallet_ops_service_client::WalletOpsServiceClient};
use walletops_tests::{
    Backend, Options, Rest, Service,
    anvil::{Anvil, MIXED_MINING},
    poll_until, walletops_bin, with_key,
};

alloy::sol! {
    interface IERC20 {
        function balanceOf(address owner) external view returns (uint256);
    }
}

/// One ether in wei.
const ETH: u128 = 1_000_000_000_000_000_000;

/// Where every benchmark transfer goes.
const RECIPIENT: Address = alloy::primitives::address!("1111111111111111111111111111111111111111");

/// Wei moved by each benchmark transfer.
const AMOUNT_WEI: u64 = 1000;

/// Gas of a plain transfer to an account without code.
const TRANSFER_GAS: u64 = 21_000;

/// Tokens in the large balance read: the most one request may name.
const TOKENS: usize = 50;

/// Untimed requests of each balance read before measuring, so that connections, chain
/// clients and token metadata are set up in both cases alike.
const WARMUP_READS: u64 = 5;

/// Throughput goal: WalletOps sends/s over raw sends/s.
const SEND_RATIO_GOAL: f64 = 0.7;

/// Latency goal: 50-token median over 1-token median.
const READ_RATIO_GOAL: f64 = 1.5;

/// Command line.
#[derive(Debug, Parser)]
#[command(
    name = "walletops-bench",
    about = "WalletOps send throughput against raw eth_sendRawTransaction, and balance-read latency, on one anvil"
)]
struct Args {
    /// Native transfers in each throughput run.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u64).range(1..))]
    sends: u64,
    /// Concurrent clients in each throughput run.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..))]
    concurrency: u64,
    /// Timed requests of each balance read.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..))]
    reads: u64,
    /// Run the service on PostgreSQL (`WALLETOPS_TEST_PG`, default the local server's `test`
    /// database) instead of SQLite.
    #[arg(long)]
    postgres: bool,
}

/// The processes whose CPU time a throughput run accounts for.
#[derive(Debug, Clone, Copy)]
struct Probe {
    walletops: Option<u32>,
    anvil: Option<u32>,
    /// This process: the clients' side of every run.
    client: Option<u32>,
}

/// CPU time (user plus system) used during a throughput run.
#[derive(Debug, Clone, Copy, Default)]
struct CpuUse {
    walletops: Option<Duration>,
    anvil: Option<Duration>,
    client: Option<Duration>,
}

/// CPU time process `pid` has used so far (Linux `/proc`; `None` elsewhere).
fn cpu_time(pid: Option<u32>) -> Option<Duration> {
    let stat = procfs::process::Process::new(i32::try_from(pid?).ok()?)
        .ok()?
        .stat()
        .ok()?;
    let ticks = stat.utime + stat.stime;
    Some(Duration::from_secs_f64(
        ticks as f64 / procfs::ticks_per_second() as f64,
    ))
}

impl Probe {
    /// Runs `work` and returns its result with the CPU time each process used meanwhile.
    async fn measure<T>(self, work: impl Future<Output = T>) -> (T, CpuUse) {
        let now = || {
            (
                cpu_time(self.walletops),
                cpu_time(self.anvil),
                cpu_time(self.client),
            )
        };
        let before = now();
        let out = work.await;
        let after = now();
        let used = |b: Option<Duration>, a: Option<Duration>| Some(a?.saturating_sub(b?));
        let cpu = CpuUse {
            walletops: used(before.0, after.0),
            anvil: used(before.1, after.1),
            client: used(before.2, after.2),
        };
        (out, cpu)
    }
}

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
struct SendRun {
    elapsed: Duration,
    cpu: CpuUse,
    /// Nonces in `0..N` that no returned hash was mined with.
    gaps: usize,
    /// Hashes returned twice, nonces mined twice, and transactions beyond the N requested.
    duplicates: usize,
    /// Returned hashes the chain does not hold as a mined transaction of the wallet, nor a
    /// replacement of it by WalletOps' monitor.
    missing: usize,
    /// Sends mined as a replacement the monitor made (a higher fee at the same nonce), not
    /// with the hash first returned: anvil left the first one queued (foundry-rs/foundry#10122).
    replaced: usize,
}

impl SendRun {
    /// Sends per second of a run of `n`.
    fn rate(&self, n: u64) -> f64 {
        n as f64 / self.elapsed.as_secs_f64()
    }

    /// Whether the chain shows a correctness failure.
    fn failed(&self) -> bool {
        self.gaps > 0 || self.duplicates > 0 || self.missing > 0
    }

    /// The progress line of a run of `n`.
    fn print(&self, n: u64) {
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

/// Latencies of one kind of balance read.
#[derive(Debug)]
struct Latency {
    median: Duration,
    p95: Duration,
}

impl Latency {
    /// Nearest-rank median and p95 of `samples`.
    fn of(mut samples: Vec<Duration>) -> Self {
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
struct Report {
    sends: u64,
    /// Through the REST edge.
    walletops: SendRun,
    /// Straight to the gRPC core.
    grpc: SendRun,
    raw: Duration,
    raw_cpu: CpuUse,
    one_token: Latency,
    all_tokens: Latency,
}

impl Report {
    /// Raw sends per second.
    fn raw_rate(&self) -> f64 {
        self.sends as f64 / self.raw.as_secs_f64()
    }

    /// Whether the chain shows a correctness failure of a WalletOps run.
    fn failed(&self) -> bool {
        self.walletops.failed() || self.grpc.failed()
    }

    /// Prints the summary table.
    fn print(&self) {
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
fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: starting the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(&args)) {
        Ok(report) => {
            report.print();
            if report.failed() {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => {
            eprintln!("error: {e:?}");
            ExitCode::FAILURE
        }
    }
}

/// Sets up anvil and the service, runs the three measurements and returns their figures.
async fn run(args: &Args) -> anyhow::Result<Report> {
    let n = args.sends;
    let concurrency = usize::try_from(args.concurrency)?;
    println!(
        "walletops-bench ({} build, {}): {n} sends, {concurrency} concurrent clients, {} reads per balance case",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        },
        if args.postgres {
            "PostgreSQL"
        } else {
            "SQLite"
        },
        args.reads,
    );
    println!("measuring {}", walletops_bin()?.display());
    // The same node for the raw sends and WalletOps'.
    let anvil = Anvil::start_with(MIXED_MINING).await?;
    anvil.install_multicall().await?;
    // The bench measures the pipeline, not the per-user budgets. anvil now and then keeps a
    // ready transaction queued (foundry-rs/foundry#10122) until the monitor replaces it: a
    // stuck time of 5 s, not 60, lets the run be mined within the wait.
    let svc = Service::start_with(
        if args.postgres {
            Backend::Postgres
        } else {
            Backend::Sqlite
        },
        Options {
            config_toml: Some(format!(
                "{}\n[rate_limits]\nwrites_per_minute = 1000000\nreads_per_minute = 1000000\n[monitor]\nstuck_after_secs = 5\n",
                anvil.chain_toml()
            )),
            ..Options::default()
        },
    )
    .await?;
    let api = &svc.rest(&svc.api_key);
    let wallet = default_evm_wallet(api).await?;
    anvil.set_balance(wallet, U256::from(1000 * ETH)).await?;
    println!(
        "anvil at {}, walletops at {}, wallet {wallet}",
        anvil.url(),
        svc.http
    );

    let probe = Probe {
        walletops: svc.pid(),
        anvil: anvil.pid(),
        client: Some(std::process::id()),
    };
    println!("throughput A: {n} sends through POST /api/v1/send (REST edge) ...");
    let walletops = walletops_sends(
        &anvil,
        api,
        Sender::Rest(api.clone()),
        wallet,
        (0, n),
        concurrency,
        probe,
    )
    .await?;
    walletops.print(n);
    // The monitor settles the run's records (a receipt read each) before the next run, so
    // that it does not share the node with it.
    all_settled(&svc).await?;
    println!("throughput A': {n} sends through WalletOpsService.Send (gRPC core) ...");
    let grpc = Sender::Grpc {
        client: WalletOpsServiceClient::new(svc.channel().await?),
        key: svc.api_key.clone(),
    };
    let mut grpc = walletops_sends(&anvil, api, grpc, wallet, (n, n), concurrency, probe).await?;
    all_settled(&svc).await?;
    // A transaction signed after its run was counted (a late re-signing) is one too many.
    grpc.duplicates += usize::try_from(anvil.nonce(wallet).await?.saturating_sub(2 * n))?;
    grpc.print(n);

    println!("throughput B: {n} pre-signed eth_sendRawTransaction ...");
    let (raw, raw_cpu) = raw_sends(&anvil, n, concurrency, probe).await?;
    println!("  {:.1} sends/s", n as f64 / raw.as_secs_f64());

    println!("balance reads: deploying {TOKENS} tokens ...");
    let core = (
        WalletOpsServiceClient::new(svc.channel().await?),
        svc.api_key.clone(),
    );
    let (one_token, all_tokens) = balance_reads(&anvil, api, &core, wallet, args.reads).await?;

    Ok(Report {
        sends: n,
        walletops,
        grpc,
        raw,
        raw_cpu,
        one_token,
        all_tokens,
    })
}

/// Waits until the monitor has taken every send of `svc` to a final state.
async fn all_settled(svc: &Service) -> anyhow::Result<()> {
    poll_until("the monitor to settle every send", || async {
        let open = svc
            .stored_statuses("send")
            .await?
            .into_iter()
            .filter(|s| s == "submitted" || s == "fee_capped")
            .count();
        Ok((open == 0).then_some(()))
    })
    .await
}

/// The address of the user's default EVM wallet.
async fn default_evm_wallet(api: &Rest) -> anyhow::Result<Address> {
    let reply = api.get("/wallets?chain=ethereum&defaultOnly=true").await?;
    ensure!(reply.status == 200, "GET /wallets: {}", reply.text);
    Ok(reply.body["wallets"][0]["address"]
        .as_str()
        .context("no default EVM wallet")?
        .parse()?)
}

/// Runs `op(0..n)` on `concurrency` clients that each take the next index as soon as their
/// previous call answered; returns the time from the first call to the last answer and the
/// results in index order. Every call is timed, failed or not.
async fn drive<T, F, Fut>(
    n: u64,
    concurrency: usize,
    op: F,
) -> anyhow::Result<(Duration, Vec<anyhow::Result<T>>)>
where
    T: Send + 'static,
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = anyhow::Result<T>> + Send,
{
    let n = usize::try_from(n)?;
    let op = Arc::new(op);
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    // Separate tasks, not one polled stream, so both runtime threads issue requests.
    let workers: Vec<_> = (0..concurrency.min(n))
        .map(|_| {
            let (op, next) = (op.clone(), next.clone());
            tokio::spawn(async move {
                let mut done = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        break;
                    }
                    let result = op(i).await;
                    done.push((i, result, Instant::now()));
                }
                done
            })
        })
        .collect();
    let mut results: Vec<Option<anyhow::Result<T>>> = (0..n).map(|_| None).collect();
    let mut last = start;
    for worker in workers {
        for (i, result, at) in worker.await? {
            last = last.max(at);
            results[i] = Some(result);
        }
    }
    let results = results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(anyhow::anyhow!("never sent"))))
        .collect();
    Ok((last - start, results))
}

/// The values of `results`, or an error naming how many failed and the first few causes.
fn all_ok<T>(results: Vec<anyhow::Result<T>>, what: &str) -> anyhow::Result<Vec<T>> {
    let total = results.len();
    let mut values = Vec::with_capacity(total);
    let mut errors = Vec::new();
    for (i, r) in results.into_iter().enumerate() {
        match r {
            Ok(v) => values.push(v),
            Err(e) => errors.push(format!("#{i}: {e:#}")),
        }
    }
    if !errors.is_empty() {
        bail!(
            "{} of {total} {what} failed; first: {}",
            errors.len(),
            errors
                .iter()
                .take(5)
                .cloned()
                .collect::<Vec<_>>()
                .join(" | ")
        );
    }
    Ok(values)
}

/// One native transfer of `AMOUNT_WEI` to `RECIPIENT` through WalletOps, under a fresh
/// Idempotency-Key; returns its hash.
#[derive(Debug, Clone)]
enum Sender {
    /// `POST /api/v1/send` through the REST edge.
    Rest(Rest),
    /// `WalletOpsService.Send` straight to the gRPC core.
    Grpc {
        client: WalletOpsServiceClient<Channel>,
        key: String,
    },
}

impl Sender {
    async fn send(&self) -> anyhow::Result<(String, B256)> {
        let (id, hash) = match self {
            Self::Rest(api) => {
                let body = json!({"chain": "anvil", "to": RECIPIENT, "asset": "native",
                                  "amount": AMOUNT_WEI.to_string()});
                // `Rest::post` gives every request a fresh Idempotency-Key.
                let reply = api.post("/send", &body).await?;
                ensure!(reply.status == 200, "{} {}", reply.status, reply.text);
                let field = |name: &str| {
                    reply.body[name]
                        .as_str()
                        .map(str::to_owned)
                        .with_context(|| format!("no {name} in {}", reply.text))
                };
                (field("id")?, field("hash")?)
            }
            Self::Grpc { client, key } => {
                let mut req = with_key(
                    pb::SendRequest {
                        chain: "anvil".to_owned(),
                        from: None,
                        to: RECIPIENT.to_string(),
                        asset: pb::Asset::Native.into(),
                        token: None,
                        amount: AMOUNT_WEI.to_string(),
                    },
                    key,
                )?;
                req.metadata_mut()
                    .insert("idempotency-key", uuid::Uuid::new_v4().to_string().parse()?);
                let reply = client.clone().send(req).await?.into_inner();
                let submission = reply.submission.context("no submission")?;
                (
                    submission.id,
                    submission.hash.context("no hash in the submission")?,
                )
            }
        };
        Ok((id, hash.parse()?))
    }
}

/// A throughput run: `n` native sends by `sender` from `wallet`, whose nonce is `first` when
/// it starts; then the chain's view of them.
async fn walletops_sends(
    anvil: &Anvil,
    api: &Rest,
    sender: Sender,
    wallet: Address,
    (first, n): (u64, u64),
    concurrency: usize,
    probe: Probe,
) -> anyhow::Result<SendRun> {
    ensure!(
        anvil.nonce(wallet).await? == first,
        "the wallet's nonce is not {first} before the run"
    );
    let run = drive(n, concurrency, move |_| {
        let sender = sender.clone();
        async move { sender.send().await }
    });
    let (run, cpu) = probe.measure(run).await;
    let (elapsed, results) = run?;
    let sent = all_ok(results, "sends")?;
    let hashes: Vec<B256> = sent.iter().map(|(_, hash)| *hash).collect();

    let end = first + n;
    poll_until(&format!("the wallet's nonce to reach {end}"), || async {
        Ok((anvil.nonce(wallet).await? >= end).then_some(()))
    })
    .await?;
    let on_chain = anvil.nonce(wallet).await?;

    // Look every returned hash up once: the mined transaction's nonce, if it is the wallet's.
    let distinct: BTreeSet<B256> = hashes.iter().copied().collect();
    let mined = |hash: B256| async move {
        let tx = anvil.provider().get_transaction_by_hash(hash).await?;
        Ok::<_, anyhow::Error>(tx.and_then(|tx| {
            (tx.block_number.is_some() && tx.inner.signer() == wallet).then(|| tx.inner.nonce())
        }))
    };
    // A hash not mined may have been replaced by the monitor: its record holds the mined one.
    let lookups: Vec<(Option<u64>, bool)> =
        futures::stream::iter(sent.into_iter().collect::<BTreeSet<_>>())
            .map(|(id, hash)| async move {
                if let Some(nonce) = mined(hash).await? {
                    return Ok::<_, anyhow::Error>((Some(nonce), false));
                }
                let record = api.get(&format!("/tx/{id}")).await?;
                let now: Option<B256> = record.body["hash"].as_str().and_then(|h| h.parse().ok());
                match now {
                    Some(now) if now != hash => Ok((mined(now).await?, true)),
                    _ => Ok((None, false)),
                }
            })
            .buffer_unordered(concurrency)
            .try_collect()
            .await?;
    let missing = lookups.iter().filter(|(l, _)| l.is_none()).count();
    let replaced = lookups.iter().filter(|(l, r)| l.is_some() && *r).count();
    let lookups: Vec<Option<u64>> = lookups.into_iter().map(|(l, _)| l).collect();
    let mut per_nonce: BTreeMap<u64, usize> = BTreeMap::new();
    for nonce in lookups.into_iter().flatten() {
        *per_nonce.entry(nonce).or_default() += 1;
    }
    let gaps = (first..end).filter(|k| !per_nonce.contains_key(k)).count();
    let duplicates = (hashes.len() - distinct.len())
        + per_nonce.values().map(|c| c - 1).sum::<usize>()
        + per_nonce
            .keys()
            .filter(|k| !(first..end).contains(*k))
            .count()
        + usize::try_from(on_chain.saturating_sub(end))?;
    Ok(SendRun {
        elapsed,
        cpu,
        gaps,
        duplicates,
        missing,
        replaced,
    })
}

/// Throughput B: `n` transfers from a fresh local key, signed and encoded before the clock
/// starts, sent with `eth_sendRawTransaction`.
async fn raw_sends(
    anvil: &Anvil,
    n: u64,
    concurrency: usize,
    probe: Probe,
) -> anyhow::Result<(Duration, CpuUse)> {
    let signer = PrivateKeySigner::random();
    let from = signer.address();
    anvil.set_balance(from, U256::from(1000 * ETH)).await?;
    let chain_id = anvil.provider().get_chain_id().await?;
    let fees = anvil.provider().estimate_eip1559_fees().await?;
    let mut bodies = Vec::new();
    let mut expected = Vec::new();
    for nonce in 0..n {
        let tx = TxEip1559 {
            chain_id,
            nonce,
            gas_limit: TRANSFER_GAS,
            max_fee_per_gas: fees.max_fee_per_gas,
            max_priority_fee_per_gas: fees.max_priority_fee_per_gas,
            to: TxKind::Call(RECIPIENT),
            value: U256::from(AMOUNT_WEI),
            access_list: Default::default(),
            input: Default::default(),
        };
        let signature = signer.sign_hash_sync(&tx.signature_hash())?;
        let signed = tx.into_signed(signature);
        expected.push(*signed.hash());
        let raw = TxEnvelope::from(signed).encoded_2718();
        // The whole request body is built now too, so the clock sees only the round trips.
        bodies.push(
            json!({"jsonrpc": "2.0", "id": nonce, "method": "eth_sendRawTransaction",
                   "params": [alloy::primitives::hex::encode_prefixed(raw)]})
            .to_string(),
        );
    }
    let bodies = Arc::new(bodies);
    let http = reqwest::Client::new();
    let url = anvil.url().to_owned();
    let send = {
        let (http, url, bodies) = (http.clone(), url.clone(), bodies.clone());
        move |i: usize| {
            http.post(&url)
                .header("content-type", "application/json")
                .body(bodies[i].clone())
                .send()
        }
    };
    let run = drive(n, concurrency, move |i| {
        let (http, url, bodies) = (http.clone(), url.clone(), bodies.clone());
        async move {
            let reply: Value = http
                .post(&url)
                .header("content-type", "application/json")
                .body(bodies[i].clone())
                .send()
                .await?
                .json()
                .await?;
            if let Some(err) = reply.get("error") {
                bail!("eth_sendRawTransaction: {err}");
            }
            Ok(reply["result"]
                .as_str()
                .context("no hash in the answer")?
                .parse::<B256>()?)
        }
    });
    let (run, cpu) = probe.measure(run).await;
    let (elapsed, results) = run?;
    let hashes = all_ok(results, "raw sends")?;
    ensure!(
        hashes == expected,
        "the node answered other hashes than the signed ones"
    );
    // anvil now and then loses a transaction that reached it out of nonce order
    // (foundry-rs/foundry#10122), and the later ones wait for it in its queue for ever. A
    // nonce that stops moving for 2 s gets its transaction sent again, after the clock
    // stopped, as WalletOps' monitor sends again a transaction its node lost.
    let stall = Arc::new(Mutex::new((0, Instant::now(), 0)));
    poll_until(&format!("the raw sender's nonce to reach {n}"), || {
        let (stall, send) = (stall.clone(), send.clone());
        async move {
            let mined = anvil.nonce(from).await?;
            if mined >= n {
                return Ok(Some(()));
            }
            let resend = {
                let mut stall = stall.lock().unwrap_or_else(PoisonError::into_inner);
                if stall.0 != mined {
                    (stall.0, stall.1) = (mined, Instant::now());
                    false
                } else if stall.1.elapsed() >= Duration::from_secs(2) {
                    (stall.1, stall.2) = (Instant::now(), stall.2 + 1);
                    true
                } else {
                    false
                }
            };
            if resend {
                send(usize::try_from(mined)?).await?;
            }
            Ok(None)
        }
    })
    .await?;
    let lost = stall.lock().unwrap_or_else(PoisonError::into_inner).2;
    if lost > 0 {
        println!(
            "  anvil lost {lost} raw transaction(s) (foundry-rs/foundry#10122); sent again after the run"
        );
    }
    Ok((elapsed, cpu))
}

/// Balance reads: median and p95 of `GET /wallets/balances?fresh=true` naming 1 token and
/// naming `TOKENS` tokens.
async fn balance_reads(
    anvil: &Anvil,
    api: &Rest,
    (core, key): &(WalletOpsServiceClient<Channel>, String),
    wallet: Address,
    reads: u64,
) -> anyhow::Result<(Latency, Latency)> {
    let mut tokens = Vec::with_capacity(TOKENS);
    for i in 0..TOKENS {
        let token = anvil.deploy_token(&format!("T{i:02}"), 18).await?;
        anvil
            .mint(token, wallet, U256::from(1000 + i as u64))
            .await?;
        tokens.push(token.to_string());
    }
    // Native plus every token: all are non-zero, so each must be listed.
    let mut rest = |n: usize| {
        let path = format!(
            "/wallets/balances?chain=anvil&tokens={}&fresh=true",
            tokens[..n].join(",")
        );
        let api = api.clone();
        async move {
            let start = Instant::now();
            let reply = api.get(&path).await?;
            let took = start.elapsed();
            ensure!(reply.status == 200, "GET {path}: {}", reply.text);
            let listed = reply.body["balances"].as_array().map_or(0, Vec::len);
            ensure!(listed == n + 1, "expected {} balances, got {listed}", n + 1);
            Ok::<_, anyhow::Error>(took)
        }
    };
    one_against_all(WARMUP_READS, &mut rest).await?;
    let through_rest = one_against_all(reads, &mut rest).await?;
    // The edge's share: the same reads asked of the gRPC core directly.
    let grpc = |n: usize| {
        let req = pb::GetBalancesRequest {
            chain: "anvil".to_owned(),
            address: None,
            tokens: tokens[..n].to_vec(),
            include_zero: None,
            fresh: Some(true),
        };
        let (mut core, key) = (core.clone(), key.clone());
        async move {
            let start = Instant::now();
            let reply = core.get_balances(with_key(req, &key)?).await?.into_inner();
            let took = start.elapsed();
            ensure!(
                reply.balances.len() == n + 1,
                "expected {} balances, got {}",
                n + 1,
                reply.balances.len()
            );
            Ok::<_, anyhow::Error>(took)
        }
    };
    print_medians("gRPC core", one_against_all(reads, grpc).await?);
    // The node's share: the same Multicall3 reads asked of anvil directly.
    let token_addrs: Vec<Address> = tokens.iter().map(|t| t.parse()).collect::<Result<_, _>>()?;
    let node = |n: usize| {
        let mut calls = vec![IMulticall3::Call3 {
            target: alloy::providers::MULTICALL3_ADDRESS,
            allowFailure: false,
            callData: IMulticall3::getEthBalanceCall { addr: wallet }
                .abi_encode()
                .into(),
        }];
        calls.extend(token_addrs[..n].iter().map(|t| IMulticall3::Call3 {
            target: *t,
            allowFailure: true,
            callData: IERC20::balanceOfCall { owner: wallet }.abi_encode().into(),
        }));
        let req = TransactionRequest::default()
            .to(alloy::providers::MULTICALL3_ADDRESS)
            .input(IMulticall3::aggregate3Call { calls }.abi_encode().into());
        async move {
            let start = Instant::now();
            anvil.provider().call(req).await?;
            Ok::<_, anyhow::Error>(start.elapsed())
        }
    };
    print_medians("node alone", one_against_all(reads, node).await?);
    Ok(through_rest)
}

/// `reads` timings each of `time(1)` and `time(TOKENS)`, taken in turn so that any drift of
/// the machine or the node hits both cases alike.
async fn one_against_all<Fut>(
    reads: u64,
    mut time: impl FnMut(usize) -> Fut,
) -> anyhow::Result<(Latency, Latency)>
where
    Fut: Future<Output = anyhow::Result<Duration>>,
{
    let (mut one, mut all) = (Vec::new(), Vec::new());
    for _ in 0..reads {
        one.push(time(1).await?);
        all.push(time(TOKENS).await?);
    }
    Ok((Latency::of(one), Latency::of(all)))
}

/// Prints the medians of a 1-token and a `TOKENS`-token read asked of `what`.
fn print_medians(what: &str, (one, all): (Latency, Latency)) {
    println!(
        "  {what}: 1 token median {:.2} ms, {TOKENS} tokens median {:.2} ms",
        ms(one.median),
        ms(all.median)
    );
}
