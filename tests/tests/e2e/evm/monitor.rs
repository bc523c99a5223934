//! The monitor's following of a sent transaction: a transaction the node lost is sent
//! again, and a record waits for its confirmations and follows a reorganisation.

use alloy::{
    primitives::{Address, U256},
    providers::Provider as _,
};
use anyhow::Context as _;
use serde_json::Value;
use walletops_tests::{Backend, on_both_backends, poll_until};

use super::{Evm, RECIPIENT, monitor_toml};

async fn lost_transactions_are_rebroadcast(b: Backend) -> anyhow::Result<()> {
    let e = Evm::unmined(b, 3600).await?;
    let (id, hash) = e.send_native(RECIPIENT, "5").await?;
    assert_eq!(e.anvil.pool_hashes().await?, std::slice::from_ref(&hash));
    e.anvil.drop_transaction(&hash).await?;
    assert!(e.anvil.pool_hashes().await?.is_empty());
    e.wait_for_pool("the monitor to send the same bytes again", &[&hash])
        .await?;
    e.anvil.mine().await?;
    let tx = e.wait_for(&id, "CONFIRMED").await?;
    assert_eq!(tx["hash"], hash);
    assert_eq!(e.anvil.nonce(e.wallet).await?, 1);
    Ok(())
}

/// The history notes of record `tx` that say it waits in a block for its confirmations.
fn waiting_notes(tx: &Value) -> Vec<String> {
    tx["statusHistory"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["note"].as_str())
        .filter(|n| n.contains("waiting for 3 confirmations"))
        .map(str::to_owned)
        .collect()
}

async fn records_wait_for_their_confirmations_and_follow_a_reorg(b: Backend) -> anyhow::Result<()> {
    let e = Evm::start_with_env(
        b,
        &monitor_toml(3600),
        &[],
        &[("WALLETOPS_CHAINS__ANVIL__CONFIRMATIONS", "3")],
    )
    .await?;
    let recipient: Address = "0x3333333333333333333333333333333333333333".parse()?;
    let (id, hash) = e.send_native(&recipient.to_string(), "7").await?;
    let receipt = |hash: String| {
        let provider = e.anvil.provider().clone();
        async move { Ok::<_, anyhow::Error>(provider.get_transaction_receipt(hash.parse()?).await?) }
    };
    // Anvil mines it at once: one block deep, the record stays open and says why.
    let first = poll_until("the record to note the block it waits in", || async {
        let tx = e.tx(&id).await?;
        Ok((!waiting_notes(&tx).is_empty()).then_some(tx))
    })
    .await?;
    assert_eq!(first["status"], "SUBMITTED", "{first}");
    let first_block = receipt(hash.clone())
        .await?
        .and_then(|r| r.block_hash)
        .context("a receipt")?;
    assert!(
        waiting_notes(&first)[0].contains(&format!("{first_block:#x}")),
        "{first}"
    );
    // Two deep, then both blocks are replaced by empty ones: the transaction is gone from the
    // node, which the monitor sees at its next sweep.
    e.anvil.mine().await?;
    e.anvil.reorg(2).await?;
    // The monitor sends the same bytes again; mined anew, the record waits in the new block.
    let again = poll_until("the record to wait in another block", || async {
        let tx = e.tx(&id).await?;
        let notes = waiting_notes(&tx);
        Ok(notes
            .last()
            .is_some_and(|n| !n.contains(&format!("{first_block:#x}")))
            .then_some(tx))
    })
    .await?;
    assert_eq!(again["status"], "SUBMITTED", "{again}");
    assert_eq!(again["hash"], hash);
    let block = receipt(hash.clone())
        .await?
        .and_then(|r| r.block_hash)
        .context("a receipt after the reorg")?;
    assert_ne!(block, first_block);
    // Three deep: final.
    e.anvil.mine().await?;
    e.anvil.mine().await?;
    let done = e.wait_for(&id, "CONFIRMED").await?;
    assert_eq!(done["hash"], hash);
    assert!(
        done["statusHistory"]
            .to_string()
            .contains(&format!("{block:#x}")),
        "{done}"
    );
    assert_eq!(e.anvil.balance(recipient).await?, U256::from(7u64));
    assert_eq!(e.anvil.nonce(e.wallet).await?, 1);
    Ok(())
}

on_both_backends!(
    lost_transactions_are_rebroadcast,
    records_wait_for_their_confirmations_and_follow_a_reorg,
);
