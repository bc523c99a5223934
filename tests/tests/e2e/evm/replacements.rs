//! Stuck transactions: replaced with a higher fee once their stuck time has passed, raised at
//! most once while outbid or refused, held at the fee cap, and left to mine when a
//! replacement is refused or the wallet is no longer delegated.

use alloy::{consensus::Transaction as _, primitives::U256, providers::Provider as _};
use anyhow::Context as _;
use walletops_tests::{Backend, on_both_backends, poll_until, webhooks::Receiver};

use super::{ETH, Evm, RECIPIENT, monitor_toml};

async fn a_transaction_the_node_keeps_losing_is_replaced_in_time(b: Backend) -> anyhow::Result<()> {
    let e = Evm::unmined(b, 2).await?;
    let (id, first) = e.send_native(RECIPIENT, "5").await?;
    // The node keeps dropping it (as a pool evicts a transaction priced under its others):
    // the monitor sends the same bytes again each time, but the stuck time runs from the
    // first send, so it is replaced with a higher fee all the same.
    let replaced = poll_until(
        "a replacement of the version the node keeps losing",
        || async {
            let tx = e.tx(&id).await?;
            if tx["hash"] != first.as_str() {
                return Ok(Some(tx));
            }
            if e.anvil.pool_hashes().await?.contains(&first) {
                e.anvil.drop_transaction(&first).await?;
            }
            Ok(None)
        },
    )
    .await?;
    assert!(
        replaced["statusHistory"].to_string().contains("replaced"),
        "{replaced}"
    );
    let hash = replaced["hash"].as_str().context("a hash")?.to_owned();
    e.wait_in_pool("the replacement in the node's pool", &hash)
        .await?;
    e.anvil.mine().await?;
    let tx = e.wait_for(&id, "CONFIRMED").await?;
    assert_eq!(tx["hash"], hash);
    e.assert_paid(1, 5).await?;
    Ok(())
}

async fn a_transaction_outbid_at_its_nonce_is_raised_once_a_stuck_time(
    b: Backend,
) -> anyhow::Result<()> {
    let e = Evm::unmined(b, 3600).await?;
    let (id, ours) = e.send_native(RECIPIENT, "5").await?;
    // The owner's own transaction at nonce 0, priced far higher, takes ours' place in the
    // pool; every send of ours is then refused as underpriced.
    e.owner_takes_nonce(0).await?;
    // One raise, then the record waits for the stuck time instead of outbidding the owner
    // sweep after sweep up to the cap.
    let waiting = e.wait_for_note(&id, "raised again").await?;
    let raises = waiting["statusHistory"]
        .to_string()
        .matches("replaced")
        .count();
    assert!(raises <= 1, "{waiting}");
    // The owner's transaction mined, ours is re-signed at the next nonce and mined once.
    e.anvil.mine().await?;
    let resigned = e.wait_for_note(&id, "re-signed with nonce 1").await?;
    let hash = resigned["hash"].as_str().context("a hash")?.to_owned();
    assert_ne!(hash, ours);
    e.wait_in_pool("the re-signed transaction in the pool", &hash)
        .await?;
    e.anvil.mine().await?;
    e.wait_for(&id, "CONFIRMED").await?;
    e.assert_paid(2, 5).await?;
    Ok(())
}

async fn stuck_transactions_are_replaced_with_a_higher_fee(b: Backend) -> anyhow::Result<()> {
    let e = Evm::unmined(b, 1).await?;
    let (id, first) = e.send_native(RECIPIENT, "5").await?;
    // Read at once: the node forgets the original when the replacement arrives, a second on.
    let first_fee = e
        .anvil
        .provider()
        .get_transaction_by_hash(first.parse()?)
        .await?
        .context("the node holds the first version when its send is answered")?
        .max_fee_per_gas();
    // Wait until the record names a replacement and the node holds it.
    let (replaced, new) = poll_until("a replacement in the node's pool", || async {
        let tx = e.tx(&id).await?;
        let hash = tx["hash"].as_str().unwrap_or_default().to_owned();
        if hash == first {
            return Ok(None);
        }
        let known = e
            .anvil
            .provider()
            .get_transaction_by_hash(hash.parse()?)
            .await?;
        Ok(known.map(|t| (tx, t)))
    })
    .await?;
    assert!(
        replaced["statusHistory"].to_string().contains("replaced"),
        "{replaced}"
    );
    assert_eq!(new.nonce(), 0);
    assert!(
        new.max_fee_per_gas() >= first_fee + first_fee / 10,
        "the replacement pays at least 10 % more: {} after {first_fee}",
        new.max_fee_per_gas()
    );
    assert_eq!(
        e.anvil.pool_hashes().await?.len(),
        1,
        "one transaction per nonce in the pool"
    );
    e.anvil.mine().await?;
    let tx = e.wait_for(&id, "CONFIRMED").await?;
    assert_ne!(tx["hash"], first);
    e.assert_paid(1, 5).await?;
    Ok(())
}

