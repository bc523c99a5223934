//! Fair delivery: an endpoint that accepts connections and never answers holds at most
//! `webhooks.max_in_flight_per_endpoint` requests and delays nobody else; an endpoint that
//! fails for `webhooks.disable_after_secs` is disabled, and its owner told; replays are
//! capped per call.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use tokio::io::AsyncReadExt as _;
use walletops_tests::{
    Backend, on_both_backends, poll_until,
    webhooks::{Answer, Receiver},
};

use super::{all_settled, funded, send};

/// A listener that accepts every connection and never answers, counting the connections
/// open at once (one per request in flight: a sender that gives up closes its connection).
#[derive(Clone, Default)]
struct BlackHole {
    open: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
    accepted: Arc<AtomicUsize>,
}

impl BlackHole {
    async fn start(&self) -> anyhow::Result<String> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/hook", listener.local_addr()?);
        let hole = self.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                hole.accepted.fetch_add(1, Ordering::SeqCst);
                let now = hole.open.fetch_add(1, Ordering::SeqCst) + 1;
                hole.most.fetch_max(now, Ordering::SeqCst);
                let open = hole.open.clone();
                tokio::spawn(async move {
                    let mut sink = [0u8; 4096];
                    // Read (and ignore) until the sender closes.
                    while matches!(socket.read(&mut sink).await, Ok(n) if n > 0) {}
                    open.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        Ok(url)
    }
}

/// Six payments' events go to a black hole and to a healthy receiver. The healthy one takes
/// them all well within the black hole's timeout (a batch that waited for its slowest
/// delivery would hold them that long), and the black hole never has more than two requests
/// (the configured cap) open at once.
async fn a_black_hole_neither_starves_others_nor_holds_more_than_its_slots(
    b: Backend,
) -> anyhow::Result<()> {
    let env = [
        ("WALLETOPS_WEBHOOKS__TIMEOUT_SECS", "10"),
        ("WALLETOPS_WEBHOOKS__MAX_IN_FLIGHT_PER_ENDPOINT", "2"),
    ];
    let (_anvil, svc) = funded(b, &env).await?;
    let api = svc.rest(&svc.api_key);
    let hole = BlackHole::default();
    let hole_url = hole.start().await?;
    let registered = api
        .post("/webhooks", &serde_json::json!({"url": hole_url}))
        .await?;
    anyhow::ensure!(registered.status == 201, "{}", registered.text);
    let healthy = Receiver::start().await?;
    healthy.register(&api, &[]).await?;
    let mut ids = Vec::new();
    for _ in 0..6 {
        ids.push(send(&api).await?);
    }
    let sent = Instant::now();
    healthy
        .wait_until("every event at the healthy endpoint", |r| {
            all_settled(r, &ids)
        })
        .await?;
    let took = sent.elapsed();
    assert!(
        took < Duration::from_secs(8),
        "the healthy endpoint waited {took:?}, as long as the black hole's timeout"
    );
    poll_until("the black hole's slots taken", || async {
        Ok((hole.accepted.load(Ordering::SeqCst) >= 2).then_some(()))
    })
    .await?;
    let most = hole.most.load(Ordering::SeqCst);
    assert!(most <= 2, "{most} requests open at the black hole at once");
    Ok(())
}

/// An endpoint that answers 500 without a break for `webhooks.disable_after_secs` is
/// disabled, listed so, and its owner sees why on the Webhooks page; naming more
/// deliveries than `webhooks.replay_max_per_call` is refused, naming the limit.
async fn a_failing_endpoint_is_disabled_and_replays_are_capped(b: Backend) -> anyhow::Result<()> {
    let env = [
        ("WALLETOPS_WEBHOOKS__DISABLE_AFTER_SECS", "2"),
        ("WALLETOPS_WEBHOOKS__REPLAY_MAX_PER_CALL", "1"),
    ];
    let (_anvil, svc) = funded(b, &env).await?;
    let api = svc.rest(&svc.api_key);
    let hook = Receiver::start().await?;
    let id = hook.register(&api, &[]).await?;
    hook.answer(Answer::Status(500));
    send(&api).await?;
    let disabled = poll_until("the failing endpoint disabled", || async {
        let reply = api.get("/webhooks").await?;
        Ok(reply.body["webhooks"]
            .as_array()
            .and_then(|all| all.iter().find(|w| w["id"] == id.as_str()).cloned())
            .filter(|w| w["state"] == "disabled"))
    })
    .await?;
    assert_eq!(disabled["disabledReason"], "failing", "{disabled}");
    let mut dashboard = crate::dashboard::Dashboard::new(svc.channel().await?);
    let (token, _) = crate::dashboard::redeem(&svc, &mut dashboard).await?;
    let html = walletops_tests::http::client()
        .get(format!("{}/dashboard/webhooks", svc.http))
        .header("cookie", format!("walletops_session={token}"))
        .send()
        .await?
        .text()
        .await?;
    assert!(
        html.contains(&format!("data-disabled=\"{id}\""))
            && html.contains("every delivery failed for too long"),
        "no notice:\n{html}"
    );
    let two = [
        uuid::Uuid::new_v4().to_string(),
        uuid::Uuid::new_v4().to_string(),
    ];
    let refused = api
        .post(
            &format!("/webhooks/{id}/deliveries/replay"),
            &serde_json::json!({ "deliveryIds": two }),
        )
        .await?;
    refused.assert_error(400, "INVALID_INPUT")?;
    assert!(
        refused.text.contains("replay_max_per_call"),
        "{}",
        refused.text
    );
    Ok(())
}

on_both_backends!(
    a_black_hole_neither_starves_others_nor_holds_more_than_its_slots,
    a_failing_endpoint_is_disabled_and_replays_are_capped,
);
