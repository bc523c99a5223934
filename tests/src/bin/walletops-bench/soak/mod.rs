//! The soak (`--soak MINUTES`): a steady mixed load on a SQLite service and a PostgreSQL
//! service at once, each on an anvil and a swap venue of its own: native sends spread over
//! wallets, swaps on the venue's pool, cached and fresh balance reads, webhook deliveries to
//! a local receiver and a Server-Sent Events watcher. Then the load stops, the records are
//! given time to settle, and the run says what the service's resident memory did, what
//! failed, which records are not final, and what the chain, the receiver and the watcher show
//! of every write.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use alloy::primitives::{Address, B256, U256};
use anyhow::{Context as _, ensure};
use futures::{StreamExt as _, TryStreamExt as _};
use serde_json::{Value, json};
use walletops_tests::{
    Backend, Options, Rest, Service,
    anvil::{Anvil, MIXED_MINING},
    poll_until_within,
    venue::Venue,
    webhooks::Receiver,
};

mod figures;

pub(crate) use figures::Figures;

use crate::{
    ETH,
    backlog::funded_wallets,
    cpu::rss_mb,
    report::ChainView,
    sends::{AMOUNT_WEI, RECIPIENT, chain_view},
};

/// Wallets the sends are spread over (the swaps have one of their own). The offered rate is
/// one the node sustains for the whole run: an anvil taking 20 to 40 writes a second with
/// thousands pending stopped producing blocks after about 14,000; 4.2 writes a second over
/// nine wallets is about 7,600 in 30 minutes, never more than a few pending.
const SEND_WALLETS: usize = 8;
/// One native send every (4 a second).
const SEND_EVERY: Duration = Duration::from_millis(250);
/// One swap of `SWAP_WEI` ether for the venue's token every.
const SWAP_EVERY: Duration = Duration::from_secs(5);
const SWAP_WEI: u128 = ETH / 1000;
/// One cached `GET /wallets/balances` every (10 a second).
const CACHED_READ_EVERY: Duration = Duration::from_millis(100);
/// One `GET /wallets/balances?fresh=true` every.
const FRESH_READ_EVERY: Duration = Duration::from_secs(1);
/// Resident memory is read every.
const RSS_EVERY: Duration = Duration::from_secs(30);
/// How long the records, the webhooks and the watcher's events are given to settle after the
/// load stops.
const SETTLE: Duration = Duration::from_secs(180);

/// A write the service accepted.
#[derive(Debug, Clone)]
struct Write {
    id: String,
    hash: B256,
    wallet: Address,
}

/// What the load's clients saw.
#[derive(Debug, Default)]
struct Seen {
    writes: Mutex<Vec<Write>>,
    swaps: AtomicU64,
    cached_reads: AtomicU64,
    fresh_reads: AtomicU64,
    errors: AtomicU64,
    first_errors: Mutex<Vec<String>>,
    /// The watcher's events: (event id, type, transaction id).
    events: Mutex<Vec<(u64, String, String)>>,
}

impl Seen {
    fn failed(&self, what: &str, e: &anyhow::Error) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        let mut first = self
            .first_errors
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if first.len() < 5 {
            first.push(format!("{what}: {e:#}"));
        }
    }
}

/// Runs `op` every `period` until `until`, each call a task of its own so that a slow answer
/// does not lower the offered rate; returns when every call has answered.
async fn every<F, Fut>(period: Duration, until: Instant, seen: Arc<Seen>, what: &str, op: F)
where
    F: Fn(u64) -> Fut,
    Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
{
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut calls = tokio::task::JoinSet::new();
    for i in 0.. {
        tick.tick().await;
        if Instant::now() >= until {
            break;
        }
        let (seen, what, call) = (seen.clone(), what.to_owned(), op(i));
        calls.spawn(async move {
            if let Err(e) = call.await {
                seen.failed(&what, &e);
            }
        });
        while calls.try_join_next().is_some() {}
    }
    while calls.join_next().await.is_some() {}
}

/// Posts a write and keeps it.
async fn write(
    api: Rest,
    path: &str,
    body: Value,
    wallet: Address,
    seen: Arc<Seen>,
) -> anyhow::Result<()> {
    let reply = api.post(path, &body).await?;
    ensure!(reply.status == 200, "{} {}", reply.status, reply.text);
    let field = |name: &str| {
        reply.body[name]
            .as_str()
            .with_context(|| format!("no {name} in {}", reply.text))
    };
    let write = Write {
        id: field("id")?.to_owned(),
        hash: field("hash")?.parse()?,
        wallet,
    };
    seen.writes
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(write);
    Ok(())
}

/// A balance read of the caller's EVM wallet, cached or fresh.
async fn read(api: Rest, fresh: bool) -> anyhow::Result<()> {
    let path = format!(
        "/wallets/balances?chain=anvil{}",
        if fresh { "&fresh=true" } else { "" }
    );
    let reply = api.get(&path).await?;
    ensure!(
        reply.status == 200,
        "GET {path}: {} {}",
        reply.status,
        reply.text
    );
    ensure!(
        reply.body["balances"].is_array(),
        "no balances in {}",
        reply.text
    );
    Ok(())
}

