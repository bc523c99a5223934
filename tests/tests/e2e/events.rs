//! Transaction events: `WatchTransactions` (and its Server-Sent Events at `GET /tx/events`)
//! streams every status change of the caller's records in commit order, and a watcher that
//! reconnects after the last event id it got misses nothing.

use crate::webhooks::send;
use alloy::primitives::utils::parse_ether;
use tonic::Streaming;
use walletops_proto::v1::{
    TransactionStatus, WatchTransactionsRequest, WatchTransactionsResponse,
    wallet_ops_service_client::WalletOpsServiceClient,
};
use walletops_tests::{Backend, Service, anvil::Anvil, on_both_backends, reason, with_key, within};

async fn watch(
    svc: &Service,
    req: WatchTransactionsRequest,
) -> anyhow::Result<Streaming<WatchTransactionsResponse>> {
    let mut ops = WalletOpsServiceClient::new(svc.channel().await?);
    Ok(ops
        .watch_transactions(with_key(req, &svc.api_key)?)
        .await?
        .into_inner())
}

/// Reads events from `stream` until each of `ids` has been seen `confirmed`; every event
/// read, in order.
async fn until_confirmed(
    stream: &mut Streaming<WatchTransactionsResponse>,
    ids: &[String],
) -> anyhow::Result<Vec<(u64, String, String)>> {
    let mut seen = Vec::new();
    within("the events of every send", async {
        while !ids.iter().all(|id| {
            seen.iter()
                .any(|(_, t, i): &(u64, String, String)| t == "transaction.confirmed" && i == id)
        }) {
            let event = stream.message().await?.expect("the stream goes on");
            let id = event.transaction.map(|t| t.id).unwrap_or_default();
            seen.push((event.event_id, event.r#type, id));
        }
        anyhow::Ok(())
    })
    .await??;
    Ok(seen)
}

/// Each of `ids` has its `submitted` event before its `confirmed` one, and ids increase.
fn in_order(events: &[(u64, String, String)], ids: &[String]) {
    assert!(events.windows(2).all(|w| w[0].0 < w[1].0), "{events:?}");
    for id in ids {
        let of: Vec<&str> = events
            .iter()
            .filter(|(_, _, i)| i == id)
            .map(|(_, t, _)| t.as_str())
            .collect();
        assert_eq!(
            of,
            ["transaction.submitted", "transaction.confirmed"],
            "{id}"
        );
    }
}

async fn a_watcher_that_reconnects_misses_nothing(b: Backend) -> anyhow::Result<()> {
    let anvil = Anvil::start().await?;
    let svc = Service::start_with(b, anvil.service_options("", &[])).await?;
    let api = svc.rest(&svc.api_key);
    anvil.fund_default_wallet(&api, parse_ether("1")?).await?;
    let mut stream = watch(&svc, WatchTransactionsRequest::default()).await?;
    let first = vec![send(&api).await?];
    let events = until_confirmed(&mut stream, &first).await?;
    in_order(&events, &first);
    let last = events.last().map(|e| e.0).unwrap_or_default();
    // Disconnected while two more sends settle.
    drop(stream);
    let later = vec![send(&api).await?, send(&api).await?];
    for id in &later {
        api.wait_for_status(id, "CONFIRMED").await?;
    }
    let resumed = WatchTransactionsRequest {
        after_event_id: Some(last),
        ..WatchTransactionsRequest::default()
    };
    let events = until_confirmed(&mut watch(&svc, resumed).await?, &later).await?;
    assert!(
        events.iter().all(|e| e.0 > last && e.2 != first[0]),
        "{events:?}"
    );
    in_order(&events, &later);
    // One transaction's changes from the start, and nothing else.
    let one = WatchTransactionsRequest {
        transaction_id: Some(later[0].clone()),
        after_event_id: Some(0),
        ..WatchTransactionsRequest::default()
    };
    let mut stream = watch(&svc, one).await?;
    // Read after the confirmation, the submitted event still says SUBMITTED: each event
    // carries the record in its own status.
    let submitted = within("the first event", stream.message())
        .await??
        .expect("an event");
    assert_eq!(submitted.r#type, "transaction.submitted");
    assert_eq!(
        submitted.transaction.map(|t| t.status()),
        Some(TransactionStatus::Submitted)
    );
    let events = until_confirmed(&mut stream, &later[..1]).await?;
    assert_eq!(events.len(), 1, "{events:?}");
    Ok(())
}

async fn a_bad_filter_is_refused_naming_it(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    let req = WatchTransactionsRequest {
        transaction_id: Some("not-a-uuid".to_owned()),
        chain: Some("nowhere".to_owned()),
        ..WatchTransactionsRequest::default()
    };
    let mut ops = WalletOpsServiceClient::new(svc.channel().await?);
    let err = ops
        .watch_transactions(with_key(req, &svc.api_key)?)
        .await
        .expect_err("refused");
    assert_eq!(reason(&err).as_deref(), Some("INVALID_INPUT"), "{err:?}");
    assert!(
        err.message().contains("transaction_id"),
        "{}",
        err.message()
    );
    assert!(err.message().contains("chain"), "{}", err.message());
    Ok(())
}

/// Reads the Server-Sent Events of `reply` until one of type `until` has come; the events
/// read, as (id, type, data).
pub(crate) async fn read_events(
    mut reply: reqwest::Response,
    until: &str,
) -> anyhow::Result<Vec<(String, String, serde_json::Value)>> {
    let mut text = String::new();
    within("the server-sent events", async {
        while !text.contains(&format!("event: {until}\n")) {
            let chunk = reply.chunk().await?.expect("the stream goes on");
            text.push_str(&String::from_utf8_lossy(&chunk));
        }
        anyhow::Ok(())
    })
    .await??;
    Ok(text
        .split("\n\n")
        .filter_map(|block| {
            let field = |name: &str| {
                block
                    .lines()
                    .find_map(|l| l.strip_prefix(&format!("{name}:")))
                    .map(|v| v.trim().to_owned())
            };
            let data = serde_json::from_str(&field("data")?).ok()?;
            Some((field("id")?, field("event")?, data))
        })
        .collect())
}

async fn server_sent_events_resume_from_the_last_event_id(b: Backend) -> anyhow::Result<()> {
    let anvil = Anvil::start().await?;
    let svc = Service::start_with(b, anvil.service_options("", &[])).await?;
    let api = svc.rest(&svc.api_key);
    anvil.fund_default_wallet(&api, parse_ether("1")?).await?;
    let id = send(&api).await?;
    api.wait_for_status(&id, "CONFIRMED").await?;
    let url = format!("{}/api/v1/tx/events?id={id}", svc.http);
    let events = |last: &str| {
        walletops_tests::http::client()
            .get(&url)
            .header("x-api-key", &svc.api_key)
            .header("last-event-id", last)
            .send()
    };
    // From the oldest: both of its changes, the record as GET /tx/{id} gives it.
    let reply = events("0").await?;
    assert_eq!(reply.status(), 200);
    assert!(
        reply.headers()["content-type"]
            .to_str()?
            .starts_with("text/event-stream")
    );
    let all = read_events(reply, "transaction.confirmed").await?;
    let kinds: Vec<&str> = all.iter().map(|(_, kind, _)| kind.as_str()).collect();
    assert_eq!(kinds, ["transaction.submitted", "transaction.confirmed"]);
    assert_eq!(all[1].2["id"], id.as_str());
    assert_eq!(all[1].2["status"], "CONFIRMED");
    // Each event in its own status, though both were read after the confirmation.
    assert_eq!(all[0].2["id"], id.as_str());
    assert_eq!(all[0].2["status"], "SUBMITTED");
    // After the first: only the second.
    let rest = read_events(events(&all[0].0).await?, "transaction.confirmed").await?;
    assert_eq!(rest.len(), 1, "{rest:?}");
    assert_eq!(rest[0].0, all[1].0);
    // A Last-Event-ID that is no id is refused naming it.
    let bad = walletops_tests::http::client()
        .get(&url)
        .header("x-api-key", &svc.api_key)
        .header("last-event-id", "yesterday")
        .send()
        .await?;
    assert_eq!(bad.status(), 400);
    let body: serde_json::Value = bad.json().await?;
    assert_eq!(body["code"], "INVALID_INPUT");
    assert!(
        body["error"].to_string().contains("Last-Event-ID"),
        "{body}"
    );
    // A bad `id` is named as the query spells it, not as the gRPC request does.
    let bad = walletops_tests::http::client()
        .get(format!("{}/api/v1/tx/events?id=nope", svc.http))
        .header("x-api-key", &svc.api_key)
        .send()
        .await?;
    assert_eq!(bad.status(), 400);
    let body: serde_json::Value = bad.json().await?;
    let error = body["error"].as_str().unwrap_or_default();
    assert!(error.starts_with("invalid input: id: "), "{body}");
    assert!(!error.contains("transaction_id"), "{body}");
    Ok(())
}

on_both_backends!(
    a_watcher_that_reconnects_misses_nothing,
    a_bad_filter_is_refused_naming_it,
    server_sent_events_resume_from_the_last_event_id,
);
