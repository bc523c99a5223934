//! Transactions that must not land: a transfer over the balance fails preflight (and lands
//! failed without it), an expired blockhash is refused, and a dropped transaction never
//! lands.

use anyhow::Context as _;
use solana_keypair::Keypair;
use solana_message::Message;
use solana_pubkey::Pubkey;
use solana_rpc_client_api::config::{
    CommitmentConfig, RpcSendTransactionConfig, RpcTransactionConfig, UiTransactionEncoding,
};
use solana_signer::Signer;
use solana_transaction::{InstructionError, TransactionError};
use spl_associated_token_account_interface::{
    address::get_associated_token_address_with_program_id,
    instruction::create_associated_token_account_idempotent,
};
use spl_token_2022_interface::instruction::transfer_checked;
use walletops_tests::solana_node::{
    create_mint, drop_transactions, expire_blockhash, mint_to, token_balance,
};

use super::{
    LAMPORTS_PER_SOL, funded, preflight_failure, signed, signed_with, start, system_transfer,
    wait_finalized,
};

#[tokio::test]
async fn transfer_exceeding_the_balance_fails_preflight_with_logs() -> anyhow::Result<()> {
    let (_node, rpc) = start().await?;
    let payer = funded(&rpc, 5 * LAMPORTS_PER_SOL).await?;
    let owner = Keypair::new();
    let recipient = Pubkey::new_unique();
    let mint = create_mint(&rpc, &payer, &spl_token_interface::ID, 2).await?;
    mint_to(&rpc, &payer, &mint, &owner.pubkey(), 100).await?;
    let ata = get_associated_token_address_with_program_id(
        &owner.pubkey(),
        &mint,
        &spl_token_interface::ID,
    );
    let recipient_ata =
        get_associated_token_address_with_program_id(&recipient, &mint, &spl_token_interface::ID);
    let instructions = [
        create_associated_token_account_idempotent(
            &payer.pubkey(),
            &recipient,
            &mint,
            &spl_token_interface::ID,
        ),
        transfer_checked(
            &spl_token_interface::ID,
            &ata,
            &mint,
            &recipient_ata,
            &owner.pubkey(),
            &[],
            101,
            2,
        )?,
    ];
    let payer_before = rpc.get_balance(&payer.pubkey()).await?;
    let tx = signed(&rpc, &instructions, &[&payer, &owner]).await?;

    let err = rpc
        .send_transaction(&tx)
        .await
        .err()
        .context("a transfer over the balance must be refused")?;
    let (code, message, result) =
        preflight_failure(&err).with_context(|| format!("preflight failure expected: {err}"))?;
    assert_eq!(code, -32002);
    assert_eq!(
        message,
        "Transaction simulation failed: Error processing Instruction 1: custom program error: 0x1"
    );
    assert_eq!(
        err.get_transaction_error(),
        Some(TransactionError::InstructionError(
            1,
            InstructionError::Custom(1)
        ))
    );
    let logs = result.logs.as_ref().context("logs")?;
    assert!(
        logs.iter().any(|line| line.contains("insufficient funds")),
        "{logs:?}"
    );

    // Nothing moved and nothing was recorded.
    let statuses = rpc.get_signature_statuses(&[tx.signatures[0]]).await?.value;
    assert_eq!(statuses, vec![None]);
    assert_eq!(token_balance(&rpc, &owner.pubkey(), &mint).await?, 100);
    assert_eq!(rpc.get_balance(&payer.pubkey()).await?, payer_before);

    // Without preflight the transaction lands as failed, charged its fee, like on the
    // real cluster.
    let signature = rpc
        .send_transaction_with_config(
            &tx,
            RpcSendTransactionConfig {
                skip_preflight: true,
                ..RpcSendTransactionConfig::default()
            },
        )
        .await?;
    assert_eq!(
        wait_finalized(&rpc, &signature).await?,
        Some(TransactionError::InstructionError(
            1,
            InstructionError::Custom(1)
        ))
    );
    assert_eq!(token_balance(&rpc, &owner.pubkey(), &mint).await?, 100);
    assert_eq!(token_balance(&rpc, &recipient, &mint).await?, 0);
    assert_eq!(
        rpc.get_balance(&payer.pubkey()).await?,
        payer_before - 2 * 5000
    );
    let landed = rpc
        .get_transaction_with_config(
            &signature,
            RpcTransactionConfig {
                encoding: Some(UiTransactionEncoding::Base64),
                commitment: Some(CommitmentConfig::confirmed()),
                max_supported_transaction_version: Some(0),
            },
        )
        .await?;
    let meta = landed.transaction.meta.context("meta")?;
    assert!(meta.err.is_some());
    let decoded = landed
        .transaction
        .transaction
        .decode()
        .context("base64 transaction decodes")?;
    assert_eq!(decoded.signatures[0], signature);
    Ok(())
}

