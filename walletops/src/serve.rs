//! `serve`, `core` and `edge`: binding the listeners, running the core and the REST edge
//! (and, for `serve --dev`, the playground), and stopping them on Ctrl-C or SIGTERM.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use anyhow::Context;
use tokio::{net::TcpListener, sync::watch, task::JoinSet};
use walletops_core::{Config, Core, devnet::Playground, grpc::Listener, monitor::Monitor};
use walletops_tls::{Protocol, ServerTls};

/// Which servers a process runs.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Role {
    /// The core and the REST edge in one process (`serve`), with the dev playground when
    /// `dev` (`serve --dev`).
    Both {
        /// Run the playground: local nodes, funded wallets, sample contracts.
        dev: bool,
    },
    /// The gRPC core alone (`core`).
    Core,
    /// The REST edge alone, forwarding to a core (`edge`).
    Edge,
}

impl Role {
    fn runs_core(self) -> bool {
        matches!(self, Self::Both { .. } | Self::Core)
    }

    fn runs_edge(self) -> bool {
        matches!(self, Self::Both { .. } | Self::Edge)
    }
}

/// The servers' tasks: each ends with the error that stopped its server, if one did.
type Tasks = JoinSet<anyhow::Result<()>>;

/// How long a stopping service waits for the monitor's sweep beyond its requests' deadline.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Runs the servers of `role` until Ctrl-C or SIGTERM, or until one of them fails.
/// On a first start, prints the first key too with `print_key`.
pub(crate) async fn run(mut config: Config, role: Role, print_key: bool) -> anyhow::Result<()> {
    let (stop_tx, stop_rx) = watch::channel(false);
    // The dev nodes run as long as the servers: they stop when this is dropped.
    let mut playground = match role {
        Role::Both { dev: true } => Some(Playground::start(&mut config).await?),
        Role::Both { dev: false } | Role::Core | Role::Edge => None,
    };
    let mut tasks = Tasks::new();
    let http = if role.runs_edge() {
        let http = bind(config.http_addr, "REST").await?;
        // The address bound (port 0 picks one), for the sign-in link the first start prints.
        config.http_addr = http.local_addr()?;
        Some(http)
    } else {
        None
    };
    // Certificates are read again on SIGHUP.
    let mut reloadable = Vec::new();
    let mut first_key = None;
    let mut stopping_core = None;
    if role.runs_core() {
        let started = start_core(
            &config,
            Serving {
                dev: playground.is_some(),
                playground: playground.as_mut(),
                print_key,
                reloadable: &mut reloadable,
            },
            &stop_rx,
            &mut tasks,
        )
        .await?;
        first_key = started.first_key;
        stopping_core = Some(started.core);
    }
    if let Some(http) = http {
        // An edge beside its core calls its services in this process: no socket, no TLS.
        let (channel, core) = match &stopping_core {
            Some(core) => (
                walletops_core::grpc::in_process(core),
                "the core in this process".to_owned(),
            ),
            None => (
                walletops_edge::core_channel(
                    &config.core_url,
                    config.request_timeout(),
                    &core_tls(&config)?,
                )?,
                config.core_url.clone(),
            ),
        };
        if matches!(role, Role::Both { .. }) {
            let dev_slugs: &[&str] = if playground.is_some() {
                &[
                    walletops_core::devnet::ANVIL_SLUG,
                    walletops_core::devnet::SOLANA_SLUG,
                ]
            } else {
                &[]
            };
            crate::serving_record::record(&config, dev_slugs);
        }
        let http_addr = start_edge(
            http,
            &config,
            (channel, &core),
            &mut reloadable,
            &stop_rx,
            &mut tasks,
        )?;
        match (&playground, &first_key) {
            (Some(playground), _) => {
                playground.print_try(dialable(http_addr), first_key.as_deref())
            }
            (None, Some(_)) => println!(
                "Next: KEY=$(cat {}) && curl -s http://{}/api/v1/wallets -H \"x-api-key: $KEY\"",
                first_key_file(&config).display(),
                dialable(http_addr)
            ),
            (None, None) => {}
        }
    }
    spawn_tls_reloader(reloadable, stop_rx.clone());
    tokio::select! {
        () = shutdown_signal() => tracing::info!("shutting down"),
        Some(done) = tasks.join_next() => {
            done??;
            anyhow::bail!("a server stopped unexpectedly");
        }
    }
    let _ = stop_tx.send(true);
    stop(&config, tasks, stopping_core.as_ref()).await
}

