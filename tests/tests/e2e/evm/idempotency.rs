//! Idempotency keys on chain writes: one key gives one transaction under concurrency and
//! across a wallet's change of state, keys outlive their retention while their transaction is
//! open, and a write whose outcome is unknown is found again by its key.

use std::collections::BTreeSet;

use alloy::primitives::U256;
use anyhow::Context as _;
use serde_json::json;
use walletops_tests::{
    Backend,
    metrics::{scrape_text, sum},
    on_both_backends, poll_until,
};

use super::{ETH, Evm, RECIPIENT, monitor_toml, submitted_id};

/// How many requests met a concurrent twin's claim of their key `at` (`claim`, `failure`).
async fn twins_met(e: &Evm, at: &str) -> anyhow::Result<f64> {
    let url = e.svc.metrics_url.clone().context("a metrics listener")?;
    Ok(sum(
        &scrape_text(&url).await?,
        "walletops_idempotency_twins_met_total",
        Some(&format!("at=\"{at}\"")),
    ))
}

async fn one_idempotency_key_gives_one_transaction(b: Backend) -> anyhow::Result<()> {
    // The first two twins to find the key free wait for each other before they build:
    // both sign, and one of them loses the claim (the race this test is about happens).
    let e = Evm::start_with_env(
        b,
        "",
        &[],
        &[
            ("BARRIERS", "write-before-run=2"),
            ("WALLETOPS_METRICS_ADDR", "127.0.0.1:0"),
        ],
    )
    .await?;
    let key = uuid::Uuid::new_v4().to_string();
    let body = json!({"chain": "anvil", "to": "0x1111111111111111111111111111111111111111",
                      "asset": "native", "amount": "1000"})
    .to_string();
    let api = e.api();
    let replies = futures::future::join_all((0..20).map(|_| {
        let api = api.clone();
        let (key, body) = (key.clone(), body.clone());
        async move { api.post_with_key("/send", &key, &body).await }
    }))
    .await;
    // Every twin gets the one submission: the first to commit its claim wins, the others
    // roll back and answer with its transaction.
    let mut ids = BTreeSet::new();
    let mut hashes = BTreeSet::new();
    let mut bodies = BTreeSet::new();
    for reply in replies {
        let reply = reply?;
        ids.insert(submitted_id(&reply)?);
        hashes.insert(reply.body["hash"].to_string());
        bodies.insert(reply.body.to_string());
    }
    assert!(
        twins_met(&e, "claim").await? >= 1.0,
        "two twins raced for the key's claim"
    );
    assert_eq!(bodies.len(), 1, "every twin answers alike: {bodies:?}");
    assert_eq!(ids.len(), 1, "{ids:?}");
    assert_eq!(hashes.len(), 1, "{hashes:?}");
    let id = ids.into_iter().next().expect("one id");
    e.wait_for(&id, "CONFIRMED").await?;
    assert_eq!(
        e.anvil.nonce(e.wallet).await?,
        1,
        "exactly one transaction on chain"
    );
    // A later retry replays the stored response exactly; another body is refused.
    let replay = api.post_with_key("/send", &key, &body).await?;
    assert_eq!(replay.status, 200);
    assert_eq!(bodies.first(), Some(&replay.body.to_string()));
    let other = body.replace("1000", "1001");
    api.post_with_key("/send", &key, &other)
        .await?
        .assert_error(409, "IDEMPOTENT_BODY_MISMATCH")?;
    // (Keys are per user: errors.rs has that test.)
    assert_eq!(e.anvil.nonce(e.wallet).await?, 1);
    // The twins that lost rolled back their nonces with their claims: the next send takes
    // nonce 1, so nothing is stranded behind a gap.
    let next = api.post("/send", &serde_json::from_str(&body)?).await?;
    e.wait_for(&submitted_id(&next)?, "CONFIRMED").await?;
    assert_eq!(e.anvil.nonce(e.wallet).await?, 2);
    Ok(())
}

