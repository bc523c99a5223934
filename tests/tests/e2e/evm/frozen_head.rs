//! A node whose head stands still (anvil with mining stopped, thousands of records pending
//! and stuck) is not flooded: the monitor asks no receipts while the head has not moved, and
//! makes at most one node request per 50 open records a sweep; once the head moves, every
//! record settles.

use anyhow::Context as _;
use futures::StreamExt as _;
use serde_json::json;
use walletops_tests::{
    Backend,
    metrics::{monitor_sweeps, scrape_text, sum},
    poll_until, poll_until_within,
};

use super::{Evm, RECIPIENT};

/// Records held open on the frozen head.
const OPEN: usize = 5_000;

async fn a_frozen_head_costs_one_request_per_50_open_records(b: Backend) -> anyhow::Result<()> {
    // Stuck after 2 s: during the measure every record is due for a replacement, the state
    // that cost the most before.
    let e = Evm::behind_gateway(
        b,
        "[monitor]\npoll_interval_ms = 100\nstuck_after_secs = 2\n",
        &["--no-mining"],
        &[
            ("WALLETOPS_METRICS_ADDR", "127.0.0.1:0"),
            ("WALLETOPS_RATE_LIMITS__WRITES_PER_MINUTE", "1000000"),
        ],
    )
    .await?;
    let sent = futures::stream::iter(0..OPEN)
        .map(|_| e.send_native(RECIPIENT, "1"))
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await;
    for reply in sent {
        reply?;
    }
    let started = std::time::Instant::now();
    let gateway = e.gateway()?;
    let metrics_url = e.svc.metrics_url.clone().context("a metrics listener")?;
    let sweeps =
        || async { Ok::<_, anyhow::Error>(monitor_sweeps(&scrape_text(&metrics_url).await?)) };
    let counts = || {
        (
            gateway.requests(),
            gateway.calls("eth_getTransactionReceipt"),
            gateway.calls("eth_sendRawTransaction"),
        )
    };
    // Measured once the monitor has found every record unmined at this head: a whole pass
    // over the backlog that asked no receipt. Until then each sweep follows in full the
    // records it has not yet looked at, as many as its request budget allows.
    let pass = std::sync::Mutex::new((sweeps().await?[2], counts().1));
    poll_until_within(
        "a pass over the backlog that asks no receipt",
        std::time::Duration::from_secs(300),
        || async {
            let (swept, receipts) = (sweeps().await?[2], counts().1);
            let mut pass = pass
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if swept - pass.0 < OPEN as f64 {
                return Ok(None);
            }
            let quiet = receipts == pass.1;
            *pass = (swept, receipts);
            Ok(quiet.then_some(()))
        },
    )
    .await?;
    let before = (sweeps().await?[0], counts());
    let after = poll_until("twenty more sweeps", || async {
        let now = sweeps().await?[0];
        Ok((now >= before.0 + 20.0).then_some((now, counts())))
    })
    .await?;
    let made = after.0 - before.0;
    let per_sweep = (after.1.0 - before.1.0) as f64 / made;
    eprintln!(
        "{OPEN} open records on a frozen head: {per_sweep:.1} node requests a sweep, {} sends in {made} sweeps; measured {:?} after the sends",
        after.1.2 - before.1.2,
        started.elapsed()
    );
    assert!(
        per_sweep <= (OPEN / 50) as f64,
        "{per_sweep} node requests a sweep with {OPEN} open records"
    );
    // No record found unmined at this head is asked its receipt again. A sweep whose read
    // of the head fails (a node slowed by the machine's load) cannot tell the head stood,
    // and follows in full the few records its budget allows: fewer receipts than sweeps.
    // Asked of every open record, as before the quiet mode, it would be 5,000 a sweep.
    let receipts = after.1.1 - before.1.1;
    assert!(
        (receipts as f64) < made,
        "{receipts} receipts asked of a frozen head in {made} sweeps"
    );
    assert!(
        after.1.2 > before.1.2,
        "stuck records were still replaced, within the budget"
    );
    // The head moves again: a block a second until the pool is empty.
    e.anvil.rpc("evm_setIntervalMining", json!([1])).await?;
    poll_until_within(
        "every record to settle",
        std::time::Duration::from_secs(300),
        || async {
            let confirmed = e.svc.transactions_with_status("confirmed").await?;
            Ok((confirmed == OPEN as i64).then_some(()))
        },
    )
    .await?;
    eprintln!("settled {:?} after the sends", started.elapsed());
    assert_eq!(e.anvil.nonce(e.wallet).await?, OPEN as u64);
    // Each landing is timed, by chain and route, with the tip it offered.
    let landed = |text: &str| sum(text, "walletops_landing_duration_seconds_count", None);
    poll_until("every landing counted", || async {
        let text = scrape_text(&metrics_url).await?;
        Ok((landed(&text) == OPEN as f64).then_some(text))
    })
    .await
    .map(|text| {
        let tips = "walletops_priority_fee_paid_count";
        assert_eq!(sum(&text, tips, Some("unit=\"wei_per_gas\"")), OPEN as f64);
    })?;
    Ok(())
}

// What the monitor asks of the node does not depend on the store: the five thousand sends
// are made once, on PostgreSQL, the store of a deployment at this scale.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_head_costs_one_request_per_50_open_records_on_postgres() {
    if let Err(e) = a_frozen_head_costs_one_request_per_50_open_records(Backend::Postgres).await {
        panic!("{e:?}");
    }
}