/// What `start_core` serves beside the gRPC listeners.
struct Serving<'a> {
    /// The dev playground, readied for the core.
    playground: Option<&'a mut Playground>,
    /// Print the first key on a first start.
    print_key: bool,
    /// Run as the playground: a busy default metrics port falls back to a free one.
    dev: bool,
    /// Where the listeners' TLS settings go, to be reloaded on SIGHUP.
    reloadable: &'a mut Vec<Arc<ServerTls>>,
}

/// A core started by `start_core`.
struct StartedCore {
    /// The first user's API key, when this start made it.
    first_key: Option<String>,
    core: Core,
}

/// Binds the gRPC listener, opens the core (on a first start, making and printing the first
/// user's key), readies the playground's nodes for it, and starts the core's tasks: the rate
/// limiter's pruner, the monitor, the webhook and approvals workers and the gRPC server.
async fn start_core(
    config: &Config,
    serving: Serving<'_>,
    stop_rx: &watch::Receiver<bool>,
    tasks: &mut Tasks,
) -> anyhow::Result<StartedCore> {
    let grpc = bind(config.grpc_addr, "gRPC").await?;
    let grpc_addr = grpc.local_addr()?;
    // One TLS setting for both gRPC listeners.
    let tls = listener_tls(config, Protocol::Http2, serving.reloadable)?;
    let (core, first_key) = open_core(config.clone(), serving.print_key).await?;
    if let Some(playground) = serving.playground {
        playground.prepare(&core).await?;
    }
    spawn_pruner(&core, stop_rx.clone());
    tokio::spawn(walletops_core::events::run_sequencer(
        core.store.clone(),
        config.webhooks.retry_for(),
        on_stop(stop_rx.clone()),
    ));
    spawn_webhook_deliveries(&core, tasks, stop_rx.clone())?;
    spawn_syncer(&core, stop_rx.clone());
    // Writing under a lease, the approvals runner is waited for like the monitor.
    let approvals = core.clone();
    let stop = on_stop(stop_rx.clone());
    tasks.spawn(async move {
        approvals.run_approvals(stop).await;
        Ok(())
    });
    let payouts = core.clone();
    let stop = on_stop(stop_rx.clone());
    tasks.spawn(async move {
        payouts.run_payouts(stop).await;
        Ok(())
    });
    let monitor = Monitor::new(&core).run(on_stop(stop_rx.clone()));
    tasks.spawn(async move {
        monitor.await;
        Ok(())
    });
    let scanner = walletops_core::deposits::Scanner::new(
        core.store.clone(),
        core.chains.clone(),
        core.evm_clients.clone(),
        core.solana_clients.clone(),
    )
    .run(on_stop(stop_rx.clone()));
    tasks.spawn(async move {
        scanner.await;
        Ok(())
    });
    if let Some(addr) = config.metrics_addr {
        let metrics = bind_metrics(addr, serving.dev).await?;
        println!(
            "Metrics listening on http://{} (/metrics, /livez, /readyz)",
            metrics.local_addr()?
        );
        let handle = crate::metrics_listener::install()?;
        let stop = on_stop(stop_rx.clone());
        let core = core.clone();
        tasks.spawn(
            async move { crate::metrics_listener::serve(core, metrics, handle, stop).await },
        );
    }
    // Keys are held in memory for reads while this core hears of their changes (started
    // after the metrics recorder, which counts it).
    core.store
        .watch_key_changes(walletops_core::metrics::key_changes_heard);
    if let Some(addr) = config.admin_addr {
        let admin = bind(addr, "admin").await?;
        println!("Admin listening on {} (AdminService)", admin.local_addr()?);
        let stop = on_stop(stop_rx.clone());
        let listener = Listener {
            tcp: admin,
            tls: tls.clone(),
        };
        let core = core.clone();
        tasks.spawn(async move { walletops_core::grpc::serve_admin(core, listener, stop).await });
    }
    let over = if tls.is_some() { " (TLS)" } else { "" };
    println!("gRPC listening on {grpc_addr}{over}");
    let stop = on_stop(stop_rx.clone());
    let listener = Listener { tcp: grpc, tls };
    let serving = core.clone();
    tasks.spawn(async move { walletops_core::grpc::serve(serving, listener, stop).await });
    Ok(StartedCore { first_key, core })
}

