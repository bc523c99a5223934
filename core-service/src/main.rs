//! `walletops`: the one binary. `serve` runs the core and the edge in one process on embedded
//! defaults; `core` and `edge` run them apart; the rest are local admin commands that act on
//! the configured database directly.

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use tokio::{net::TcpListener, sync::watch};
use tracing_subscriber::{EnvFilter, fmt, prelude::*};
use walletops_core::{
    Config, Core,
    auth::{Expiration, KeyState},
    bootstrap::FIRST_USER,
    config::LogFormat,
    devnet,
    domain::{ApiKey, ChainFamily},
};

#[derive(Debug, Parser)]
#[command(
    name = "walletops",
    version,
    about = "WalletOps: one safe API over your custodial wallets"
)]
struct Cli {
    /// TOML configuration file.
    #[arg(long, global = true, env = "WALLETOPS_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Args, Default)]
struct Addrs {
    /// REST listen address [env: WALLETOPS_HTTP_ADDR] [default: 127.0.0.1:8080].
    #[arg(long)]
    http_addr: Option<SocketAddr>,
    /// gRPC listen address [env: WALLETOPS_GRPC_ADDR] [default: 127.0.0.1:50051].
    #[arg(long)]
    grpc_addr: Option<SocketAddr>,
    /// Data directory [env: WALLETOPS_DATA_DIR] [default: ./walletops-data].
    #[arg(long)]
    data_dir: Option<PathBuf>,
}

#[derive(Debug, Args, Default)]
struct DataDir {
    /// Data directory [env: WALLETOPS_DATA_DIR] [default: ./walletops-data].
    #[arg(long)]
    data_dir: Option<PathBuf>,
}

#[derive(Debug, Args, Default)]
struct ServeArgs {
    #[command(flatten)]
    addrs: Addrs,
    /// Also start a local anvil node as chain `anvil` (from the project's npm install), fund
    /// the first user's EVM wallet and print a ready curl line.
    #[arg(long)]
    dev: bool,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the core and the REST edge in one process.
    Serve(ServeArgs),
    /// Run the gRPC core alone.
    Core(Addrs),
    /// Run the REST edge alone, forwarding to a core.
    Edge {
        /// The core's gRPC URL [env: WALLETOPS_CORE_URL] [default: http://127.0.0.1:50051].
        #[arg(long)]
        core_url: Option<String>,
        /// REST listen address [env: WALLETOPS_HTTP_ADDR] [default: 127.0.0.1:8080].
        #[arg(long)]
        http_addr: Option<SocketAddr>,
    },
    /// Manage users.
    Users {
        #[command(subcommand)]
        command: UsersCommand,
        #[command(flatten)]
        data: DataDir,
    },
    /// Manage a user's API keys.
    Keys {
        #[command(subcommand)]
        command: KeysCommand,
        #[command(flatten)]
        data: DataDir,
    },
    /// Manage wallets.
    Wallets {
        #[command(subcommand)]
        command: WalletsCommand,
        #[command(flatten)]
        data: DataDir,
    },
    /// Run pending database migrations and exit.
    Migrate(DataDir),
}

#[derive(Debug, Subcommand)]
enum UsersCommand {
    /// Create a user, print its first API key, and give it one EVM and one Solana wallet.
    Create {
        /// Unique user name.
        name: String,
        /// Do not create the starter wallets.
        #[arg(long)]
        no_wallets: bool,
    },
    /// List users.
    List,
}

#[derive(Debug, Subcommand)]
enum KeysCommand {
    /// Create a key and print its value (shown once).
    Create {
        /// Owner: user name or id.
        #[arg(long, default_value = FIRST_USER)]
        user: String,
        /// Descriptive name.
        #[arg(long)]
        name: String,
        /// Lifetime: never, 7d, 30d, 90d, 180d or 1y.
        #[arg(long, default_value = "never")]
        expires: Expiration,
    },
    /// List a user's keys (never their values).
    List {
        /// Owner: user name or id.
        #[arg(long, default_value = FIRST_USER)]
        user: String,
    },
    /// Revoke a key at once and for good.
    Revoke {
        /// Owner: user name or id.
        #[arg(long, default_value = FIRST_USER)]
        user: String,
        /// Key id or 4-character prefix.
        key: String,
    },
}

#[derive(Debug, Subcommand)]
enum WalletsCommand {
    /// Generate a delegated wallet in the keystore.
    Create {
        /// Owner: user name or id.
        #[arg(long, default_value = FIRST_USER)]
        user: String,
        /// `ethereum` or `solana`.
        #[arg(long)]
        chain_type: ChainFamily,
        /// Make it the owner's default for its family.
        #[arg(long)]
        make_default: bool,
    },
    /// List a user's wallets.
    List {
        /// Owner: user name or id.
        #[arg(long, default_value = FIRST_USER)]
        user: String,
    },
    /// Delegate a wallet to the server signer, or withdraw the delegation.
    Delegate {
        /// Wallet address.
        address: String,
        /// `on` or `off`.
        #[arg(value_parser = ["on", "off"])]
        state: String,
    },
}

impl Addrs {
    fn apply(&self, config: &mut Config) {
        if let Some(a) = self.http_addr {
            config.http_addr = a;
        }
        if let Some(a) = self.grpc_addr {
            config.grpc_addr = a;
        }
        if let Some(d) = &self.data_dir {
            config.data_dir = d.clone();
        }
    }
}

impl DataDir {
    fn apply(&self, config: &mut Config) {
        if let Some(d) = &self.data_dir {
            config.data_dir = d.clone();
        }
    }
}

fn init_tracing(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let registry = tracing_subscriber::registry().with(filter);
    match format {
        LogFormat::Json => registry
            .with(fmt::layer().json().with_writer(std::io::stderr))
            .init(),
        LogFormat::Text => registry
            .with(fmt::layer().with_writer(std::io::stderr))
            .init(),
    }
}

/// How long a stopping service waits for the monitor's sweep beyond its requests' deadline.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Completes on Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { () = ctrl_c => {}, () = term => {} }
}

