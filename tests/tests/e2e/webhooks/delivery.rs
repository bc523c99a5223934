//! Deliveries: signed, in order, retried under one `webhook-id`, dead-lettered and
//! replayed, sent again after a crash, and sent once by several cores.

use prometheus_parse::{Sample, Scrape, Value};
use walletops_tests::{
    Backend, Service, on_both_backends, poll_until,
    webhooks::{Answer, Receiver},
};

use super::{all_settled, funded, send, verified_and_in_order};

/// Every event of three payments reaches the receiver signed, in order per transaction,
/// each under its own `webhook-id`; a delivery's body is the Standard Webhooks envelope
/// (`type`, `timestamp`, `data`), verified by the convention's own library, its `data` the
/// record as `GET /tx/{id}` gives it, in the status its event is about.
async fn every_delivery_is_signed_and_is_the_record(b: Backend) -> anyhow::Result<()> {
    let (_anvil, svc) = funded(b, &[]).await?;
    let api = svc.rest(&svc.api_key);
    let hook = Receiver::start().await?;
    hook.register(&api, &[]).await?;
    let ids = vec![send(&api).await?, send(&api).await?, send(&api).await?];
    let received = hook
        .wait_until("every event of three payments", |r| all_settled(r, &ids))
        .await?;
    verified_and_in_order(&received, &ids);
    assert_eq!(received.len(), 6, "each event delivered once: {received:?}");
    let mut webhook_ids: Vec<&str> = received.iter().map(|d| d.id.as_str()).collect();
    webhook_ids.sort_unstable();
    webhook_ids.dedup();
    assert_eq!(webhook_ids.len(), 6, "one webhook-id per event");
    let secret = hook.secret().expect("registered");
    for d in &received {
        let event = d.verified_by_standardwebhooks(&secret).await?;
        assert_eq!(event, d.envelope, "the library reads what was sent");
        let mut keys: Vec<&String> = event.as_object().expect("an object").keys().collect();
        keys.sort_unstable();
        assert_eq!(keys, ["data", "timestamp", "type"], "{event}");
        let status = d.body["status"].as_str().unwrap_or_default();
        assert_eq!(
            event["type"],
            format!("transaction.{}", status.to_ascii_lowercase()),
            "the data is in the status of its event: {event}"
        );
        let at = chrono::DateTime::parse_from_rfc3339(event["timestamp"].as_str().unwrap_or(""))?;
        assert!(
            at.timestamp() <= d.timestamp,
            "the change, then its delivery: {event}"
        );
    }
    for id in &ids {
        let record = api.transaction(id).await?;
        let confirmed = hook.wait_for_event(id, "transaction.confirmed").await?;
        assert_eq!(
            confirmed.body, record,
            "the confirmed event's body is the record"
        );
        let submitted = hook.wait_for_event(id, "transaction.submitted").await?;
        assert_eq!(submitted.body["status"], "SUBMITTED");
        assert_eq!(submitted.body["hash"], record["hash"]);
    }
    Ok(())
}

/// The metrics of `svc`, parsed.
async fn scrape(svc: &Service) -> anyhow::Result<Scrape> {
    let url = svc.metrics_url.as_deref().expect("a metrics listener");
    let text = walletops_tests::http::get(format!("{url}/metrics"))
        .await?
        .text()
        .await?;
    Ok(Scrape::parse(text.lines().map(|l| Ok(l.to_owned())))?)
}

/// The sum of the samples of `walletops_webhook_attempts_total` with `outcome`.
fn attempts(scrape: &Scrape, outcome: &str) -> f64 {
    scrape
        .samples
        .iter()
        .filter(|s: &&Sample| s.metric == "walletops_webhook_attempts_total")
        .filter(|s| s.labels.get("outcome") == Some(outcome))
        .map(|s| match s.value {
            Value::Counter(v) | Value::Untyped(v) => v,
            _ => 0.0,
        })
        .sum()
}

