//! What a node's answer to a broadcast means for its record: no verdict is no refusal, a
//! refusal of a transaction a node holds fails nothing, a definite refusal fails the record
//! and its key together, and a record taken as gone that is mined after all is settled.

use alloy::{
    primitives::{Bytes, U256},
    providers::Provider as _,
};
use serde_json::{Value, json};
use walletops_tests::{
    Backend,
    gateway::{Limits, Sends},
    on_both_backends, poll_until,
};

use super::{Evm, RECIPIENT, assert_never_re_signed, monitor_toml, submitted_id};

async fn a_broadcast_without_verdict_is_sent_again_not_failed(b: Backend) -> anyhow::Result<()> {
    let e = Evm::behind_gateway(b, &monitor_toml(1), &[], &[]).await?;
    e.gateway()?.set(Sends::Fail);
    let (id, hash) = e.send_native(RECIPIENT, "7").await?;
    // The transaction may have been passed on: not a refusal, so no error and no freed nonce.
    let tx = e.wait_for_note(&id, "no verdict").await?;
    assert_eq!(tx["status"], "SUBMITTED", "{tx}");
    assert_eq!(e.anvil.nonce(e.wallet).await?, 0);
    // Once the gateway passes sends on again, the monitor's next send of the same bytes lands.
    e.gateway()?.set(Sends::PassOn);
    let tx = e.wait_for(&id, "CONFIRMED").await?;
    assert_eq!(tx["hash"], hash, "the same signed bytes");
    e.assert_paid(1, 7).await?;
    Ok(())
}

async fn a_refused_send_the_node_holds_is_not_failed(b: Backend) -> anyhow::Result<()> {
    let e = Evm::behind_gateway(b, "[monitor]\npoll_interval_ms = 100\n", &[], &[]).await?;
    // The node takes the transaction, but the answer is a refusal in unknown words: the
    // node is asked whether it holds the transaction before the record is failed, its key
    // failed and its nonce freed, which would have the caller pay again.
    e.gateway()?.set(Sends::PassOnThenRefuse);
    let (id, hash) = e.send_native(RECIPIENT, "7").await?;
    let tx = e.wait_for(&id, "CONFIRMED").await?;
    assert_eq!(tx["hash"], hash);
    assert_eq!(e.anvil.nonce(e.wallet).await?, 1);
    // The same when the monitor makes the send: the first one got no verdict.
    e.gateway()?.set(Sends::Fail);
    let (id, hash) = e.send_native(RECIPIENT, "2").await?;
    e.gateway()?.set(Sends::PassOnThenRefuse);
    let tx = e.wait_for(&id, "CONFIRMED").await?;
    assert_eq!(tx["hash"], hash);
    assert_eq!(e.anvil.nonce(e.wallet).await?, 2);
    // The ledger kept both nonces taken: the next send takes nonce 2 and is not refused.
    e.gateway()?.set(Sends::PassOn);
    let (next, _) = e.send_native(RECIPIENT, "3").await?;
    let next = e.wait_for(&next, "CONFIRMED").await?;
    assert_never_re_signed(&next);
    e.assert_paid(3, 12).await?;
    Ok(())
}

