//! `walletops-bench`: what the service costs and how fast it is, measured side by side in
//! one run on one anvil: send throughput and the service's CPU per send over REST and
//! straight to the gRPC core, on SQLite and on PostgreSQL (with the database server's CPU),
//! beside raw `eth_sendRawTransaction`; a send's latency at concurrency 1 beside the node's
//! own time for the same calls; resident memory idle, after many sends and with idle
//! connections open; balance reads of 1 and 50 tokens; quotes beside the aggregator alone;
//! deposits found per second and the delay to their webhooks.
//!
//! Build both binaries with the same profile and run the bench from beside `walletops`:
//!
//! ```sh
//! cargo build --release --workspace --bins && ./target/release/walletops-bench --json bench.json
//! ```
//!
//! Exits non-zero when a send fails or the chain shows a nonce gap or a duplicate; a missed
//! goal is only reported.

mod backlog;
mod compare;
mod congestion;
mod cpu;
mod deposits;
mod drive;
mod guard;
mod hsm;
mod instructions;
mod latency;
mod load;
mod memory;
mod pairs;
mod payouts;
mod quotes;
mod reads;
mod report;
mod sends;
mod soak;

use std::process::ExitCode;

use alloy::primitives::U256;
use clap::Parser;
use walletops_proto::v1::wallet_ops_service_client::WalletOpsServiceClient;
use walletops_tests::{
    Backend, Options, Rest, Service,
    anvil::{Anvil, MIXED_MINING},
    walletops_bin,
};

use crate::{
    cpu::{Probe, rss_mb},
    latency::low_load,
    memory::idle_connections,
    quotes::{AGGREGATOR_KEY, quote_latency},
    reads::{TOKENS, balance_reads},
    report::{Memory, Report, SendRun, StoreRuns},
    sends::{Sender, all_settled, raw_sends, signing_floor, walletops_sends},
};

/// One ether in wei.
const ETH: u128 = 1_000_000_000_000_000_000;

/// Seconds the idle service's CPU is measured over.
const IDLE_SECS: u64 = 10;