/// A future that completes when `rx` flips to true.
async fn on_stop(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|stop| *stop).await;
}

/// The address to dial for a listener bound to `addr` (a wildcard becomes loopback).
fn dialable(addr: SocketAddr) -> SocketAddr {
    if addr.ip().is_unspecified() {
        SocketAddr::from(([127, 0, 0, 1], addr.port()))
    } else {
        addr
    }
}

async fn bind(addr: SocketAddr, what: &str) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding the {what} listener to {addr}"))
}

/// Opens the core and, on an empty database, makes and prints the first user's key, which
/// it also returns (for the dev curl line).
async fn open_core(config: Config) -> anyhow::Result<(Core, Option<String>)> {
    let core = Core::open(config).await?;
    // A core that serves with another key than the database's is refused at once.
    core.wallets.bind_keystore().await?;
    let mut key = None;
    if let Some(first) = core.bootstrap().await? {
        println!(
            "First start: created user {:?} and its first API key.",
            first.user.name
        );
        println!("API key: {}", first.secret.expose());
        println!("(The key is shown only this once: store it now.)");
        for w in &first.wallets {
            println!("Wallet ({}, default, delegated): {}", w.family(), w.address);
        }
        key = Some(first.secret.expose().to_owned());
    }
    Ok((core, key))
}

/// The first user's default wallet of `family`, if any.
async fn first_wallet(core: &Core, family: ChainFamily) -> anyhow::Result<Option<String>> {
    let Ok(owner) = core.find_user(FIRST_USER).await else {
        return Ok(None);
    };
    let filter = walletops_core::domain::WalletFilter {
        family: Some(family),
        default_only: true,
        automation_only: false,
    };
    Ok(core
        .wallets
        .list(owner.id, filter)
        .await?
        .into_iter()
        .next()
        .map(|w| w.address.to_string()))
}