/// A receiver that answers 500 for a while, then 200, gets every event, in order per
/// transaction, each retry under the same `webhook-id`; the metrics count each attempt.
async fn a_failing_receiver_gets_every_event_in_order_under_one_id(
    b: Backend,
) -> anyhow::Result<()> {
    let (_anvil, svc) = funded(b, &[("WALLETOPS_METRICS_ADDR", "127.0.0.1:0")]).await?;
    let api = svc.rest(&svc.api_key);
    let hook = Receiver::start().await?;
    let endpoint = hook.register(&api, &[]).await?;
    hook.answer(Answer::Status(500));
    let ids = vec![send(&api).await?, send(&api).await?, send(&api).await?];
    // Until a delivery has been refused three times.
    hook.wait_until("three attempts at one delivery", |r| {
        r.iter()
            .any(|d| r.iter().filter(|e| e.id == d.id).count() >= 3)
    })
    .await?;
    hook.answer(Answer::Status(200));
    let received = hook
        .wait_until("every event after the failures", |r| all_settled(r, &ids))
        .await?;
    verified_and_in_order(&received, &ids);
    // A retry is the same delivery: each webhook-id is of one transaction and event, and
    // is taken once, after every refusal of it.
    for d in &received {
        let same: Vec<_> = received.iter().filter(|e| e.id == d.id).collect();
        assert!(same.iter().all(|e| e.transaction() == d.transaction()));
        // Every attempt tells the same event: its time is the change's, not the attempt's.
        assert!(
            same.iter()
                .all(|e| e.envelope["timestamp"] == d.envelope["timestamp"]),
            "{}",
            d.id
        );
        assert_eq!(same.iter().filter(|e| e.taken()).count(), 1, "{}", d.id);
        assert!(
            same.last().is_some_and(|e| e.taken()),
            "taken last: {}",
            d.id
        );
    }
    let refused = received.iter().filter(|d| d.answered == 500).count();
    assert!(refused >= 3, "{received:?}");
    // A delivery is noted delivered once its receiver has answered: the last answer may be
    // in before its note.
    let (listed, deliveries) = poll_until("six deliveries noted delivered", || async {
        let listed = api
            .get(&format!("/webhooks/{endpoint}/deliveries?state=delivered"))
            .await?;
        assert_eq!(listed.status, 200, "{}", listed.text);
        let deliveries = listed.body["deliveries"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(deliveries.len() <= 6, "{}", listed.text);
        Ok((deliveries.len() == 6).then_some((listed, deliveries)))
    })
    .await?;
    let attempted: u64 = deliveries
        .iter()
        .map(|d| d["attempts"].as_u64().unwrap_or_default())
        .sum();
    assert_eq!(attempted as usize, received.len(), "{}", listed.text);
    // The counters, once the last outcome is noted.
    let metrics = poll_until("the webhook counters", || async {
        let metrics = scrape(&svc).await?;
        Ok((attempts(&metrics, "delivered") == 6.0).then_some(metrics))
    })
    .await?;
    assert_eq!(attempts(&metrics, "retried"), refused as f64);
    assert_eq!(attempts(&metrics, "dead_lettered"), 0.0);
    Ok(())
}

/// Deliveries whose retry window closes are dead-lettered, listed as such, and replayed on
/// request under the same `webhook-id`.
async fn dead_letters_are_listed_and_replayed(b: Backend) -> anyhow::Result<()> {
    let (_anvil, svc) = funded(b, &[("WALLETOPS_WEBHOOKS__RETRY_FOR_SECS", "2")]).await?;
    let api = svc.rest(&svc.api_key);
    let hook = Receiver::start().await?;
    let endpoint = hook.register(&api, &["transaction.confirmed"]).await?;
    hook.answer(Answer::Status(503));
    let id = send(&api).await?;
    let dead_path = format!("/webhooks/{endpoint}/deliveries?state=dead");
    let dead = poll_until("the delivery to be dead-lettered", || async {
        let reply = api.get(&dead_path).await?;
        anyhow::ensure!(reply.status == 200, "{}", reply.text);
        let dead = reply.body["deliveries"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        Ok((!dead.is_empty()).then_some(dead))
    })
    .await?;
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0]["eventType"], "transaction.confirmed");
    assert_eq!(dead[0]["transactionId"], id.as_str());
    assert_eq!(dead[0]["lastStatus"], 503);
    let attempts_before = hook.received().len();
    hook.answer(Answer::Status(200));
    let replay = api
        .post(
            &format!("/webhooks/{endpoint}/deliveries/replay"),
            &serde_json::json!({}),
        )
        .await?;
    assert_eq!(replay.status, 200, "{}", replay.text);
    assert_eq!(replay.body["replayed"], 1);
    let taken = hook.wait_for_event(&id, "transaction.confirmed").await?;
    assert_eq!(taken.id, dead[0]["id"].as_str().unwrap_or_default());
    assert!(hook.received().len() > attempts_before);
    let still_dead = api.get(&dead_path).await?;
    assert_eq!(still_dead.body["deliveries"], serde_json::json!([]));
    Ok(())
}