async fn a_twin_refused_for_the_payment_its_key_made_answers_with_it(
    b: Backend,
) -> anyhow::Result<()> {
    // Both twins find the key free and meet at a barrier; then one waits 3 s, so the other
    // claims the key and its payment is mined first; the waiting twin's simulation then
    // finds the balance spent. Its answer is the twin's transaction, not INSUFFICIENT_FUNDS: that would send
    // the caller to pay again under a new key.
    let e = Evm::start_with_env(
        b,
        "",
        &[],
        &[
            ("BARRIERS", "write-before-run=2"),
            ("FAILPOINTS", "write-before-run=1*sleep(3000)"),
            ("WALLETOPS_METRICS_ADDR", "127.0.0.1:0"),
        ],
    )
    .await?;
    let key = uuid::Uuid::new_v4().to_string();
    let amount = (60 * ETH).to_string();
    let (first, second) = tokio::join!(e.keyed_send(&key, &amount), e.keyed_send(&key, &amount));
    let (first, second) = (first?, second?);
    // The race happened: both twins found the key free (the barrier), and one met the
    // other's claim, at its failure (the balance spent, as here mostly) or, when the held
    // twin's simulation came before the payment was mined, at its claim.
    let met = twins_met(&e, "failure").await? + twins_met(&e, "claim").await?;
    assert_eq!(met, 1.0, "one twin met the other's claim");
    assert_eq!(first.status, 200, "{}", first.text);
    assert_eq!(second.status, 200, "{}", second.text);
    let id = submitted_id(&first)?;
    assert_eq!(submitted_id(&second)?, id);
    e.wait_for(&id, "CONFIRMED").await?;
    assert_eq!(e.anvil.nonce(e.wallet).await?, 1);
    assert_eq!(
        e.anvil.balance(RECIPIENT.parse()?).await?,
        U256::from(60 * ETH)
    );
    // The key still stands for that transaction.
    let replay = e.keyed_send(&key, &amount).await?;
    assert_eq!(submitted_id(&replay)?, id);
    Ok(())
}

async fn a_retry_gets_its_answer_even_after_the_wallet_is_withdrawn(
    b: Backend,
) -> anyhow::Result<()> {
    let e = Evm::start(b, "", &[]).await?;
    let key = uuid::Uuid::new_v4().to_string();
    let sent = e.keyed_send(&key, "5").await?;
    let id = submitted_id(&sent)?;
    let wallet = e.wallet.to_string();
    e.svc.delegate(&wallet, false).await?;
    // The retry of a send that went out is answered from its key, not refused by the
    // wallet's new state: the caller must not take it for a send that never happened.
    let retry = e.keyed_send(&key, "5").await?;
    assert_eq!(retry.status, 200, "{}", retry.text);
    assert_eq!(retry.body, sent.body);
    e.keyed_send(&key, "6")
        .await?
        .assert_error(409, "IDEMPOTENT_BODY_MISMATCH")?;
    // A new request is refused by the wallet's state, and nothing more is sent.
    e.keyed_send(&uuid::Uuid::new_v4().to_string(), "5")
        .await?
        .assert_error(403, "WALLET_NOT_DELEGATED")?;
    e.wait_for(&id, "CONFIRMED").await?;
    e.assert_paid(1, 5).await?;
    Ok(())
}

