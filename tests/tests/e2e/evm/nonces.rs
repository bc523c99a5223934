//! Nonces: concurrent sends mine with contiguous nonces, nonces spent outside the service
//! do not jam the next send, and a nonce left unused below the ledger is filled.

use alloy::{consensus::Transaction as _, primitives::U256, providers::Provider as _};
use anyhow::Context as _;
use serde_json::{Value, json};
use walletops_tests::{
    Backend,
    anvil::MIXED_MINING,
    gateway::Sends,
    metrics::{scrape_text, sum},
    on_both_backends, poll_until,
};

use super::{ETH, Evm, RECIPIENT, assert_never_re_signed, monitor_toml, submitted_id};

async fn concurrent_sends_mine_with_contiguous_nonces(b: Backend) -> anyhow::Result<()> {
    // Even with mixed mining, anvil now and then keeps a transaction whose nonce reached its
    // pool out of order in its queue for good (foundry-rs/foundry#10122). The monitor's
    // replacement of a stuck transaction is what then gets it mined, so the replacement
    // comes after 3 s here instead of a minute, and the chain is checked against each
    // record's final hash.
    let e = Evm::start_with_env(
        b,
        "[monitor]\npoll_interval_ms = 200\nstuck_after_secs = 3\n",
        MIXED_MINING,
        &[("WALLETOPS_METRICS_ADDR", "127.0.0.1:0")],
    )
    .await?;
    let api = e.api();
    let replies = futures::future::join_all((0..100).map(|i| {
        let api = api.clone();
        async move {
            api.post(
                "/send",
                &json!({"chain": "anvil", "to": "0x1111111111111111111111111111111111111111",
                        "asset": "native", "amount": (1000 + i).to_string()}),
            )
            .await
        }
    }))
    .await;
    let mut ids = Vec::new();
    for reply in replies {
        ids.push(submitted_id(&reply?)?);
    }
    let mut nonces = Vec::new();
    for id in &ids {
        let record = e.wait_for(id, "CONFIRMED").await?;
        let hash = record["hash"]
            .as_str()
            .expect("a confirmed record has a hash");
        let tx = e
            .anvil
            .provider()
            .get_transaction_by_hash(hash.parse()?)
            .await?
            .expect("every confirmed hash is on chain");
        assert!(tx.block_number.is_some(), "{hash} is mined");
        nonces.push(tx.nonce());
    }
    nonces.sort_unstable();
    assert_eq!(nonces, (0..100).collect::<Vec<u64>>());
    // The sends raced for the wallet's nonces: some were signed together in one batch.
    let url = e.svc.metrics_url.clone().context("a metrics listener")?;
    let text = scrape_text(&url).await?;
    let batches = sum(&text, "walletops_signing_batch_size_count", None);
    let sends = sum(&text, "walletops_signing_batch_size_sum", None);
    assert!(
        sends > batches,
        "{sends} sends in {batches} batches: none waited for another"
    );
    assert_eq!(e.anvil.nonce(e.wallet).await?, 100);
    Ok(())
}

async fn sends_outside_the_service_do_not_jam_the_next(b: Backend) -> anyhow::Result<()> {
    let e = Evm::start(b, "", &[]).await?;
    let to = "0x1111111111111111111111111111111111111111";
    let (first, _) = e.send_native(to, "1").await?;
    e.wait_for(&first, "CONFIRMED").await?;
    // Two transactions from the same wallet outside the service.
    e.anvil
        .rpc("anvil_impersonateAccount", json!([e.wallet]))
        .await?;
    for _ in 0..2 {
        e.anvil
            .send_as(
                e.wallet,
                Some(to.parse()?),
                Default::default(),
                U256::from(1u64),
            )
            .await?;
    }
    assert_eq!(e.anvil.nonce(e.wallet).await?, 3);
    let (next, _) = e.send_native(to, "2").await?;
    let tx = e.wait_for(&next, "CONFIRMED").await?;
    assert_eq!(e.anvil.nonce(e.wallet).await?, 4);
    let notes = tx["statusHistory"].to_string();
    assert!(notes.contains("re-signed with nonce 3"), "{notes}");
    Ok(())
}