async fn replacements_stop_at_the_fee_cap(b: Backend) -> anyhow::Result<()> {
    let e = Evm::start(
        b,
        "[monitor]\npoll_interval_ms = 100\nstuck_after_secs = 1\nmax_fee_per_gas_gwei = 1\n",
        &["--no-mining"],
    )
    .await?;
    let hook = Receiver::start().await?;
    hook.register(&e.api(), &[]).await?;
    let (id, hash) = e.send_native(RECIPIENT, "5").await?;
    let tx = e.wait_for(&id, "FEE_CAPPED").await?;
    let capped = hook.wait_for_event(&id, "transaction.fee_capped").await?;
    assert_eq!(capped.body["hash"], hash);
    assert!(
        tx["statusHistory"].to_string().contains("above the cap"),
        "{tx}"
    );
    assert_eq!(tx["hash"], hash);
    // Still followed: once mined it is confirmed.
    e.anvil.mine().await?;
    let confirmed = e.wait_for(&id, "CONFIRMED").await?;
    // Its webhooks: submitted, fee-capped, confirmed, in that order.
    assert_eq!(
        hook.wait_for_event(&id, "transaction.confirmed")
            .await?
            .body,
        confirmed
    );
    let order: Vec<String> = hook.taken().iter().map(|d| d.event_type()).collect();
    assert_eq!(
        order,
        [
            "transaction.submitted",
            "transaction.fee_capped",
            "transaction.confirmed"
        ]
    );
    Ok(())
}

async fn a_refused_replacement_leaves_the_original_to_mine(b: Backend) -> anyhow::Result<()> {
    let e = Evm::unmined(b, 1).await?;
    let (id, first) = e.send_native(RECIPIENT, "5").await?;
    let sent = e
        .anvil
        .provider()
        .get_transaction_by_hash(first.parse()?)
        .await?
        .context("the send in the pool")?;
    // Just enough for the original: a replacement, which must pay more per gas, is refused
    // for insufficient funds while the original stays pending.
    let exact =
        U256::from(5u64) + U256::from(sent.gas_limit()) * U256::from(sent.max_fee_per_gas());
    e.anvil.set_balance(e.wallet, exact).await?;
    let tx = poll_until("the refused replacement in the record", || async {
        let tx = e.tx(&id).await?;
        let settled =
            !["SUBMITTED", "FEE_CAPPED"].contains(&tx["status"].as_str().unwrap_or_default());
        let noted = tx["statusHistory"]
            .to_string()
            .contains("refused the replacement");
        Ok((settled || noted).then_some(tx))
    })
    .await?;
    // Failing it would free nonce 0 while the original can still be mined.
    assert_eq!(tx["status"], "SUBMITTED", "{tx}");
    assert_eq!(e.anvil.pool_hashes().await?, std::slice::from_ref(&first));
    e.anvil.mine().await?;
    let tx = e.wait_for(&id, "CONFIRMED").await?;
    assert_eq!(tx["hash"], first.as_str(), "the original was mined");
    e.assert_paid(1, 5).await?;
    // The ledger kept nonce 0 taken: the next send takes nonce 1.
    e.anvil.set_balance(e.wallet, U256::from(ETH)).await?;
    let (_, next) = e.send_native(RECIPIENT, "1").await?;
    let next = e
        .anvil
        .provider()
        .get_transaction_by_hash(next.parse()?)
        .await?
        .context("the next send in the pool")?;
    assert_eq!(next.nonce(), 1);
    Ok(())
}

async fn a_stuck_transaction_of_a_withdrawn_wallet_says_why_it_waits(
    b: Backend,
) -> anyhow::Result<()> {
    let mut e = Evm::unmined(b, 3600).await?;
    let (id, first) = e.send_native(RECIPIENT, "5").await?;
    let wallet = e.wallet.to_string();
    e.svc.delegate(&wallet, false).await?;
    // Only now is the transaction due for a replacement: the service comes back with a
    // short stuck time.
    e.svc.kill().await?;
    e.svc
        .relaunch(e.anvil.service_options(&monitor_toml(1), &[]))
        .await?;
    let tx = e
        .wait_for_note(&id, "no longer delegated to the server signer")
        .await?;
    assert_eq!(tx["status"], "SUBMITTED", "{tx}");
    assert_eq!(tx["hash"], first.as_str(), "nothing was signed: {tx}");
    assert_eq!(e.anvil.pool_hashes().await?, std::slice::from_ref(&first));
    // Delegated again, the replacement goes out and is mined.
    e.svc.delegate(&wallet, true).await?;
    let replacement = poll_until("the replacement", || async {
        let tx = e.tx(&id).await?;
        Ok((tx["hash"] != first.as_str()).then(|| tx["hash"].as_str().map(str::to_owned)))
    })
    .await?
    .context("a hash")?;
    // Stored before it is sent: mined only once the node holds it.
    e.wait_in_pool("the replacement in the node's pool", &replacement)
        .await?;
    e.anvil.mine().await?;
    let tx = e.wait_for(&id, "CONFIRMED").await?;
    assert_ne!(tx["hash"], first.as_str());
    assert_eq!(e.anvil.balance(RECIPIENT.parse()?).await?, U256::from(5u64));
    Ok(())
}

on_both_backends!(
    a_transaction_the_node_keeps_losing_is_replaced_in_time,
    a_transaction_outbid_at_its_nonce_is_raised_once_a_stuck_time,
    stuck_transactions_are_replaced_with_a_higher_fee,
    replacements_stop_at_the_fee_cap,
    a_refused_replacement_leaves_the_original_to_mine,
    a_stuck_transaction_of_a_withdrawn_wallet_says_why_it_waits,
);