/// The TLS of a listener speaking `protocol`, when configured, added to `reloadable`. The
/// gRPC (HTTP/2) listeners ask clients for certificates when `tls.client_ca_file` is set;
/// the REST listener never does.
fn listener_tls(
    config: &Config,
    protocol: Protocol,
    reloadable: &mut Vec<Arc<ServerTls>>,
) -> anyhow::Result<Option<Arc<ServerTls>>> {
    let Some(files) = config.tls.listener(protocol == Protocol::Http2) else {
        return Ok(None);
    };
    let tls = Arc::new(ServerTls::load(files, protocol)?);
    reloadable.push(tls.clone());
    Ok(Some(tls))
}

/// How the edge reaches a core at an `https` `core_url`: the files of `tls` read.
fn core_tls(config: &Config) -> anyhow::Result<walletops_edge::CoreTls> {
    let read = |file: &std::path::Path| {
        std::fs::read(file).with_context(|| format!("reading {}", file.display()))
    };
    let tls = &config.tls;
    Ok(walletops_edge::CoreTls {
        ca_pem: tls.core_ca_file.as_deref().map(read).transpose()?,
        identity: match (&tls.client_cert_file, &tls.client_key_file) {
            (Some(cert), Some(key)) => Some((read(cert)?, read(key)?)),
            _ => None,
        },
    })
}

/// Starts the REST edge on `http`, forwarding to a core over `to_core` (the channel, and
/// what it reaches, for the start's output); returns the address it listens on.
fn start_edge(
    http: TcpListener,
    config: &Config,
    to_core: (walletops_edge::CoreChannel, &str),
    reloadable: &mut Vec<Arc<ServerTls>>,
    stop_rx: &watch::Receiver<bool>,
    tasks: &mut Tasks,
) -> anyhow::Result<SocketAddr> {
    let http_addr = http.local_addr()?;
    let (channel, core) = to_core;
    let tls = listener_tls(config, Protocol::Http1, reloadable)?;
    let edge_config = walletops_edge::EdgeConfig {
        max_body_bytes: config.max_body_bytes,
        body_timeout: config.request_timeout(),
        header_read_timeout: Duration::from_secs(config.header_read_timeout_secs),
        secure_cookies: tls.is_some()
            || config
                .public_url
                .as_deref()
                .is_some_and(|url| url.starts_with("https://")),
        tls,
        mcp_sessions_per_key: config.mcp_sessions_per_key,
        trusted_proxies: config.trusted_proxies.clone(),
        forwarded_header: match config.forwarded_header {
            walletops_core::config::ForwardedHeader::XForwardedFor => {
                walletops_edge::ForwardedHeader::XForwardedFor
            }
            walletops_core::config::ForwardedHeader::Forwarded => {
                walletops_edge::ForwardedHeader::Forwarded
            }
        },
    };
    let router = walletops_edge::router(channel, &edge_config);
    let scheme = if edge_config.tls.is_some() {
        "https"
    } else {
        "http"
    };
    println!(
        "REST listening on {scheme}://{http_addr} (API under /api/v1, dashboard at /dashboard, forwarding to {core})"
    );
    let stop = on_stop(stop_rx.clone());
    tasks.spawn(async move {
        walletops_edge::serve(http, router, &edge_config, stop)
            .await
            .map_err(anyhow::Error::from)
    });
    Ok(http_addr)
}

/// Lets the servers told to stop finish, within a bound, and hands over the core's last
/// broadcast notes.
async fn stop(config: &Config, mut tasks: Tasks, core: Option<&Core>) -> anyhow::Result<()> {
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
    if let Some(core) = core
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

/// Binds the metrics listener; in the playground, its default port taken (another
/// playground), a free one.
async fn bind_metrics(addr: SocketAddr, dev: bool) -> anyhow::Result<TcpListener> {
    match bind(addr, "metrics").await {
        Err(_) if dev => bind(SocketAddr::from(([127, 0, 0, 1], 0)), "metrics").await,
        bound => bound,
    }
}

async fn bind(addr: SocketAddr, what: &str) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding the {what} listener to {addr}"))
}