/// A core killed (SIGKILL) while a delivery is in flight, its event's status change
/// committed: after the restart the delivery is sent again, the same `webhook-id` and
/// event, and the events after it follow in order.
async fn a_core_killed_mid_delivery_delivers_after_restart(b: Backend) -> anyhow::Result<()> {
    let (_anvil, mut svc) = funded(b, &[]).await?;
    let api = svc.rest(&svc.api_key);
    let hook = Receiver::start().await?;
    hook.register(&api, &[]).await?;
    hook.answer(Answer::Hang);
    let id = send(&api).await?;
    let held = hook
        .wait_until("the first delivery, held open", |r| !r.is_empty())
        .await?
        .remove(0);
    api.wait_for_status(&id, "CONFIRMED").await?;
    svc.kill().await?;
    hook.answer(Answer::Status(200));
    svc.relaunch(svc.options().clone()).await?;
    let api = svc.rest(&svc.api_key);
    let ids = [id.clone()];
    let received = hook
        .wait_until("the events after the restart", |r| all_settled(r, &ids))
        .await?;
    verified_and_in_order(&received, &ids);
    let again = hook.wait_for_event(&id, "transaction.submitted").await?;
    assert_eq!(again.id, held.id, "the same delivery, sent again");
    assert_eq!(again.body["status"], "SUBMITTED");
    let confirmed = hook.wait_for_event(&id, "transaction.confirmed").await?;
    assert_eq!(confirmed.body, api.transaction(&id).await?);
    Ok(())
}

on_both_backends!(
    every_delivery_is_signed_and_is_the_record,
    a_failing_receiver_gets_every_event_in_order_under_one_id,
    dead_letters_are_listed_and_replayed,
    a_core_killed_mid_delivery_delivers_after_restart,
);

/// Two cores over one PostgreSQL database deliver each event once: no `webhook-id` is
/// received twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_cores_over_one_database_deliver_each_event_once() -> anyhow::Result<()> {
    let (_anvil, svc) = funded(Backend::Postgres, &[]).await?;
    let _sibling = svc.sibling().await?;
    let api = svc.rest(&svc.api_key);
    let hook = Receiver::start().await?;
    hook.register(&api, &[]).await?;
    let mut ids = Vec::new();
    for _ in 0..10 {
        ids.push(send(&api).await?);
    }
    let received = hook
        .wait_until("every event of ten payments", |r| all_settled(r, &ids))
        .await?;
    verified_and_in_order(&received, &ids);
    let mut webhook_ids: Vec<&str> = received.iter().map(|d| d.id.as_str()).collect();
    webhook_ids.sort_unstable();
    let all = webhook_ids.len();
    webhook_ids.dedup();
    assert_eq!(all, webhook_ids.len(), "a delivery was sent twice");
    assert_eq!(all, 20);
    Ok(())
}