/// Command line.
#[derive(Debug, Parser)]
#[command(
    name = "walletops-bench",
    about = "WalletOps throughput, CPU, latency and memory on SQLite and PostgreSQL, beside the node alone, on one anvil"
)]
struct Args {
    /// Native transfers in each throughput run.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u64).range(1..))]
    sends: u64,
    /// Concurrent clients in each throughput run.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..))]
    concurrency: u64,
    /// Timed requests of each balance read, and quotes of each kind.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..))]
    reads: u64,
    /// Sends one at a time for the latency at low load.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..))]
    latency_sends: u64,
    /// Sends the SQLite service has made in all when its memory is read after them.
    #[arg(long, default_value_t = 10_000)]
    memory_sends: u64,
    /// Idle keep-alive connections open on the REST listener when memory is read again.
    #[arg(long, default_value_t = 1000)]
    connections: usize,
    /// REST sends (and cached reads) made under callgrind for the instructions per send (and
    /// per read); 0: none.
    #[arg(long, default_value_t = 200)]
    callgrind_sends: u64,
    /// Keep the callgrind profile of those sends in this file.
    #[arg(long)]
    callgrind_out: Option<std::path::PathBuf>,
    /// A walletops binary of an earlier build: a send's instructions, CPU and node requests
    /// are also measured on it, beside this build's.
    #[arg(long)]
    before: Option<std::path::PathBuf>,
    /// Open records held unmined when the monitor's sweeps are measured, ascending; none:
    /// skip.
    #[arg(long, value_delimiter = ',', default_value = "1000,10000")]
    backlog: Vec<u64>,
    /// Wallets the backlog is sent from.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    backlog_wallets: u64,
    /// Seconds the monitor's sweeps are watched at each backlog.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    backlog_secs: u64,
    /// Seconds of each wrk run of the read load.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    load_secs: u64,
    /// Deposits made at once (one block) for the deposits-found rate; 0: skip the deposit
    /// runs.
    #[arg(long, default_value_t = 1000)]
    deposits: u64,
    /// Deposits made one at a time for the delay to their `deposit.pending` webhook.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..))]
    deposit_delays: u64,
    /// Items of the payout timed against as many single sends; 0: skip the payout runs.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(0..=1000))]
    payout_items: u64,
    /// Solana transfers of each kind (estimated, unpriced) on the busy node; 0: skip the
    /// congestion runs.
    #[arg(long, default_value_t = 40)]
    congested_sends: usize,
    /// Blocks of the EVM run under a rising base fee.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    rising_blocks: u64,
    /// REST sends from an HSM wallet and from a keystore wallet, for their CPU side by side
    /// (with the token's signatures per second); 0: skip.
    #[arg(long, default_value_t = 200)]
    hsm_sends: u64,
    /// Open records stuck on a frozen head when the monitor's requests are counted; 0: skip.
    #[arg(long, default_value_t = 5000)]
    frozen_records: u64,
    /// Run the congestion phases alone, and print their lines.
    #[arg(long)]
    congestion_only: bool,
    /// Run the soak alone, for this many minutes: a steady mixed load on both stores, then
    /// what memory, errors, records, the chain, webhooks and an event watcher show.
    #[arg(long, value_name = "MINUTES")]
    soak: Option<f64>,
    /// Also write every figure to this file, as JSON.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
    /// Serve the bare "hello" handler instead (the bench starts itself so).
    #[arg(long, hide = true)]
    bare_server: bool,
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
    if args.bare_server {
        if let Err(e) = runtime.block_on(load::serve_bare()) {
            eprintln!("error: {e:?}");
        }
        return ExitCode::FAILURE;
    }
    if args.congestion_only {
        let run = congestion::congestion(
            args.congested_sends.max(1),
            usize::try_from(args.rising_blocks).unwrap_or(30),
            args.frozen_records,
            usize::try_from(args.concurrency).unwrap_or(32),
        );
        let figures = runtime.block_on(run).map(|f| {
            f.print();
            (f.failed(), f.json())
        });
        return ended(figures, args.json.as_deref());
    }
    if let Some(minutes) = args.soak {
        let figures = runtime.block_on(soak::soak(minutes)).map(|runs| {
            runs.iter().for_each(soak::Figures::print);
            let json = runs.iter().map(soak::Figures::json).collect();
            (runs.iter().any(soak::Figures::failed), json)
        });
        return ended(figures, args.json.as_deref());
    }
    let report = runtime.block_on(run(&args)).map(|r| {
        r.print();
        (r.failed(), r.json())
    });
    ended(report, args.json.as_deref())
}

