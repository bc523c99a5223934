//! The metrics listener: liveness and readiness probes, and `/metrics` parsed as
//! Prometheus's text format, its counters and gauges checked against what the test did.

use alloy::primitives::utils::parse_ether;
use prometheus_parse::{Sample, Scrape, Value};
use serde_json::json;
use walletops_tests::{Backend, Service, anvil::Anvil, on_both_backends};

const SEND: &str = "/walletops.v1.WalletOpsService/Send";

/// The metrics of `svc`, parsed.
async fn scrape(svc: &Service) -> anyhow::Result<Scrape> {
    let url = svc.metrics_url.as_deref().expect("a metrics listener");
    let text = walletops_tests::http::get(format!("{url}/metrics"))
        .await?
        .text()
        .await?;
    Ok(Scrape::parse(text.lines().map(|l| Ok(l.to_owned())))?)
}

/// The value of the sample of `metric` whose labels include `labels`; 0 when none.
fn value(scrape: &Scrape, metric: &str, labels: &[(&str, &str)]) -> f64 {
    scrape
        .samples
        .iter()
        .filter(|s: &&Sample| s.metric == metric)
        .filter(|s| labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .map(|s| match s.value {
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => v,
            _ => 0.0,
        })
        .sum()
}

async fn metrics_count_what_was_done(b: Backend) -> anyhow::Result<()> {
    let anvil = Anvil::start().await?;
    let options = anvil.service_options("", &[("WALLETOPS_METRICS_ADDR", "127.0.0.1:0")]);
    let svc = Service::start_with(b, options).await?;
    let base = svc.metrics_url.clone().expect("a metrics listener");
    for probe in ["livez", "readyz"] {
        let reply = walletops_tests::http::get(format!("{base}/{probe}")).await?;
        assert_eq!(reply.status(), 200, "/{probe}");
    }
    let api = svc.rest(&svc.api_key);
    anvil.fund_default_wallet(&api, parse_ether("1")?).await?;
    let send = json!({"chain": "anvil", "to": "0x1111111111111111111111111111111111111111",
                      "asset": "native", "amount": "1000"})
    .to_string();
    // One send held unmined: an open record, the oldest.
    anvil.set_automine(false).await?;
    let key = uuid::Uuid::new_v4().to_string();
    let first = api.post_with_key("/send", &key, &send).await?;
    assert_eq!(first.status, 200, "{}", first.text);
    let open = scrape(&svc).await?;
    let anvil_chain = [("chain", "anvil")];
    assert_eq!(value(&open, "walletops_open_records", &anvil_chain), 1.0);
    assert!(value(&open, "walletops_oldest_open_record_seconds", &anvil_chain) > 0.0);
    anvil.set_automine(true).await?;
    anvil.mine().await?;
    // Its key replayed, two more sends, a refused one.
    let replayed = api.post_with_key("/send", &key, &send).await?;
    assert_eq!(replayed.body["id"], first.body["id"]);
    let mut ids = vec![first.body["id"].as_str().unwrap_or_default().to_owned()];
    for _ in 0..2 {
        let reply = api.post("/send", &serde_json::from_str(&send)?).await?;
        assert_eq!(reply.status, 200, "{}", reply.text);
        ids.push(reply.body["id"].as_str().unwrap_or_default().to_owned());
    }
    let refused = api
        .post(
            "/send",
            &json!({"chain": "anvil", "to": "nope", "asset": "native", "amount": "1"}),
        )
        .await?;
    assert_eq!(refused.status, 400);
    for id in &ids {
        api.wait_for_status(id, "CONFIRMED").await?;
    }
    // Paths no service serves are counted under one label, whatever they are.
    let h2 = walletops_tests::http::builder()
        .http2_prior_knowledge()
        .build()?;
    for path in ["walletops.v1.Nope/A1", "x/B2"] {
        let reply = h2
            .post(format!("http://{}/{path}", svc.grpc_addr))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(vec![0u8; 5])
            .send()
            .await?;
        assert_eq!(
            reply.headers().get("grpc-status").map(|v| v.as_bytes()),
            Some(&b"12"[..])
        );
    }
    let done = scrape(&svc).await?;
    let unknown = [("rpc", "unknown"), ("code", "UNIMPLEMENTED")];
    assert_eq!(value(&done, "walletops_requests_total", &unknown), 2.0);
    let sends = [("rpc", SEND), ("code", "OK")];
    assert_eq!(value(&done, "walletops_requests_total", &sends), 4.0);
    let invalid = [("rpc", SEND), ("code", "INVALID_INPUT")];
    assert_eq!(value(&done, "walletops_requests_total", &invalid), 1.0);
    assert_eq!(value(&done, "walletops_idempotent_replays_total", &[]), 1.0);
    let kind = [("chain", "anvil"), ("kind", "send")];
    assert_eq!(value(&done, "walletops_writes_submitted_total", &kind), 3.0);
    let confirmed = [
        ("chain", "anvil"),
        ("kind", "send"),
        ("status", "confirmed"),
    ];
    assert_eq!(
        value(&done, "walletops_writes_settled_total", &confirmed),
        3.0
    );
    assert_eq!(value(&done, "walletops_open_records", &anvil_chain), 0.0);
    assert_eq!(
        value(&done, "walletops_oldest_open_record_seconds", &anvil_chain),
        0.0
    );
    let answered = [("chain", "anvil"), ("outcome", "ok")];
    assert!(value(&done, "walletops_chain_rpc_calls_total", &answered) >= 3.0);
    assert_eq!(value(&done, "walletops_signing_lane_depth", &[]), 0.0);
    // Label values are bounded: no address, key or user name among them.
    for sample in &done.samples {
        for (_, label) in sample.labels.iter() {
            assert!(
                !label.starts_with("0x")
                    && !label.contains(&svc.api_key)
                    && label != "owner"
                    && !label.contains("Nope"),
                "{}: {label}",
                sample.metric
            );
        }
    }
    Ok(())
}

async fn not_ready_while_a_migration_is_missing(b: Backend) -> anyhow::Result<()> {
    use sea_orm::ConnectionTrait as _;
    let svc = Service::start_with(
        b,
        walletops_tests::Options::default().with_env("WALLETOPS_METRICS_ADDR", "127.0.0.1:0"),
    )
    .await?;
    let readyz = format!("{}/readyz", svc.metrics_url.as_deref().expect("metrics"));
    assert_eq!(walletops_tests::http::get(&readyz).await?.status(), 200);
    // The database as a newer build would find it before migrating: its last migration
    // not applied.
    let db = svc.database().await?;
    let last = "(SELECT MAX(version) FROM seaql_migrations)";
    let kept = db
        .query_one_raw(sea_orm::Statement::from_string(
            db.get_database_backend(),
            format!("SELECT version FROM seaql_migrations WHERE version = {last}"),
        ))
        .await?
        .expect("a migration applied");
    let version: String = kept.try_get("", "version")?;
    db.execute_unprepared(&format!(
        "DELETE FROM seaql_migrations WHERE version = '{version}'"
    ))
    .await?;
    let reply = walletops_tests::http::get(&readyz).await?;
    assert_eq!(reply.status(), 503);
    assert!(reply.text().await?.contains("not applied"));
    // The live probe does not depend on it.
    let livez = readyz.replace("/readyz", "/livez");
    assert_eq!(walletops_tests::http::get(&livez).await?.status(), 200);
    db.execute_unprepared(&format!(
        "INSERT INTO seaql_migrations (version, applied_at) VALUES ('{version}', 0)"
    ))
    .await?;
    assert_eq!(walletops_tests::http::get(&readyz).await?.status(), 200);
    Ok(())
}

async fn no_metrics_listener_unless_configured(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    assert!(svc.metrics_url.is_none());
    Ok(())
}

on_both_backends!(
    metrics_count_what_was_done,
    not_ready_while_a_migration_is_missing,
    no_metrics_listener_unless_configured,
);
