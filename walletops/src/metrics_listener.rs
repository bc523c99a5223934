//! The metrics listener (`metrics_addr`), apart from the public ones: `/metrics` in
//! Prometheus's text format, `/livez` (the process answers) and `/readyz` (the database
//! answers and its migrations are current), for scrapers and orchestrators.

use std::{future::Future, time::Duration};

use axum::{Router, http::StatusCode, response::IntoResponse, routing::get};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tokio::net::TcpListener;

use walletops_core::Core;

/// Histogram buckets of the `_duration_seconds` metrics: a millisecond to the 30 s request
/// timeout.
const BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// How often the exporter's histograms are compacted.
const UPKEEP_EVERY: Duration = Duration::from_secs(5);

/// Installs the Prometheus recorder for the whole process and declares the metrics; the
/// handle renders them.
pub(crate) fn install() -> anyhow::Result<PrometheusHandle> {
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_duration_seconds".to_owned()), BUCKETS)?
        .install_recorder()?;
    walletops_core::metrics::describe();
    let upkeep = handle.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(UPKEEP_EVERY);
        loop {
            tick.tick().await;
            upkeep.run_upkeep();
        }
    });
    Ok(handle)
}

/// Serves `/metrics`, `/livez` and `/readyz` on `listener` until `shutdown` completes.
pub(crate) async fn serve(
    core: Core,
    listener: TcpListener,
    handle: PrometheusHandle,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let app = Router::new()
        .route(
            "/metrics",
            get({
                let core = core.clone();
                move || scrape(core.clone(), handle.clone())
            }),
        )
        .route("/livez", get(|| async { "ok\n" }))
        .route("/readyz", get(move || ready(core.clone())));
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await?;
    Ok(())
}

/// The metrics, the open records' gauges read from the store first: every core reports
/// every chain's backlog, the same numbers, so a rule alerts on any of them.
async fn scrape(core: Core, handle: PrometheusHandle) -> impl IntoResponse {
    match core.store.open_records_by_chain().await {
        Ok(open) => {
            let now = chrono::Utc::now();
            for chain in core.chains.all() {
                let (count, oldest) = open
                    .iter()
                    .find(|(slug, _, _)| slug == chain.slug())
                    .map_or((0, Duration::ZERO), |(_, count, oldest)| {
                        let age = (now - *oldest).to_std().unwrap_or_default();
                        (usize::try_from(*count).unwrap_or_default(), age)
                    });
                walletops_core::metrics::open_records(chain.slug(), count, oldest);
            }
        }
        Err(e) => tracing::warn!(error = %e, "reading the open records for the metrics failed"),
    }
    (
        [("content-type", "text/plain; version=0.0.4; charset=utf-8")],
        handle.render(),
    )
}

async fn ready(core: Core) -> impl IntoResponse {
    match core.store.readiness().await {
        Ok(()) => (StatusCode::OK, "ready\n".to_owned()),
        Err(why) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {why}\n"),
        ),
    }
}