/// The exit of a run that ended as `run` says (whether something went wrong beyond a missed
/// goal, and its figures, or an error), the figures written to `path` if asked.
fn ended(
    run: anyhow::Result<(bool, serde_json::Value)>,
    path: Option<&std::path::Path>,
) -> ExitCode {
    let (failed, json) = match run {
        Ok(ended) => ended,
        Err(e) => {
            eprintln!("error: {e:?}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(path) = path {
        let text = serde_json::to_string_pretty(&json).unwrap_or_default();
        if let Err(e) = std::fs::write(path, text + "\n") {
            eprintln!("error: writing {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        println!("figures written to {}", path.display());
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// A service on `backend` over `anvil`, quoting at `venue`, its default EVM wallet funded.
async fn start_service(
    backend: Backend,
    anvil: &Anvil,
    venue: &walletops_tests::venue::Venue,
) -> anyhow::Result<(Service, Rest, alloy::primitives::Address)> {
    // The bench measures the pipeline, not the per-user budgets. anvil now and then keeps a
    // ready transaction queued (foundry-rs/foundry#10122) until the monitor replaces it: a
    // stuck time of 5 s, not 60, lets the run be mined within the wait.
    let svc = Service::start_with(
        backend,
        Options {
            log_file: None,
            config_toml: Some(format!(
                "{}\n[rate_limits]\nwrites_per_minute = 1000000\nreads_per_minute = 1000000\n[monitor]\nstuck_after_secs = 5\n",
                anvil.chain_toml()
            )),
            env: vec![
                ("WALLETOPS_TRADE__EVM__BASE_URL".to_owned(), venue.url.clone()),
                ("WALLETOPS_TRADE__EVM__API_KEY".to_owned(), AGGREGATOR_KEY.to_owned()),
            ],
        },
    )
    .await?;
    let api = svc.rest(&svc.api_key);
    let wallet = anvil
        .fund_default_wallet(&api, U256::from(1_000_000 * ETH))
        .await?;
    Ok((svc, api, wallet))
}

/// Untimed sends before a store's runs, at their concurrency: each service is measured with
/// its pool's connections open, its statements prepared and its wallet's nonce known, as a
/// running service has them. Without it the first run of a fresh service (PostgreSQL's REST
/// run) paid for all of that, and ran a fifth slower than the gRPC run after it.
const STORE_WARMUP: u64 = 100;

/// The REST and gRPC throughput runs of `n` sends on `svc`, whose wallet's nonce is
/// `first`, after `STORE_WARMUP` untimed sends; each run's records settled before the next.
/// Returns the runs and the nonce after them.
async fn store_runs(
    anvil: &Anvil,
    (svc, api, wallet): (&Service, &Rest, alloy::primitives::Address),
    (first, n): (u64, u64),
    concurrency: usize,
    probe: Probe,
) -> anyhow::Result<(StoreRuns, u64)> {
    let rest = Sender::Rest(api.clone());
    let warm = (first, STORE_WARMUP);
    walletops_sends(anvil, api, rest.clone(), wallet, warm, concurrency, probe).await?;
    all_settled(svc).await?;
    let first = first + STORE_WARMUP;
    println!("  {n} sends through POST /api/v1/send (REST edge) ...");
    let rest = walletops_sends(anvil, api, rest, wallet, (first, n), concurrency, probe).await?;
    rest.print();
    // The monitor settles the run's records (a receipt read each) before the next run, so
    // that it does not share the node with it.
    all_settled(svc).await?;
    println!("  {n} sends through WalletOpsService.Send (gRPC core) ...");
    let grpc = Sender::Grpc {
        client: WalletOpsServiceClient::new(svc.channel().await?),
        key: svc.api_key.clone(),
    };
    let end = first + n;
    let mut grpc = walletops_sends(anvil, api, grpc, wallet, (end, n), concurrency, probe).await?;
    all_settled(svc).await?;
    // A transaction signed after its run was counted (a late re-signing) is one too many.
    grpc.chain.duplicates += usize::try_from(anvil.nonce(wallet).await?.saturating_sub(end + n))?;
    grpc.print();
    Ok((StoreRuns { rest, grpc }, end + n))
}

/// Sets up anvil and both services, runs every measurement and returns their figures.
async fn run(args: &Args) -> anyhow::Result<Report> {
    let n = args.sends;
    let concurrency = usize::try_from(args.concurrency)?;
    println!(
        "walletops-bench ({} build): {n} sends per run, {concurrency} concurrent clients, {} reads per balance case",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        },
        args.reads,
    );
    println!("measuring {}", walletops_bin()?.display());
    // Before anything else runs: the machine's own speed, for the CPU figures.
    let signature = signing_floor(2000)?;
    // The same node for the raw sends and WalletOps'.
    let anvil = Anvil::start_with(MIXED_MINING).await?;
    anvil.install_multicall().await?;
    let venue = walletops_tests::venue::Venue::open(&anvil, "BQT", 100).await?;
    let (svc, api, wallet) = start_service(Backend::Sqlite, &anvil, &venue).await?;
    let api = &api;
    println!(
        "anvil at {}, walletops (SQLite) at {}, wallet {wallet}",
        anvil.url(),
        svc.http
    );
    let idle_mb = rss_mb(svc.pid());
    let probe = Probe {
        walletops: svc.pid(),
        anvil: anvil.pid(),
        client: Some(std::process::id()),
        postgres: false,
    };

    println!(
        "low load: {} sends one at a time through REST, each beside the node's own calls ...",
        args.latency_sends
    );
    let low_load = low_load(&anvil, &Sender::Rest(api.clone()), args.latency_sends).await?;
    let mut sent = args.latency_sends + latency::WARMUP;
    anvil
        .wait_for_nonce("the low-load sends to be mined", wallet, sent)
        .await?;
    all_settled(&svc).await?;

    println!("SQLite:");
    let (sqlite, after) =
        store_runs(&anvil, (&svc, api, wallet), (sent, n), concurrency, probe).await?;
    sent = after;
    // Right after SQLite's, before the memory run's thousands of sends: after them, anvil's
    // own CPU per send was two to four times that of the SQLite runs, and the store compared
    // was in fact the node's history.
    println!("PostgreSQL:");
    let (pg, pg_api, pg_wallet) = start_service(Backend::Postgres, &anvil, &venue).await?;
    let pg_probe = Probe {
        walletops: pg.pid(),
        postgres: true,
        ..probe
    };
    let (postgres, pg_sent) = store_runs(
        &anvil,
        (&pg, &pg_api, pg_wallet),
        (0, n),
        concurrency,
        pg_probe,
    )
    .await?;
    println!(
        "PostgreSQL against SQLite: {} pairs of {n} REST sends ...",
        pairs::PAIRS
    );
    let sides = (
        (&svc, api, wallet, sent, probe),
        (&pg, &pg_api, pg_wallet, pg_sent, pg_probe),
    );
    let (pairs, after, _) = pairs::pairs(&anvil, sides, (n, concurrency)).await?;
    sent = after;
    drop(pg);

    // In runs of at most 1,000, each mined and settled before the next: anvil mines a
    // backlog of thousands from one sender slowly.
    let mut filler: Option<SendRun> = None;
    if args.memory_sends > sent {
        println!(
            "memory: {} more sends through REST, to {} in all ...",
            args.memory_sends - sent,
            args.memory_sends
        );
    }
    while args.memory_sends > sent {
        let more = (args.memory_sends - sent).min(1000);
        let run = walletops_sends(
            &anvil,
            api,
            Sender::Rest(api.clone()),
            wallet,
            (sent, more),
            concurrency,
            probe,
        )
        .await?;
        all_settled(&svc).await?;
        sent += more;
        filler = Some(match filler {
            None => run,
            Some(total) => total.and(run),
        });
    }
    if let Some(run) = &filler {
        run.print();
    }
    let after_sends_mb = rss_mb(svc.pid());
    // Every record settled: what the service spends with nothing to do (its monitor's
    // sweeps, the workers' polls).
    println!("idle: the service's CPU over {IDLE_SECS} s with no open record ...");
    let ((), idle) = probe
        .measure(tokio::time::sleep(std::time::Duration::from_secs(
            IDLE_SECS,
        )))
        .await;
    let idle_cpu = idle
        .walletops
        .map(|cpu| 100.0 * cpu.as_secs_f64() / IDLE_SECS as f64);
    println!(
        "memory: {} idle keep-alive connections ...",
        args.connections
    );
    let open = idle_connections(&svc.http, &svc.api_key, args.connections).await?;
    let connections_mb = rss_mb(svc.pid());
    drop(open);

    println!("raw: {n} pre-signed eth_sendRawTransaction ...");
    let raw = raw_sends(&anvil, n, concurrency, probe).await?;
    println!("  {:.1} sends/s", raw.rate());

    let counted = (args.callgrind_sends, concurrency);
    let instructions = if args.callgrind_sends > 0 {
        println!(
            "instructions: {} REST sends and as many cached balance reads to a service under callgrind ...",
            args.callgrind_sends
        );
        let bin = walletops_bin()?;
        let keep = args.callgrind_out.as_deref();
        Some(instructions::per_send_and_read(&anvil, &bin, counted, keep).await?)
    } else {
        None
    };
    let compared = match (&args.before, instructions) {
        (Some(before_bin), Some(now)) => {
            println!(
                "before: the same sends to {} under callgrind, then {n} sends to each build for its CPU ...",
                before_bin.display()
            );
            let before = instructions::per_send_and_read(&anvil, before_bin, counted, None).await?;
            let sends = (n, concurrency);
            let before_cpu = compare::cpu_per_send(&anvil, before_bin, sends).await?;
            let now_cpu = compare::cpu_per_send(&anvil, &walletops_bin()?, sends).await?;
            Some(compare::Compared {
                before_bin: before_bin.clone(),
                before: compare::Side {
                    counted: before,
                    cpu: before_cpu,
                },
                now: compare::Side {
                    counted: now,
                    cpu: now_cpu,
                },
            })
        }
        _ => None,
    };

    let mut backlog = Vec::new();
    if !args.backlog.is_empty() {
        println!(
            "monitor: backlogs of {:?} open records from {} wallets on an anvil that does not mine ...",
            args.backlog, args.backlog_wallets
        );
        backlog = backlog::monitor_at_scale(
            &args.backlog,
            usize::try_from(args.backlog_wallets)?,
            concurrency,
            std::time::Duration::from_secs(args.backlog_secs),
            3600,
        )
        .await?;
    }

    println!("balance reads: deploying {TOKENS} tokens ...");
    let core = (
        WalletOpsServiceClient::new(svc.channel().await?),
        svc.api_key.clone(),
    );
    let ((one_token, all_tokens), node_reads) =
        balance_reads(&anvil, api, &core, wallet, args.reads).await?;
    println!(
        "quotes: {} through POST /api/v1/trade/quote and as many from the aggregator alone ...",
        args.reads
    );
    let (quote, quote_alone) = quote_latency(api, &venue, args.reads).await?;
    println!(
        "read load: wrk on cached GET /api/v1/wallets/balances and on a bare axum handler, {concurrency} connections, {} s each ...",
        args.load_secs
    );
    let read_load = load::reads_against_bare(
        &svc.http,
        &svc.api_key,
        concurrency,
        std::time::Duration::from_secs(args.load_secs),
    )
    .await?;

    let deposits = if args.deposits > 0 {
        println!(
            "deposits: {} made at once, then {} one at a time, to a service scanning a fresh anvil ...",
            args.deposits, args.deposit_delays
        );
        Some(deposits::deposits(args.deposits, args.deposit_delays).await?)
    } else {
        None
    };

    let payouts = if args.payout_items > 0 {
        println!(
            "payouts: one of {} items, then {} single sends, from one wallet on a fresh anvil ...",
            args.payout_items, args.payout_items
        );
        Some(payouts::payouts(args.payout_items).await?)
    } else {
        None
    };

    let hsm = if args.hsm_sends > 0 {
        println!(
            "hsm: {} REST sends from a keystore wallet, as many from a SoftHSM2 wallet, the token's signatures per second ...",
            args.hsm_sends
        );
        Some(hsm::hsm(&anvil, args.hsm_sends, concurrency).await?)
    } else {
        None
    };

    println!(
        "guard: a limited key's token transfer from a wallet without its guard, then with it ..."
    );
    let guard = guard::guard_gas().await?;

    let congestion = if args.congested_sends > 0 {
        println!("congestion: a busy Solana node, a rising EVM base fee, a frozen head ...");
        Some(
            congestion::congestion(
                args.congested_sends,
                usize::try_from(args.rising_blocks)?,
                args.frozen_records,
                concurrency,
            )
            .await?,
        )
    } else {
        None
    };

    Ok(Report {
        guard,
        congestion,
        hsm,
        deposits,
        payouts,
        sqlite,
        postgres,
        filler,
        raw,
        one_token,
        all_tokens,
        node_reads,
        pairs,
        quote,
        quote_alone,
        low_load,
        low_load_sends: args.latency_sends,
        read_load,
        idle_cpu,
        instructions: instructions.map(|counted| (counted, args.callgrind_sends)),
        compared,
        signature,
        backlog,
        memory: Memory {
            idle_mb,
            after_sends_mb,
            sends: sent,
            connections_mb,
            connections: args.connections,
        },
    })
}