fn spawn_pruner(core: &Core, stop: watch::Receiver<bool>) {
    let core = core.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(60));
        let stopped = on_stop(stop);
        tokio::pin!(stopped);
        loop {
            tokio::select! {
                _ = tick.tick() => core.limiter.prune(),
                () = &mut stopped => break,
            }
        }
    });
}

async fn run_servers(
    mut config: Config,
    with_core: bool,
    with_edge: bool,
    dev: bool,
) -> anyhow::Result<()> {
    let (stop_tx, stop_rx) = watch::channel(false);
    let (dev_node, dev_solana) = if dev {
        let node = devnet::DevNode::start_anvil().await?;
        config
            .chains
            .insert(devnet::ANVIL_SLUG.to_owned(), node.chain());
        let solana = devnet::DevNode::start_solana().await?;
        match &solana {
            Some(s) => {
                config
                    .chains
                    .insert(devnet::SOLANA_SLUG.to_owned(), s.solana_chain());
            }
            None => println!(
                "The Solana test node is not built (cargo build --workspace --bins): Solana chains keep their public RPC URLs."
            ),
        }
        (Some(node), solana)
    } else {
        (None, None)
    };
    let mut dev_solana_wallet = None;
    let mut first_key = None;
    let mut stopping_core: Option<Core> = None;
    let mut dev_wallet = None;
    let mut tasks = tokio::task::JoinSet::new();
    let mut core_url = config.core_url.clone();
    let http = if with_edge {
        Some(bind(config.http_addr, "REST").await?)
    } else {
        None
    };
    if with_core {
        let grpc = bind(config.grpc_addr, "gRPC").await?;
        let grpc_addr = grpc.local_addr()?;
        core_url = format!("http://{}", dialable(grpc_addr));
        let (core, key) = open_core(config.clone()).await?;
        first_key = key;
        stopping_core = Some(core.clone());
        // The dev nodes start empty: a nonce ledger or open records of an earlier run on them
        // would have the first send wait for a gap filler, and old records sent again.
        let started = [
            dev_node.as_ref().map(|_| devnet::ANVIL_SLUG),
            dev_solana.as_ref().map(|_| devnet::SOLANA_SLUG),
        ];
        for slug in started.into_iter().flatten() {
            let ended = core.forget_dev_chain(slug).await?;
            if ended > 0 {
                println!(
                    "Dev chain `{slug}` starts empty: {ended} transactions still open on its last run end DROPPED"
                );
            }
        }
        if let Some(node) = &dev_solana
            && let Some(wallet) = first_wallet(&core, ChainFamily::Solana).await?
        {
            node.airdrop(&wallet).await?;
            println!(
                "Dev chain `solana-devnet` (litesvm) at {}; wallet {wallet} funded with 100 SOL",
                node.url()
            );
            dev_solana_wallet = Some(wallet);
        }
        if let Some(node) = &dev_node {
            dev_wallet = first_wallet(&core, ChainFamily::Evm).await?;
            if let Some(wallet) = &dev_wallet {
                node.fund(wallet).await?;
            }
            println!(
                "Dev chain `anvil` (chain id 31337) at {}{}",
                node.url(),
                dev_wallet
                    .as_ref()
                    .map(|w| format!("; wallet {w} funded with 1000 ETH"))
                    .unwrap_or_default()
            );
            if let Some(wallet) = &dev_wallet {
                let devnet::DevContracts { token, counter } = node.deploy_samples(wallet).await?;
                println!(
                    "Dev token WDT (18 decimals) at {token}, 1000000 WDT minted to the wallet; dev contract Counter at {counter} (add(uint256), deposit(), fail())"
                );
                println!("export TOKEN={token} CONTRACT={counter}");
            }
        }
        spawn_pruner(&core, stop_rx.clone());
        let monitor = walletops_core::monitor::Monitor::new(&core).run(on_stop(stop_rx.clone()));
        tasks.spawn(async move {
            monitor.await;
            Ok(())
        });
        println!("gRPC listening on {grpc_addr}");
        let stop = on_stop(stop_rx.clone());
        tasks.spawn(async move { walletops_core::grpc::serve(core, grpc, stop).await });
    }
    if let Some(http) = http {
        let http_addr = http.local_addr()?;
        let channel = walletops_edge::core_channel(&core_url, config.request_timeout())?;
        let edge_config = walletops_edge::EdgeConfig {
            max_body_bytes: config.max_body_bytes,
            body_timeout: config.request_timeout(),
            header_read_timeout: Duration::from_secs(config.header_read_timeout_secs),
        };
        let router = walletops_edge::router(channel, &edge_config);
        println!(
            "REST listening on http://{http_addr} (API under /api/v1, forwarding to {core_url})"
        );
        if dev_wallet.is_some() {
            let key = first_key.clone().unwrap_or_else(|| "$KEY".to_owned());
            let body = r#"{"chain":"anvil","to":"0x1111111111111111111111111111111111111111","asset":"native","amount":"1000000000000000"}"#;
            println!("Try a send on the dev chain:");
            println!(
                "curl -s -X POST http://{}/api/v1/send -H \"x-api-key: {key}\" -H \"Idempotency-Key: $(cat /proc/sys/kernel/random/uuid)\" -H 'content-type: application/json' -d '{body}'",
                dialable(http_addr)
            );
            if dev_solana_wallet.is_some() {
                let body = r#"{"chain":"solana-devnet","to":"11111111111111111111111111111112","asset":"native","amount":"1000000"}"#;
                println!(
                    "curl -s -X POST http://{}/api/v1/send -H \"x-api-key: {key}\" -H \"Idempotency-Key: $(cat /proc/sys/kernel/random/uuid)\" -H 'content-type: application/json' -d '{body}'",
                    dialable(http_addr)
                );
            }
            println!("Dev playground ready.");
        }
        let stop = on_stop(stop_rx.clone());
        tasks.spawn(async move {
            walletops_edge::serve(http, router, &edge_config, stop)
                .await
                .map_err(anyhow::Error::from)
        });
    }
    tokio::select! {
        () = shutdown_signal() => tracing::info!("shutting down"),
        Some(done) = tasks.join_next() => {
            done??;
            anyhow::bail!("a server stopped unexpectedly");
        }
    }
    let _ = stop_tx.send(true);
    // In-flight requests finish and the monitor its sweep, within a bound: a sweep waiting
    // on nodes that do not answer would hold the stop for minutes. Whatever is cut off is
    // left as a crash would leave it (leases run out).
    let grace = config.request_timeout() + SHUTDOWN_GRACE;
    let drained = tokio::time::timeout(grace, async {
        while let Some(done) = tasks.join_next().await {
            done??;
        }
        Ok::<_, anyhow::Error>(())
    })
    .await;
    // The last requests' records are handed over, not left held, whatever stopped them.
    if let Some(core) = &stopping_core
        && tokio::time::timeout(SHUTDOWN_GRACE, core.broadcasts.flush())
            .await
            .is_err()
    {
        tracing::warn!(
            "the last broadcast notes were not written; their records wait for their holds to run out"
        );
    }
    match drained {
        Ok(done) => done,
        // Not a clean stop: a supervisor should see it as a failure.
        Err(_) => anyhow::bail!(
            "stopped without finishing: requests or the monitor's sweep ran past {} s",
            grace.as_secs()
        ),
    }
}