async fn a_nonce_taken_outside_is_re_signed_only_once_that_block_is_deep(
    b: Backend,
) -> anyhow::Result<()> {
    let e = Evm::behind_gateway(
        b,
        &monitor_toml(3600),
        &["--no-mining"],
        &[("WALLETOPS_CHAINS__ANVIL__CONFIRMATIONS", "3")],
    )
    .await?;
    // Stored with nonce 0, but the gateway keeps it from the node.
    e.gateway()?.set(Sends::Fail);
    let (id, ours) = e.send_native(RECIPIENT, "5").await?;
    // The owner spends nonce 0 outside the service, and it is mined.
    e.anvil
        .rpc("anvil_impersonateAccount", json!([e.wallet]))
        .await?;
    e.anvil
        .rpc(
            "eth_sendTransaction",
            json!([{"from": e.wallet, "to": "0x2222222222222222222222222222222222222222", "value": "0x1"}]),
        )
        .await?;
    e.anvil.mine().await?;
    assert_eq!(e.anvil.nonce(e.wallet).await?, 1);
    // One block deep, that block could still be reorganised away and ours mined instead:
    // no new nonce yet, and the record says why it waits.
    e.gateway()?.set(Sends::PassOn);
    let waiting = e.wait_for_note(&id, "blocks deep").await?;
    assert_eq!(waiting["hash"], ours.as_str(), "{waiting}");
    assert!(e.anvil.pool_hashes().await?.is_empty());
    // Three deep, it is re-signed with the next nonce and mined.
    e.anvil.mine().await?;
    e.anvil.mine().await?;
    let resigned = poll_until("the record to be re-signed", || async {
        let tx = e.tx(&id).await?;
        Ok((tx["hash"] != ours.as_str()).then_some(tx))
    })
    .await?;
    assert!(
        resigned["statusHistory"]
            .to_string()
            .contains("re-signed with nonce 1"),
        "{resigned}"
    );
    let hash = resigned["hash"].as_str().context("a hash")?.to_owned();
    e.wait_in_pool("the re-signed transaction in the pool", &hash)
        .await?;
    e.anvil.mine().await?;
    e.anvil.mine().await?;
    e.anvil.mine().await?;
    e.wait_for(&id, "CONFIRMED").await?;
    e.assert_paid(2, 5).await?;
    Ok(())
}

async fn a_nonce_held_only_in_a_pool_is_not_skipped(b: Backend) -> anyhow::Result<()> {
    let e = Evm::unmined(b, 3600).await?;
    let (first, _) = e.send_native(RECIPIENT, "1").await?;
    e.anvil.mine().await?;
    e.wait_for(&first, "CONFIRMED").await?;
    // The owner's transaction at nonce 1 waits in the pool, priced far over ours: the
    // first send of ours, at nonce 1 by the ledger, is refused as underpriced.
    e.owner_takes_nonce(1).await?;
    let owners = e.anvil.pool_hashes().await?;
    assert_eq!(owners.len(), 1);
    let (id, _) = e.send_native(RECIPIENT, "5").await?;
    // Nonce 1 is only pooled, not mined: a new nonce would strand ours and every later
    // send behind a gap if the owner's transaction never is. The monitor has met the
    // refusal (its note) and kept the nonce.
    let tx = e.wait_for_note(&id, "the node refused it").await?;
    assert_never_re_signed(&tx);
    // It never is: it leaves the pool, and ours takes nonce 1.
    e.anvil.drop_transaction(&owners[0]).await?;
    poll_until("ours in the pool", || async {
        let pool = e.anvil.pool_hashes().await?;
        Ok((pool.len() == 1 && pool != owners).then_some(()))
    })
    .await?;
    e.anvil.mine().await?;
    let tx = e.wait_for(&id, "CONFIRMED").await?;
    assert_never_re_signed(&tx);
    e.assert_paid(2, 6).await?;
    Ok(())
}

async fn a_gap_below_the_ledger_is_filled(b: Backend) -> anyhow::Result<()> {
    let e = Evm::unmined(b, 1).await?;
    // The owner's transaction at nonce 0 is in the pool when the service first sends from
    // the wallet: the ledger starts at the chain's pending nonce, past it.
    e.owner_takes_nonce(0).await?;
    let owners = e.anvil.pool_hashes().await?;
    assert_eq!(owners.len(), 1);
    let (id, _) = e.send_native(RECIPIENT, "5").await?;
    // It leaves the pool unmined: ours waits behind a nonce nothing holds, which a higher
    // fee does not help. The gap is filled, and ours is mined after it.
    e.anvil.drop_transaction(&owners[0]).await?;
    poll_until("a filler for the gap", || async {
        let fills = e.svc.stored_histories("nonce_fill").await?;
        Ok((fills.len() == 1 && fills[0].contains("a gap below")).then_some(()))
    })
    .await?;
    e.wait_for_pool_size("the filler and ours pending", 2)
        .await?;
    e.anvil.mine().await?;
    e.wait_for(&id, "CONFIRMED").await?;
    e.assert_paid(2, 5).await?;
    e.svc
        .wait_for_stored_statuses("nonce_fill", &["confirmed"])
        .await?;
    Ok(())
}