#[tokio::test]
async fn expired_blockhash_is_rejected() -> anyhow::Result<()> {
    let (_node, rpc) = start().await?;
    let payer = funded(&rpc, LAMPORTS_PER_SOL).await?;
    let recipient = Pubkey::new_unique();
    let (old, old_last_valid) = rpc
        .get_latest_blockhash_with_commitment(CommitmentConfig::finalized())
        .await?;
    assert!(
        rpc.is_blockhash_valid(&old, CommitmentConfig::processed())
            .await?
    );
    let payer_before = rpc.get_balance(&payer.pubkey()).await?;

    expire_blockhash(&rpc).await?;

    assert!(
        !rpc.is_blockhash_valid(&old, CommitmentConfig::processed())
            .await?
    );
    assert!(rpc.get_block_height().await? > old_last_valid);
    let tx = signed_with(
        &[system_transfer(&payer.pubkey(), &recipient, 1_000_000)],
        &[&payer],
        old,
    );
    let err = rpc
        .send_transaction(&tx)
        .await
        .err()
        .context("a transaction over an expired blockhash must be refused")?;
    let (code, message, result) =
        preflight_failure(&err).with_context(|| format!("preflight failure expected: {err}"))?;
    assert_eq!(code, -32002);
    assert_eq!(
        message,
        "Transaction simulation failed: Blockhash not found"
    );
    assert_eq!(
        result.err.clone().map(TransactionError::from),
        Some(TransactionError::BlockhashNotFound)
    );
    // The fee estimate has no answer for an expired blockhash either.
    let message = Message::new_with_blockhash(
        &[system_transfer(&payer.pubkey(), &recipient, 1)],
        Some(&payer.pubkey()),
        &old,
    );
    assert!(rpc.get_fee_for_message(&message).await.is_err());

    // The new blockhash works.
    let new = rpc.get_latest_blockhash().await?;
    assert_ne!(new, old);
    let tx = signed_with(
        &[system_transfer(&payer.pubkey(), &recipient, 1_000_000)],
        &[&payer],
        new,
    );
    rpc.send_and_confirm_transaction(&tx).await?;
    assert_eq!(rpc.get_balance(&recipient).await?, 1_000_000);
    assert_eq!(
        rpc.get_balance(&payer.pubkey()).await?,
        payer_before - 1_000_000 - 5000
    );
    Ok(())
}

#[tokio::test]
async fn dropped_transaction_never_lands() -> anyhow::Result<()> {
    let (_node, rpc) = start().await?;
    let payer = funded(&rpc, LAMPORTS_PER_SOL).await?;
    let recipient = Pubkey::new_unique();
    let payer_before = rpc.get_balance(&payer.pubkey()).await?;

    drop_transactions(&rpc, 1).await?;
    let lost = signed(
        &rpc,
        &[system_transfer(&payer.pubkey(), &recipient, 1_000_000)],
        &[&payer],
    )
    .await?;
    // Accepted as if sent...
    let lost_signature = rpc.send_transaction(&lost).await?;
    assert_eq!(lost_signature, lost.signatures[0]);

    // ...but only the next transaction lands: once it has, the lost one would have too.
    let next = signed(
        &rpc,
        &[system_transfer(&payer.pubkey(), &recipient, 2_000_000)],
        &[&payer],
    )
    .await?;
    let next_signature = rpc.send_transaction(&next).await?;
    assert_eq!(wait_finalized(&rpc, &next_signature).await?, None);

    let statuses = rpc
        .get_signature_statuses_with_history(&[lost_signature])
        .await?
        .value;
    assert_eq!(statuses, vec![None]);
    assert!(
        rpc.get_transaction(&lost_signature, UiTransactionEncoding::Json)
            .await
            .is_err(),
        "a lost transaction has no record"
    );
    assert_eq!(rpc.get_balance(&recipient).await?, 2_000_000);
    assert_eq!(
        rpc.get_balance(&payer.pubkey()).await?,
        payer_before - 2_000_000 - 5000
    );
    Ok(())
}
