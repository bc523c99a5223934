//! `walletops`: the one binary. `serve` runs the core and the edge in one process on embedded
//! defaults; `core` and `edge` run them apart; the rest are local admin commands that act on
//! the configured database directly.
//!
//! - `cli`: the commands and flags.
//! - `serve`: `serve`, `core` and `edge`: binding, running the servers, stopping.
//! - `admin`: `users`, `keys`, `wallets` and `migrate`.
//! - `webhooks`: `webhooks`.
//! - `approvals`: `approvals`.

mod admin;
mod approvals;
mod cli;
mod hsm;
mod metrics_listener;
mod payouts;
mod serve;
mod serving_record;
mod webhooks;

use anyhow::Context as _;
use clap::Parser;
use tracing_subscriber::{EnvFilter, fmt, prelude::*};
use walletops_core::{Config, config::LogFormat};

use crate::{
    cli::{Cli, Command},
    serve::Role,
};

fn init_tracing(format: LogFormat) {
    // The libraries' own INFO lines (one per migration applied) stay below the default level:
    // a first start's output is what a new operator reads.
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(format!("info,{}", walletops_store::QUIET_LOG_TARGETS)));
    let registry = tracing_subscriber::registry().with(filter);
    // Colour codes only for a person at a terminal: stderr sent to a file, a pipe or a log
    // collector would keep them as escape sequences in every line.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    match format {
        LogFormat::Json => registry
            .with(
                fmt::layer()
                    .json()
                    .with_ansi(false)
                    .with_writer(std::io::stderr),
            )
            .init(),
        LogFormat::Text => registry
            .with(fmt::layer().with_ansi(ansi).with_writer(std::io::stderr))
            .init(),
    }
}

/// Every request allocates many small, short-lived buffers across the runtime's threads
/// (JSON, protobuf, RPC bodies): mimalloc's per-thread free lists serve them with less
/// contention and fragmentation than the system allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_arena_eager_commit` (its `mimalloc.h`; the crate names only the
/// stable options).
#[cfg(target_os = "linux")]
const ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;

/// Arenas committed eagerly give freed memory back by a reset that leaves it resident until
/// the kernel needs it: an idle service held some 20 MB that its start had allocated and
/// freed (27 MB private memory against 7.5 MB). Committed on demand, freed memory is
/// decommitted. It must be set before the first allocation makes the first arena, which
/// Rust's own start does before `main`: the loader runs this first.
#[cfg(target_os = "linux")]
extern "C" fn commit_arenas_on_demand() {
    // SAFETY: runs once, before any thread; mimalloc options are plain values.
    unsafe { libmimalloc_sys::mi_option_set(ARENA_EAGER_COMMIT, 0) };
}

#[cfg(target_os = "linux")]
#[used]
#[unsafe(link_section = ".init_array")]
static COMMIT_ARENAS_ON_DEMAND: extern "C" fn() = commit_arenas_on_demand;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    run().await
}

async fn run() -> anyhow::Result<()> {
    // Fault-injection points from FAILPOINTS, only in builds with the `failpoints` feature.
    let _failpoints = fail::FailScenario::setup();
    let cli = Cli::parse();
    let mut config = Config::load(cli.config.as_deref())?;
    cli.command.apply(&mut config);
    // A command beside a running server sees the chains and the address it recorded.
    if !matches!(
        cli.command,
        Command::Serve(_) | Command::Core(_) | Command::Edge { .. } | Command::Mcp { .. }
    ) {
        serving_record::apply(&mut config);
    }
    // Again: the flags may have changed what was checked.
    config.validate()?;
    init_tracing(config.log_format);
    match cli.command {
        Command::Serve(args) => {
            let print_key = args.addrs.print_key || args.dev;
            serve::run(config, Role::Both { dev: args.dev }, print_key).await
        }
        Command::Core(addrs) => serve::run(config, Role::Core, addrs.print_key).await,
        Command::Edge { .. } => serve::run(config, Role::Edge, false).await,
        Command::Mcp { url, key_file } => {
            let key = zeroize::Zeroizing::new(
                std::fs::read_to_string(&key_file)
                    .with_context(|| format!("reading {}", key_file.display()))?,
            );
            let url = if url.trim_end_matches('/').ends_with("/mcp") {
                url
            } else {
                format!("{}/mcp", url.trim_end_matches('/'))
            };
            walletops_edge::serve_mcp_stdio(&url, key.trim()).await
        }
        Command::Migrate(_) => admin::migrate(&config).await,
        Command::Users { command, .. } => admin::users(config, command).await,
        Command::Keys { command, .. } => admin::keys(config, command).await,
        Command::Wallets { command, .. } => admin::wallets(config, command).await,
        Command::Webhooks { command, .. } => webhooks::webhooks(config, command).await,
        Command::Approvals { command, .. } => approvals::approvals(config, command).await,
        Command::Payouts { command, .. } => payouts::payouts(config, command).await,
        Command::Keystore { command, .. } => admin::keystore(config, command).await,
        Command::Hsm { command, .. } => hsm::hsm(&config, command).await,
        Command::Backup { file, .. } => admin::backup(&config, &file).await,
    }
}