async fn keys_outlive_their_retention_only_while_their_transaction_is_open(
    b: Backend,
) -> anyhow::Result<()> {
    let e = Evm::start_with_env(
        b,
        &monitor_toml(3600),
        &["--no-mining"],
        &[("WALLETOPS_IDEMPOTENCY_RETENTION_SECS", "6")],
    )
    .await?;
    // A send the node holds unmined, then (later, so it expires later) a refused one.
    let open_key = uuid::Uuid::new_v4().to_string();
    let sent = e.keyed_send(&open_key, "5").await?;
    let id = submitted_id(&sent)?;
    let failed_key = uuid::Uuid::new_v4().to_string();
    let too_much = (1000 * ETH).to_string();
    e.keyed_send(&failed_key, &too_much)
        .await?
        .assert_error(400, "INSUFFICIENT_FUNDS")?;
    e.keyed_send(&failed_key, &too_much)
        .await?
        .assert_error(409, "IDEMPOTENT_REPLAY")?;
    // Past its retention the failed key is free again: the request runs anew.
    poll_until("the failed key's retention to pass", || async {
        let reply = e.keyed_send(&failed_key, &too_much).await?;
        Ok((reply.code() != Some("IDEMPOTENT_REPLAY")).then_some(reply))
    })
    .await?
    .assert_error(400, "INSUFFICIENT_FUNDS")?;
    // The older key is past its retention too, but its transaction is open: still bound.
    e.keyed_send(&open_key, "6")
        .await?
        .assert_error(409, "IDEMPOTENT_BODY_MISMATCH")?;
    let again = e.keyed_send(&open_key, "5").await?;
    assert_eq!(submitted_id(&again)?, id, "replayed, not sent again");
    assert_eq!(e.anvil.pool_hashes().await?.len(), 1);
    // Settled, it is kept for the retention once more, counted from its settling, then
    // expires like any other key.
    e.anvil.mine().await?;
    e.wait_for(&id, "CONFIRMED").await?;
    e.keyed_send(&open_key, "6")
        .await?
        .assert_error(409, "IDEMPOTENT_BODY_MISMATCH")?;
    let reused = poll_until("the settled key's retention to pass", || async {
        let reply = e.keyed_send(&open_key, "6").await?;
        Ok((reply.code() != Some("IDEMPOTENT_BODY_MISMATCH")).then_some(reply))
    })
    .await?;
    assert_ne!(
        submitted_id(&reused)?,
        id,
        "a new request under the freed key"
    );
    Ok(())
}

async fn a_write_that_timed_out_says_its_outcome_is_unknown_and_its_key_finds_it(
    b: Backend,
) -> anyhow::Result<()> {
    // The node's answer to the first send comes after the request's time is up: the record
    // is signed and stored, and the payment is made after all.
    let e = Evm::start_with_env(
        b,
        "[monitor]\npoll_interval_ms = 100\n",
        &[],
        &[
            ("WALLETOPS_REQUEST_TIMEOUT_SECS", "2"),
            ("FAILPOINTS", "evm-before-broadcast=1*sleep(4000)"),
        ],
    )
    .await?;
    let key = uuid::Uuid::new_v4().to_string();
    let reply = e.keyed_send(&key, "5").await?;
    reply.assert_error(503, "SERVICE_UNAVAILABLE")?;
    // Not "unavailable": that reads as "not done", and a new key would pay twice.
    assert!(
        reply.text.contains("outcome is unknown") && reply.text.contains("same Idempotency-Key"),
        "{}",
        reply.text
    );
    let again = poll_until("the key to answer with its payment", || async {
        let reply = e.keyed_send(&key, "5").await?;
        Ok((reply.status == 200).then_some(reply))
    })
    .await?;
    let id = submitted_id(&again)?;
    e.wait_for(&id, "CONFIRMED").await?;
    e.assert_paid(1, 5).await?;
    Ok(())
}

async fn a_write_whose_handler_panics_answers_internal_error_and_the_service_goes_on(
    b: Backend,
) -> anyhow::Result<()> {
    // The edge in the same process runs the core's handler in its connection's task: a
    // panic there must still give the caller an answer in the contract's shape.
    let e = Evm::start_with_env(
        b,
        "",
        &[],
        &[("FAILPOINTS", "write-before-run=1*panic(a handler panics)")],
    )
    .await?;
    let reply = e.keyed_send(&uuid::Uuid::new_v4().to_string(), "5").await?;
    reply.assert_error(500, "INTERNAL_ERROR")?;
    let next = e.keyed_send(&uuid::Uuid::new_v4().to_string(), "5").await?;
    assert_eq!(next.status, 200, "{}", next.text);
    e.wait_for(&submitted_id(&next)?, "CONFIRMED").await?;
    e.assert_paid(1, 5).await?;
    Ok(())
}

on_both_backends!(
    one_idempotency_key_gives_one_transaction,
    a_twin_refused_for_the_payment_its_key_made_answers_with_it,
    a_retry_gets_its_answer_even_after_the_wallet_is_withdrawn,
    keys_outlive_their_retention_only_while_their_transaction_is_open,
    a_write_that_timed_out_says_its_outcome_is_unknown_and_its_key_finds_it,
    a_write_whose_handler_panics_answers_internal_error_and_the_service_goes_on,
);
