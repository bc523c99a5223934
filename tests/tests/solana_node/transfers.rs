//! SOL transfers: airdrops and transfers land with exactly their amounts and fees,
//! signature statuses, and simulations that change nothing.

use anyhow::{Context as _, bail};
use solana_keypair::Keypair;
use solana_message::Message;
use solana_pubkey::Pubkey;
use solana_rpc_client_api::config::{
    CommitmentConfig, RpcSendTransactionConfig, UiTransactionEncoding,
};
use solana_signature::Signature;
use solana_signer::Signer;
use solana_transaction_status_client_types::{
    EncodedTransaction, TransactionConfirmationStatus, UiMessage,
};

use super::{
    LAMPORTS_PER_SOL, funded, signed, signed_with, start, system_transfer, wait_finalized,
};

#[tokio::test]
async fn airdrop_then_balance() -> anyhow::Result<()> {
    let (_node, rpc) = start().await?;
    let keypair = Keypair::new();
    assert_eq!(rpc.get_balance(&keypair.pubkey()).await?, 0);

    let signature = rpc
        .request_airdrop(&keypair.pubkey(), 2 * LAMPORTS_PER_SOL)
        .await?;
    assert_eq!(wait_finalized(&rpc, &signature).await?, None);
    assert_eq!(
        rpc.get_balance(&keypair.pubkey()).await?,
        2 * LAMPORTS_PER_SOL
    );

    // The airdrop is a real transfer that landed in a block.
    let landed = rpc
        .get_transaction(&signature, UiTransactionEncoding::Json)
        .await?;
    let EncodedTransaction::Json(tx) = &landed.transaction.transaction else {
        bail!(
            "json encoding expected, got {:?}",
            landed.transaction.transaction
        );
    };
    assert_eq!(tx.signatures, vec![signature.to_string()]);
    let UiMessage::Raw(message) = &tx.message else {
        bail!("raw message expected");
    };
    assert!(message.account_keys.contains(&keypair.pubkey().to_string()));
    let meta = landed.transaction.meta.context("meta")?;
    assert_eq!(meta.err, None);
    assert!(meta.fee > 0);

    let account = rpc.get_account(&keypair.pubkey()).await?;
    assert_eq!(account.lamports, 2 * LAMPORTS_PER_SOL);
    assert_eq!(account.owner, solana_system_interface::program::ID);
    Ok(())
}

#[tokio::test]
async fn sol_transfer_moves_exactly_the_amount() -> anyhow::Result<()> {
    let (_node, rpc) = start().await?;
    let payer = funded(&rpc, 5 * LAMPORTS_PER_SOL).await?;
    let recipient = Pubkey::new_unique();
    let amount = 1_234_567_890;
    let payer_before = rpc.get_balance(&payer.pubkey()).await?;

    let instructions = [system_transfer(&payer.pubkey(), &recipient, amount)];
    let blockhash = rpc.get_latest_blockhash().await?;
    let message = Message::new_with_blockhash(&instructions, Some(&payer.pubkey()), &blockhash);
    let fee = rpc.get_fee_for_message(&message).await?;
    assert_eq!(fee, 5000, "one signature at 5000 lamports");

    let tx = signed_with(&instructions, &[&payer], blockhash);
    let signature = rpc.send_and_confirm_transaction(&tx).await?;

    assert_eq!(rpc.get_balance(&recipient).await?, amount);
    assert_eq!(
        rpc.get_balance(&payer.pubkey()).await?,
        payer_before - amount - fee
    );
    let landed = rpc
        .get_transaction(&signature, UiTransactionEncoding::Json)
        .await?;
    let meta = landed.transaction.meta.context("meta")?;
    assert_eq!(meta.fee, fee);
    assert_eq!(meta.pre_balances[0], payer_before);
    assert_eq!(meta.post_balances[0], payer_before - amount - fee);

    // The node's legacy default encoding, base58, is accepted too.
    let tx = signed(
        &rpc,
        &[system_transfer(&payer.pubkey(), &recipient, 1)],
        &[&payer],
    )
    .await?;
    let signature = rpc
        .send_transaction_with_config(
            &tx,
            RpcSendTransactionConfig {
                encoding: Some(UiTransactionEncoding::Base58),
                ..RpcSendTransactionConfig::default()
            },
        )
        .await?;
    assert_eq!(wait_finalized(&rpc, &signature).await?, None);
    assert_eq!(rpc.get_balance(&recipient).await?, amount + 1);
    Ok(())
}

#[tokio::test]
async fn signature_statuses_report_finalized_and_unknown() -> anyhow::Result<()> {
    let (_node, rpc) = start().await?;
    let payer = funded(&rpc, LAMPORTS_PER_SOL).await?;
    let tx = signed(
        &rpc,
        &[system_transfer(
            &payer.pubkey(),
            &Pubkey::new_unique(),
            1_000_000,
        )],
        &[&payer],
    )
    .await?;
    let signature = rpc.send_and_confirm_transaction(&tx).await?;
    let unknown = Signature::from([7u8; 64]);

    let statuses = rpc
        .get_signature_statuses(&[signature, unknown])
        .await?
        .value;
    assert_eq!(statuses.len(), 2);
    let status = statuses[0]
        .as_ref()
        .context("processed signature has a status")?;
    assert_eq!(
        status.confirmation_status,
        Some(TransactionConfirmationStatus::Finalized)
    );
    assert_eq!(status.confirmations, None);
    assert_eq!(status.err, None);
    assert_eq!(status.status, Ok(()));
    assert!(statuses[1].is_none());

    let with_history = rpc
        .get_signature_statuses_with_history(&[signature])
        .await?
        .value;
    assert_eq!(with_history[0].as_ref().map(|s| s.slot), Some(status.slot));
    Ok(())
}

#[tokio::test]
async fn simulation_and_multiple_accounts() -> anyhow::Result<()> {
    let (_node, rpc) = start().await?;
    let payer = funded(&rpc, LAMPORTS_PER_SOL).await?;
    let recipient = Pubkey::new_unique();
    let tx = signed(
        &rpc,
        &[system_transfer(&payer.pubkey(), &recipient, 3_000_000)],
        &[&payer],
    )
    .await?;
    let simulated = rpc.simulate_transaction(&tx).await?.value;
    assert_eq!(simulated.err, None);
    assert!(
        simulated
            .logs
            .as_ref()
            .is_some_and(|logs| logs.iter().any(|l| l.contains("success"))),
        "{simulated:?}"
    );
    // A simulation changes nothing.
    assert_eq!(rpc.get_balance(&recipient).await?, 0);

    let accounts = rpc
        .get_multiple_accounts(&[payer.pubkey(), recipient])
        .await?;
    assert_eq!(accounts.len(), 2);
    assert_eq!(
        accounts[0].as_ref().map(|a| a.lamports),
        Some(LAMPORTS_PER_SOL)
    );
    assert!(accounts[1].is_none());
    let missing = rpc
        .get_account_with_commitment(&recipient, CommitmentConfig::confirmed())
        .await?;
    assert!(missing.value.is_none());
    assert!(rpc.get_account(&recipient).await.is_err());
    Ok(())
}