fn print_key(key: &ApiKey) {
    let now = chrono::Utc::now();
    let state = match key.state(now) {
        KeyState::Active => "active",
        KeyState::ExpiringSoon => "expiring soon",
        KeyState::Expired => "expired",
        KeyState::Revoked => "revoked",
    };
    let expires = key
        .expires_at
        .map_or_else(|| "never".to_owned(), |t| t.to_rfc3339());
    let maker = key
        .created_by
        .map_or_else(String::new, |id| format!("  (made with key {id})"));
    println!(
        "{}  {}  {:<14} expires {}  {}{maker}",
        key.id, key.prefix, state, expires, key.name
    );
}

/// Every request allocates many small, short-lived buffers across the runtime's threads
/// (JSON, protobuf, RPC bodies): mimalloc's per-thread free lists serve them with less
/// contention and fragmentation than the system allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // Fault-injection points from FAILPOINTS, only in builds with the `failpoints` feature.
    let _failpoints = fail::FailScenario::setup();
    let cli = Cli::parse();
    let mut config = Config::load(cli.config.as_deref())?;
    match &cli.command {
        Command::Serve(a) => a.addrs.apply(&mut config),
        Command::Core(a) => a.apply(&mut config),
        Command::Edge {
            core_url,
            http_addr,
        } => {
            if let Some(u) = core_url {
                config.core_url = u.clone();
            }
            if let Some(a) = http_addr {
                config.http_addr = *a;
            }
        }
        Command::Users { data, .. }
        | Command::Keys { data, .. }
        | Command::Wallets { data, .. }
        | Command::Migrate(data) => data.apply(&mut config),
    }
    init_tracing(config.log_format);
    match cli.command {
        Command::Serve(args) => run_servers(config, true, true, args.dev).await,
        Command::Core(_) => run_servers(config, true, false, false).await,
        Command::Edge { .. } => run_servers(config, false, true, false).await,
        Command::Migrate(_) => {
            // The store alone: migrating needs no master key.
            walletops_core::store::Store::connect(&config.database_url()).await?;
            println!("migrations are up to date");
            Ok(())
        }
        Command::Users { command, .. } => {
            let core = Core::open(config).await?;
            match command {
                UsersCommand::Create { name, no_wallets } => {
                    let (user, _, secret) = core.create_user(&name).await?;
                    println!("User: {} ({})", user.name, user.id);
                    println!("API key: {}", secret.expose());
                    println!("(The key is shown only this once: store it now.)");
                    if !no_wallets {
                        for w in core.create_starter_wallets(user.id).await? {
                            println!("Wallet ({}, default, delegated): {}", w.family(), w.address);
                        }
                    }
                }
                UsersCommand::List => {
                    for u in core.list_users().await? {
                        println!("{}  {}  {}", u.id, u.created_at.to_rfc3339(), u.name);
                    }
                }
            }
            Ok(())
        }
        Command::Keys { command, .. } => {
            let core = Core::open(config).await?;
            match command {
                KeysCommand::Create {
                    user,
                    name,
                    expires,
                } => {
                    let user = core.find_user(&user).await?;
                    let (key, secret) = core.keys.create(user.id, &name, expires, None).await?;
                    print_key(&key);
                    println!("API key: {}", secret.expose());
                    println!("(The key is shown only this once: store it now.)");
                }
                KeysCommand::List { user } => {
                    let user = core.find_user(&user).await?;
                    for key in core.keys.list(user.id).await? {
                        print_key(&key);
                    }
                }
                KeysCommand::Revoke { user, key } => {
                    let user = core.find_user(&user).await?;
                    let key = core.keys.revoke(user.id, &key, None).await?;
                    print_key(&key);
                }
            }
            Ok(())
        }
        Command::Wallets { command, .. } => {
            let core = Core::open(config).await?;
            let show = |w: &walletops_core::domain::Wallet| {
                println!(
                    "{}  {:<8}  default={}  delegated={}",
                    w.address,
                    w.family(),
                    w.is_default,
                    w.automation_enabled
                );
            };
            match command {
                WalletsCommand::Create {
                    user,
                    chain_type,
                    make_default,
                } => {
                    let user = core.find_user(&user).await?;
                    show(
                        &core
                            .wallets
                            .create(user.id, chain_type, make_default)
                            .await?,
                    );
                }
                WalletsCommand::List { user } => {
                    let user = core.find_user(&user).await?;
                    for w in core.wallets.list(user.id, Default::default()).await? {
                        show(&w);
                    }
                }
                WalletsCommand::Delegate { address, state } => {
                    show(
                        &core
                            .wallets
                            .update(
                                &walletops_core::requests::any_address(&address, "address")?,
                                None,
                                Some(state == "on"),
                            )
                            .await?,
                    );
                }
            }
            Ok(())
        }
    }
}