async fn a_refusal_fails_the_record_and_its_key_together(b: Backend) -> anyhow::Result<()> {
    // The service is killed after a definite refusal failed the record and before the
    // request answered: the key must not replay a success for a payment that never went out.
    let mut e = Evm::behind_gateway(
        b,
        "",
        &[],
        &[("FAILPOINTS", "write-before-failing-key=pause")],
    )
    .await?;
    e.gateway()?.set(Sends::Refuse);
    let key = uuid::Uuid::new_v4().to_string();
    let hung = {
        let (api, key) = (e.api(), key.clone());
        let body = json!({"chain": "anvil", "to": RECIPIENT, "asset": "native", "amount": "5"});
        tokio::spawn(async move { api.post_with_key("/send", &key, &body.to_string()).await })
    };
    e.svc.wait_for_stored_statuses("send", &["failed"]).await?;
    e.restart("", &[]).await?;
    assert!(
        hung.await?.map(|r| r.status != 200).unwrap_or(true),
        "the killed request answered no success"
    );
    e.gateway()?.set(Sends::PassOn);
    e.keyed_send(&key, "5")
        .await?
        .assert_error(409, "IDEMPOTENT_REPLAY")?;
    assert_eq!(e.anvil.nonce(e.wallet).await?, 0);
    assert!(e.anvil.pool_hashes().await?.is_empty());
    assert_eq!(e.svc.stored_statuses("send").await?, ["failed"]);
    // The freed nonce serves the next payment.
    let (id, _) = e.send_native(RECIPIENT, "5").await?;
    e.wait_for(&id, "CONFIRMED").await?;
    assert_eq!(e.anvil.balance(RECIPIENT.parse()?).await?, U256::from(5u64));
    Ok(())
}

async fn a_record_is_its_requests_until_its_first_send_is_answered(
    b: Backend,
) -> anyhow::Result<()> {
    // The node takes three seconds to answer the request's first send, and refuses it. The
    // monitor must not send or end the record meanwhile: its send could have the payment
    // made while the request fails the record, or it could fail the record while the request
    // answers SUBMITTED.
    let e = Evm::behind_gateway(
        b,
        "[monitor]\npoll_interval_ms = 100\n",
        &[],
        &[("FAILPOINTS", "evm-before-broadcast=sleep(3000)")],
    )
    .await?;
    e.gateway()?.set(Sends::Refuse);
    let reply = e
        .api()
        .post(
            "/send",
            &json!({"chain": "anvil", "to": RECIPIENT, "asset": "native", "amount": "5"}),
        )
        .await?;
    reply.assert_error(502, "SEND_FAILED")?;
    assert_eq!(e.svc.stored_statuses("send").await?, ["failed"]);
    // Signed, then failed by the request: nothing in between.
    let history: Vec<Value> = serde_json::from_str(&e.svc.stored_histories("send").await?[0])?;
    assert_eq!(history.len(), 2, "{history:?}");
    Ok(())
}

async fn a_mined_transaction_a_lagging_node_hides_is_not_signed_again(
    b: Backend,
) -> anyhow::Result<()> {
    // A sight that lasts far longer than the test needs to look, however loaded the machine.
    let e = Evm::behind_gateway(
        b,
        "[monitor]\npoll_interval_ms = 100\nresign_after_secs = 60\n",
        &[],
        &[],
    )
    .await?;
    // Mined at once, but the node that answers about transactions is behind the one that
    // answers the nonce: the nonce is used and no version of the record is found.
    e.gateway()?.limit(Limits {
        behind: true,
        ..Limits::default()
    });
    let (id, hash) = e.send_native(RECIPIENT, "5").await?;
    e.anvil
        .wait_for_nonce("the transaction to be mined", e.wallet, 1)
        .await?;
    // A new nonce now would pay twice: the record waits, checking again.
    let waiting = e.wait_for_note(&id, "checked again").await?;
    assert_eq!(waiting["hash"], hash.as_str(), "{waiting}");
    e.gateway()?.limit(Limits::default());
    let tx = e.wait_for(&id, "CONFIRMED").await?;
    assert_eq!(tx["hash"], hash.as_str());
    assert_never_re_signed(&tx);
    e.assert_paid(1, 5).await?;
    Ok(())
}

/// Over a gateway to a node that does not mine, with `stuck_after_secs`: a send of 5 wei the
/// node takes, then loses, and refuses every time it is sent again (a full pool, a relay's
/// policy). Returns the service, the record's id and its hash.
async fn lost_then_refused(
    b: Backend,
    stuck_after_secs: u64,
) -> anyhow::Result<(Evm, String, String)> {
    let e = Evm::behind_gateway(b, &monitor_toml(stuck_after_secs), &["--no-mining"], &[]).await?;
    let (id, hash) = e.send_native(RECIPIENT, "5").await?;
    e.gateway()?.set(Sends::Refuse);
    e.anvil.drop_transaction(&hash).await?;
    Ok((e, id, hash))
}