/// Where the first start writes the first API key.
fn first_key_file(config: &Config) -> std::path::PathBuf {
    config.data_dir.join("first-api-key")
}

/// Opens the core and, on an empty database, makes the first user and its key, writes the
/// key to `first_key_file` (this user's alone) and says where it is, printing the key too
/// with `print_key`; returns the key (for the dev curl line).
async fn open_core(config: Config, print_key: bool) -> anyhow::Result<(Core, Option<String>)> {
    let core = Core::open(config).await?;
    // A core that serves with another key than the database's is refused at once.
    core.wallets.bind_keystore().await?;
    let Some(first) = core.bootstrap().await? else {
        return Ok((core, None));
    };
    let file = first_key_file(&core.config);
    // A file left by an earlier database would hold a key that no longer works.
    match std::fs::remove_file(&file) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(e).with_context(|| format!("replacing {}", file.display()));
        }
        _ => {}
    }
    let mut out = walletops_domain::files::create_private_file(&file)
        .with_context(|| format!("writing the first API key to {}", file.display()))?;
    std::io::Write::write_all(&mut out, format!("{}\n", first.secret.expose()).as_bytes())?;
    println!(
        "First start: made user {:?}, a default EVM and Solana wallet, and its first API key.",
        first.user.name
    );
    if print_key {
        println!("API key: {}", first.secret.expose());
    }
    println!(
        "  API key:   in {} (readable by you only; store it, then delete the file)",
        file.display()
    );
    for w in &first.wallets {
        println!("  Wallet:    {} {}", w.family(), w.address);
    }
    let (token, until) = &first.sign_in_link;
    println!(
        "  Dashboard: open {} to set the owner's password (works once, until {})",
        core.config.sign_in_link(token.expose()),
        until.format("%H:%M UTC")
    );
    let key = first.secret.expose().to_owned();
    Ok((core, Some(key)))
}

/// Reloads the listeners' certificates and keys on each SIGHUP, until the stop: new
/// connections get them, open ones are kept. A reload that fails keeps the ones in use.
fn spawn_tls_reloader(listeners: Vec<Arc<ServerTls>>, mut stop: watch::Receiver<bool>) {
    if listeners.is_empty() {
        return;
    }
    let Ok(mut hangups) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
    else {
        tracing::warn!("cannot listen for SIGHUP: the TLS certificate reloads only on restart");
        return;
    };
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = hangups.recv() => for tls in &listeners {
                    match tls.reload() {
                        Ok(()) => tracing::info!("TLS certificate reloaded"),
                        Err(e) => tracing::error!(error = %e, "reloading the TLS certificate failed; keeping the one in use"),
                    }
                },
                _ = stop.changed() => return,
            }
        }
    });
}

/// The webhook delivery worker; its stop gives up its leases, so it is waited for.
fn spawn_webhook_deliveries(
    core: &Core,
    tasks: &mut Tasks,
    stop: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let deliverer = core.webhooks.deliverer(core.units_known())?;
    tasks.spawn(async move {
        deliverer.run(on_stop(stop)).await;
        Ok(())
    });
    Ok(())
}

/// Reads linked users' wallets from the wallet provider every `provider.sync_interval_secs`,
/// when a provider is configured: a delegation withdrawn in the app stops writes within the
/// interval (one granted is seen at the next write anyway).
fn spawn_syncer(core: &Core, stop: watch::Receiver<bool>) {
    if !core.config.provider.is_configured() {
        return;
    }
    let core = core.clone();
    let every = Duration::from_secs(core.config.provider.sync_interval_secs);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let stopped = on_stop(stop);
        tokio::pin!(stopped);
        loop {
            tokio::select! {
                _ = tick.tick() => match core.wallets.sync_all().await {
                    Ok((_, failed)) => for (user, err) in failed {
                        tracing::warn!(user, error = %err, "syncing a linked user's wallets failed");
                    },
                    Err(e) => tracing::warn!(error = %e, "syncing linked users' wallets failed"),
                },
                () = &mut stopped => break,
            }
        }
    });
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