async fn dropped_transactions_get_their_nonce_filled(b: Backend) -> anyhow::Result<()> {
    let e = Evm::unmined(b, 3600).await?;
    let (dropped, small) = strand_a_nonce(&e).await?;
    assert!(
        dropped["error"]
            .as_str()
            .unwrap_or_default()
            .to_lowercase()
            .contains("insufficient funds"),
        "{dropped}"
    );
    e.anvil.mine().await?;
    e.wait_for(&small, "CONFIRMED").await?;
    assert_eq!(
        e.anvil.nonce(e.wallet).await?,
        2,
        "nonce 0 was filled, nonce 1 mined"
    );
    assert_eq!(
        e.anvil.balance(FILLED_TO.parse()?).await?,
        U256::from(1u64),
        "only the small send moved value"
    );
    Ok(())
}

async fn a_filler_whose_nonce_another_transaction_took_is_dropped(
    b: Backend,
) -> anyhow::Result<()> {
    let e = Evm::unmined(b, 3600).await?;
    let (_, small) = strand_a_nonce(&e).await?;
    // The owner fills nonce 0 first, from outside the service, outbidding the filler.
    e.owner_takes_nonce(0).await?;
    e.anvil.mine().await?;
    e.wait_for(&small, "CONFIRMED").await?;
    // The filler is not needed any more: dropped, not signed again at a new nonce.
    e.svc
        .wait_for_stored_statuses("nonce_fill", &["dropped"])
        .await?;
    e.anvil.mine().await?;
    assert_eq!(e.anvil.nonce(e.wallet).await?, 2, "no third transaction");
    assert!(e.anvil.pool_hashes().await?.is_empty());
    Ok(())
}

async fn a_refused_filler_is_raised_once_a_stuck_time(b: Backend) -> anyhow::Result<()> {
    let e = Evm::behind_gateway(b, &monitor_toml(3600), &["--no-mining"], &[]).await?;
    let (_, small) = strand_a_nonce(&e).await?;
    let small_hash = e.tx(&small).await?["hash"]
        .as_str()
        .context("a hash")?
        .to_owned();
    // The node loses the filler and refuses every send of it, in words that say nothing
    // of its fee: it is raised once, then waits a stuck time, instead of climbing to the cap
    // a raise a sweep.
    e.gateway()?.set(Sends::Refuse);
    for hash in e.anvil.pool_hashes().await? {
        if hash != small_hash {
            e.anvil.drop_transaction(&hash).await?;
        }
    }
    let history = poll_until("the filler to wait for its next raise", || async {
        let histories = e.svc.stored_histories("nonce_fill").await?;
        Ok(histories
            .into_iter()
            .find(|h| h.contains("raised in fee at most once")))
    })
    .await?;
    assert!(history.matches("replaced").count() <= 1, "{history}");
    assert_eq!(e.svc.stored_statuses("nonce_fill").await?, ["submitted"]);
    // Once the node takes it, it fills nonce 0 and the wallet's next send is mined.
    e.gateway()?.set(Sends::PassOn);
    e.wait_for_pool_size("the filler back in the pool", 2)
        .await?;
    e.anvil.mine().await?;
    e.wait_for(&small, "CONFIRMED").await?;
    assert_eq!(e.anvil.nonce(e.wallet).await?, 2);
    Ok(())
}

/// Over a node that does not mine: sends 1 ETH and then 1 wei to `FILLED_TO` from `e`'s
/// wallet, loses the first from the pool and leaves the wallet unable to pay for it, so that
/// its nonce 0 would strand the second one forever. Returns the first record once DROPPED
/// and the second one's id, with a filler for nonce 0 and the second send in the pool.
async fn strand_a_nonce(e: &Evm) -> anyhow::Result<(Value, String)> {
    let (big, big_hash) = e.send_native(FILLED_TO, &ETH.to_string()).await?;
    let (small, _) = e.send_native(FILLED_TO, "1").await?;
    e.anvil.set_balance(e.wallet, U256::from(ETH / 100)).await?;
    e.anvil.drop_transaction(&big_hash).await?;
    let dropped = e.wait_for(&big, "DROPPED").await?;
    e.wait_for_pool_size("a filler for nonce 0 and the second send in the pool", 2)
        .await?;
    Ok((dropped, small))
}

/// Where `strand_a_nonce` sends.
const FILLED_TO: &str = "0x1111111111111111111111111111111111111111";

on_both_backends!(
    concurrent_sends_mine_with_contiguous_nonces,
    sends_outside_the_service_do_not_jam_the_next,
    a_nonce_taken_outside_is_re_signed_only_once_that_block_is_deep,
    a_nonce_held_only_in_a_pool_is_not_skipped,
    a_gap_below_the_ledger_is_filled,
    dropped_transactions_get_their_nonce_filled,
    a_filler_whose_nonce_another_transaction_took_is_dropped,
    a_refused_filler_is_raised_once_a_stuck_time,
);