async fn a_transaction_a_node_took_is_not_ended_by_a_refusal(b: Backend) -> anyhow::Result<()> {
    // It may still sit in other nodes' pools and be mined, so it is neither dropped nor its
    // nonce given back; it is sent again until a node takes it.
    let (e, id, hash) = lost_then_refused(b, 3600).await?;
    let waiting = e
        .wait_for_note(&id, "sent again after pauses that grow")
        .await?;
    assert_eq!(waiting["status"], "SUBMITTED", "{waiting}");
    assert_eq!(e.svc.stored_statuses("nonce_fill").await?.len(), 0);
    e.gateway()?.set(Sends::PassOn);
    e.wait_for_pool("the transaction back in the pool", &[&hash])
        .await?;
    e.anvil.mine().await?;
    let tx = e.wait_for(&id, "CONFIRMED").await?;
    assert_eq!(tx["hash"], hash.as_str(), "the same signed bytes");
    assert_eq!(e.anvil.balance(RECIPIENT.parse()?).await?, U256::from(5u64));
    // Its nonce was not given back: the next send takes nonce 1.
    let (next, _) = e.send_native(RECIPIENT, "1").await?;
    e.anvil.mine().await?;
    let next = e.wait_for(&next, "CONFIRMED").await?;
    assert_never_re_signed(&next);
    assert_eq!(e.anvil.nonce(e.wallet).await?, 2);
    Ok(())
}

async fn a_transaction_refused_for_five_stuck_times_is_dropped(b: Backend) -> anyhow::Result<()> {
    // Kept open for five stuck times, then taken as gone. A node may still hold it, so its
    // nonce is filled, never given back to the next payment.
    let (e, id, _) = lost_then_refused(b, 1).await?;
    let dropped = e.wait_for(&id, "DROPPED").await?;
    assert!(
        dropped["statusHistory"]
            .to_string()
            .contains("raised in fee at most once"),
        "{dropped}"
    );
    assert_eq!(e.svc.stored_statuses("nonce_fill").await?, ["submitted"]);
    e.gateway()?.set(Sends::PassOn);
    let (next, _) = e.send_native(RECIPIENT, "7").await?;
    e.wait_for_pool_size("the filler and the next send pending", 2)
        .await?;
    e.anvil.mine().await?;
    let next = e.wait_for(&next, "CONFIRMED").await?;
    assert_never_re_signed(&next);
    e.assert_paid(2, 7).await?;
    Ok(())
}

