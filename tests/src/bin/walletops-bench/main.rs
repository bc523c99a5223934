//! `walletops-bench`: send throughput of WalletOps (over REST, and straight to the gRPC core)
//! against raw `eth_sendRawTransaction`, balance-read latency for 1 and 50 tokens beside the
//! node's own time for the same reads, and quote latency beside the aggregator's own time for
//! the same quote, measured side by side in one run on one anvil.
//!
//! Build both binaries with the same profile and run the bench from beside `walletops`:
//!
//! ```sh
//! cargo build --release --workspace --bins && ./target/release/walletops-bench
//! ```
//!
//! Exits non-zero when a send fails or the chain shows a nonce gap or a duplicate; a missed
//! speed goal is only reported.

mod cpu;
mod drive;
mod quotes;
mod reads;
mod report;
mod sends;

use std::process::ExitCode;

use alloy::primitives::U256;
use clap::Parser;
use walletops_proto::v1::wallet_ops_service_client::WalletOpsServiceClient;
use walletops_tests::{
    Backend, Options, Service,
    anvil::{Anvil, MIXED_MINING},
    walletops_bin,
};

use crate::{
    cpu::Probe,
    quotes::{AGGREGATOR_KEY, open_venue, quote_latency},
    reads::{TOKENS, balance_reads},
    report::Report,
    sends::{Sender, all_settled, raw_sends, walletops_sends},
};

/// One ether in wei.
const ETH: u128 = 1_000_000_000_000_000_000;

/// Command line.
#[derive(Debug, Parser)]
#[command(
    name = "walletops-bench",
    about = "WalletOps send throughput against raw eth_sendRawTransaction, and balance-read and quote latency, on one anvil"
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
    /// Run the service on PostgreSQL (`WALLETOPS_TEST_PG`, default the local server's `test`
    /// database) instead of SQLite.
    #[arg(long)]
    postgres: bool,
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
    let venue = open_venue(&anvil).await?;
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
    let api = &svc.rest(&svc.api_key);
    let wallet = anvil
        .fund_default_wallet(api, U256::from(1000 * ETH))
        .await?;
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
    println!(
        "quotes: {} through POST /api/v1/trade/quote and as many from the aggregator alone ...",
        args.reads
    );
    let (quote, quote_alone) = quote_latency(api, &venue, args.reads).await?;

    Ok(Report {
        sends: n,
        walletops,
        grpc,
        raw,
        raw_cpu,
        one_token,
        all_tokens,
        quote,
        quote_alone,
    })
}