/// Watches `GET /tx/events` for as long as it runs, keeping every event; a stream that ends
/// is an error, and is opened again after the last event id it gave.
async fn watch(http: String, key: String, seen: Arc<Seen>, open: tokio::sync::oneshot::Sender<()>) {
    let client = walletops_tests::http::client();
    let mut open = Some(open);
    let mut last: Option<u64> = None;
    loop {
        let mut request = client
            .get(format!("{http}/api/v1/tx/events"))
            .header("x-api-key", &key);
        if let Some(last) = last {
            request = request.header("last-event-id", last.to_string());
        }
        let ended = async {
            let mut reply = request.send().await?.error_for_status()?;
            if let Some(open) = open.take() {
                let _ = open.send(());
            }
            let mut text = String::new();
            while let Some(chunk) = reply.chunk().await? {
                text.push_str(&String::from_utf8_lossy(&chunk));
                while let Some((block, rest)) = text.split_once("\n\n") {
                    let field = |name: &str| {
                        block
                            .lines()
                            .find_map(|l| l.strip_prefix(&format!("{name}:")))
                            .map(str::trim)
                    };
                    if let (Some(id), Some(kind), Some(data)) =
                        (field("id"), field("event"), field("data"))
                    {
                        let id: u64 = id.parse()?;
                        let tx: Value = serde_json::from_str(data)?;
                        let tx = tx["id"].as_str().unwrap_or_default().to_owned();
                        seen.events
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .push((id, kind.to_owned(), tx));
                        last = Some(id);
                    }
                    text = rest.to_owned();
                }
            }
            anyhow::Ok(())
        }
        .await;
        let e = ended
            .err()
            .unwrap_or_else(|| anyhow::anyhow!("the stream ended"));
        seen.failed("the event stream", &e);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Soaks a service on `backend` for `minutes`.
async fn soak_one(backend: Backend, minutes: f64) -> anyhow::Result<Figures> {
    let store = match backend {
        Backend::Sqlite => "SQLite",
        Backend::Postgres => "PostgreSQL",
    };
    let anvil = Anvil::start_with(MIXED_MINING).await?;
    let venue = Venue::open(&anvil, "SOK", 100).await?;
    let svc = Service::start_with(
        backend,
        Options {
            log_file: None,
            config_toml: Some(format!(
                "{}\n[rate_limits]\nwrites_per_minute = 1000000\nreads_per_minute = 1000000\n[monitor]\nstuck_after_secs = 5\n{}",
                anvil.chain_toml(),
                venue.toml()
            )),
            env: Vec::new(),
        },
    )
    .await?;
    let api = svc.rest(&svc.api_key);
    let swapper = anvil
        .fund_default_wallet(&api, U256::from(1000 * ETH))
        .await?;
    let wallets = Arc::new(funded_wallets(&svc, &anvil, SEND_WALLETS).await?);
    let receiver = Receiver::start().await?;
    receiver.register(&api, &["transaction.confirmed"]).await?;
    let seen = Arc::new(Seen::default());
    let (open, opened) = tokio::sync::oneshot::channel();
    let watcher = tokio::spawn(watch(
        svc.http.clone(),
        svc.api_key.clone(),
        seen.clone(),
        open,
    ));
    opened.await.context("the event stream never opened")?;

    let duration = Duration::from_secs_f64(minutes * 60.0);
    let started = Instant::now();
    let until = started + duration;
    let sends = every(SEND_EVERY, until, seen.clone(), "a send", |i| {
        let wallet = wallets[usize::try_from(i).unwrap_or_default() % wallets.len()];
        let body = json!({"chain": "anvil", "from": wallet, "to": RECIPIENT, "asset": "native",
                          "amount": AMOUNT_WEI.to_string()});
        write(api.clone(), "/send", body, wallet, seen.clone())
    });
    let swaps = every(SWAP_EVERY, until, seen.clone(), "a swap", |_| {
        let body = json!({"chain": "anvil", "from": swapper, "fromToken": "NATIVE",
                          "toToken": venue.token, "amount": SWAP_WEI.to_string()});
        let seen = seen.clone();
        let swapped = write(api.clone(), "/trade/swap", body, swapper, seen.clone());
        async move {
            swapped.await?;
            seen.swaps.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
    });
    let counted = |fresh: bool| {
        let (api, seen) = (api.clone(), seen.clone());
        move |_| {
            let (api, seen) = (api.clone(), seen.clone());
            async move {
                read(api, fresh).await?;
                let reads = if fresh {
                    &seen.fresh_reads
                } else {
                    &seen.cached_reads
                };
                reads.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
        }
    };
    let cached = every(
        CACHED_READ_EVERY,
        until,
        seen.clone(),
        "a cached read",
        counted(false),
    );
    let fresh = every(
        FRESH_READ_EVERY,
        until,
        seen.clone(),
        "a fresh read",
        counted(true),
    );
    let pid = svc.pid();
    let memory = async {
        let mut rss = Vec::new();
        let mut tick = tokio::time::interval(RSS_EVERY);
        loop {
            tick.tick().await;
            let at = started.elapsed();
            if let Some((mb, _)) = rss_mb(pid) {
                rss.push((at.as_secs(), mb));
            }
            if at >= duration {
                return rss;
            }
        }
    };
    let ((), (), (), (), mut rss) = tokio::join!(sends, swaps, cached, fresh, memory);
    if let Some((mb, _)) = rss_mb(pid) {
        rss.push((started.elapsed().as_secs(), mb));
    }
    println!(
        "  {store}: the load stopped after {:.1} min; settling ...",
        started.elapsed().as_secs_f64() / 60.0
    );

    let writes = seen
        .writes
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    // Every record final, or the settling time spent; whatever is still open then is
    // counted below.
    poll_until_within("every record to be final", SETTLE, || async {
        Ok((svc.open_transactions().await? == 0).then_some(()))
    })
    .await
    .ok();
    let statuses: Vec<String> = futures::stream::iter(writes.iter())
        .map(|w| {
            let api = api.clone();
            async move {
                let record = api.transaction(&w.id).await?;
                anyhow::Ok(record["status"].as_str().unwrap_or_default().to_owned())
            }
        })
        .buffer_unordered(16)
        .try_collect()
        .await?;
    let not_final = statuses
        .iter()
        .filter(|s| *s == "SUBMITTED" || *s == "FEE_CAPPED")
        .count();
    let not_confirmed = statuses.iter().filter(|s| *s != "CONFIRMED").count() - not_final;

    // The chain: each wallet's writes took its nonces from 0, each once.
    let mut by_wallet: BTreeMap<Address, Vec<(String, B256)>> = BTreeMap::new();
    for w in &writes {
        by_wallet
            .entry(w.wallet)
            .or_default()
            .push((w.id.clone(), w.hash));
    }
    let mut chain = ChainView::default();
    for (wallet, sent) in by_wallet {
        let n = u64::try_from(sent.len())?;
        let view = chain_view(&anvil, &api, wallet, sent, 0..n, 16).await?;
        chain = chain.and(view);
    }

    // Each write's confirmation, delivered and watched.
    let confirmed_in = |ids: Vec<String>| {
        let mut counts: HashMap<String, usize> = HashMap::new();
        for id in ids {
            *counts.entry(id).or_default() += 1;
        }
        counts
    };
    let delivered = || {
        confirmed_in(
            receiver
                .taken()
                .into_iter()
                .filter(|d| d.verified && d.event_type() == "transaction.confirmed")
                .map(|d| d.transaction().to_owned())
                .collect(),
        )
    };
    let watched = || {
        confirmed_in(
            seen.events
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .iter()
                .filter(|(_, kind, _)| kind == "transaction.confirmed")
                .map(|(_, _, id)| id.clone())
                .collect(),
        )
    };
    let missing = |counts: &HashMap<String, usize>| {
        writes
            .iter()
            .filter(|w| !counts.contains_key(&w.id))
            .count()
    };
    poll_until_within(
        "every confirmation to be delivered and watched",
        Duration::from_secs(60),
        || async { Ok((missing(&delivered()) == 0 && missing(&watched()) == 0).then_some(())) },
    )
    .await
    .ok();
    watcher.abort();
    let (delivered, watched) = (delivered(), watched());
    let events = seen
        .events
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    Ok(Figures {
        store,
        minutes,
        sends: writes.len() - usize::try_from(seen.swaps.load(Ordering::Relaxed))?,
        swaps: seen.swaps.load(Ordering::Relaxed),
        cached_reads: seen.cached_reads.load(Ordering::Relaxed),
        fresh_reads: seen.fresh_reads.load(Ordering::Relaxed),
        errors: seen.errors.load(Ordering::Relaxed),
        first_errors: seen
            .first_errors
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone(),
        rss,
        not_final,
        not_confirmed,
        chain,
        webhooks: delivered.values().sum(),
        webhooks_missing: missing(&delivered),
        events: events.len(),
        events_missing: missing(&watched),
        events_out_of_order: events.windows(2).filter(|w| w[0].0 >= w[1].0).count(),
    })
}

/// Soaks a SQLite and a PostgreSQL service at once for `minutes`.
pub(crate) async fn soak(minutes: f64) -> anyhow::Result<Vec<Figures>> {
    println!(
        "soak: {minutes} min of sends over {SEND_WALLETS} wallets ({:.0}/s), swaps ({:.1}/s), cached reads ({:.0}/s), fresh reads ({:.0}/s), webhooks and an event watcher, on SQLite and PostgreSQL at once, each on its own anvil ...",
        1.0 / SEND_EVERY.as_secs_f64(),
        1.0 / SWAP_EVERY.as_secs_f64(),
        1.0 / CACHED_READ_EVERY.as_secs_f64(),
        1.0 / FRESH_READ_EVERY.as_secs_f64(),
    );
    let (sqlite, postgres) = tokio::join!(
        soak_one(Backend::Sqlite, minutes),
        soak_one(Backend::Postgres, minutes)
    );
    Ok(vec![sqlite?, postgres?])
}