async fn a_dropped_transaction_mined_after_all_is_settled(b: Backend) -> anyhow::Result<()> {
    // A node the service cannot reach any more still holds the transaction, taken as gone
    // after five stuck times of refusals, and mines it: its filler is not needed, and the
    // record must not stay DROPPED (its caller would pay again).
    let e = Evm::behind_gateway(
        b,
        &monitor_toml(1),
        &["--no-mining"],
        &[("WALLETOPS_IDEMPOTENCY_RETENTION_SECS", "1")],
    )
    .await?;
    let key = uuid::Uuid::new_v4().to_string();
    let sent = e.keyed_send(&key, "5").await?;
    let (id, hash) = (
        submitted_id(&sent)?,
        sent.body["hash"].as_str().unwrap_or_default().to_owned(),
    );
    let raw: Bytes = e
        .anvil
        .provider()
        .raw_request("eth_getRawTransactionByHash".into(), (hash.as_str(),))
        .await?;
    e.gateway()?.set(Sends::Refuse);
    e.anvil.drop_transaction(&hash).await?;
    let dropped = e.wait_for(&id, "DROPPED").await?;
    assert_eq!(e.svc.stored_statuses("nonce_fill").await?, ["submitted"]);
    // Past its retention, counted from the record's ending too, the key still stands while
    // the filler is open: the record may yet turn out mined.
    let ended: chrono::DateTime<chrono::Utc> =
        dropped["updatedAt"].as_str().unwrap_or_default().parse()?;
    poll_until(
        "the key's retention to pass since the record ended",
        || async { Ok((chrono::Utc::now() - ended > chrono::Duration::seconds(2)).then_some(())) },
    )
    .await?;
    let replay = e.keyed_send(&key, "5").await?;
    assert_eq!(submitted_id(&replay)?, id, "replayed, not sent again");
    // Finding the filler unneeded and settling the record takes no signing: it happens for
    // a wallet no longer delegated too.
    let wallet = e.wallet.to_string();
    e.svc.delegate(&wallet, false).await?;
    let _pending = e.anvil.provider().send_raw_transaction(&raw).await?;
    e.anvil.mine().await?;
    e.gateway()?.set(Sends::PassOn);
    let settled = e.wait_for(&id, "CONFIRMED").await?;
    assert_eq!(settled["hash"], hash.as_str(), "{settled}");
    assert!(
        settled["statusHistory"]
            .to_string()
            .contains("mined after all"),
        "{settled}"
    );
    e.svc
        .wait_for_stored_statuses("nonce_fill", &["dropped"])
        .await?;
    e.assert_paid(1, 5).await?;
    Ok(())
}

async fn a_failed_transaction_whose_nonce_was_reused_and_that_was_mined_is_settled(
    b: Backend,
) -> anyhow::Result<()> {
    // The gateway refuses the send for sure, so the record fails and gives its nonce back;
    // yet another node behind it had the transaction and mines it. The next payment, signed
    // with the same nonce, finds it used.
    let e = Evm::behind_gateway(b, "[monitor]\npoll_interval_ms = 100\n", &[], &[]).await?;
    e.gateway()?.set(Sends::Refuse);
    let key = uuid::Uuid::new_v4().to_string();
    e.keyed_send(&key, "5")
        .await?
        .assert_error(502, "SEND_FAILED")?;
    e.keyed_send(&key, "5")
        .await?
        .assert_error(409, "IDEMPOTENT_REPLAY")?;
    let raw: Bytes = e.gateway()?.refused()[0].parse()?;
    let _pending = e.anvil.provider().send_raw_transaction(&raw).await?;
    e.anvil
        .wait_for_nonce("the refused transaction to be mined", e.wallet, 1)
        .await?;
    e.gateway()?.set(Sends::PassOn);
    let (next, _) = e.send_native(RECIPIENT, "7").await?;
    e.wait_for(&next, "CONFIRMED").await?;
    // The failed payment was made: its key answers with it, and its record says so.
    let replay = poll_until("the failed key to answer with its payment", || async {
        let reply = e.keyed_send(&key, "5").await?;
        Ok((reply.status == 200).then_some(reply))
    })
    .await?;
    let settled = e.wait_for(&submitted_id(&replay)?, "CONFIRMED").await?;
    assert!(
        settled["statusHistory"]
            .to_string()
            .contains("after it had ended FAILED"),
        "{settled}"
    );
    e.assert_paid(2, 12).await?;
    Ok(())
}

on_both_backends!(
    a_broadcast_without_verdict_is_sent_again_not_failed,
    a_refused_send_the_node_holds_is_not_failed,
    a_refusal_fails_the_record_and_its_key_together,
    a_record_is_its_requests_until_its_first_send_is_answered,
    a_mined_transaction_a_lagging_node_hides_is_not_signed_again,
    a_transaction_a_node_took_is_not_ended_by_a_refusal,
    a_transaction_refused_for_five_stuck_times_is_dropped,
    a_dropped_transaction_mined_after_all_is_settled,
    a_failed_transaction_whose_nonce_was_reused_and_that_was_mined_is_settled,
);
