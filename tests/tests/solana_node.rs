//! The Solana test node, exercised only through the real nonblocking `RpcClient` (and the
//! node binary through its command line).

use std::{process::Stdio, str::FromStr, time::Duration};

use anyhow::{Context, bail};
use solana_account_decoder::{UiAccountData, UiAccountEncoding};
use solana_hash::Hash;
use solana_keypair::Keypair;
use solana_message::Message;
use solana_pubkey::Pubkey;
use solana_rpc_client::nonblocking::rpc_client::RpcClient;
use solana_rpc_client_api::{
    client_error::{Error as ClientError, ErrorKind},
    config::{
        CommitmentConfig, RpcAccountInfoConfig, RpcSendTransactionConfig, RpcTransactionConfig,
        UiTransactionEncoding,
    },
    request::{RpcError, RpcResponseErrorData, TokenAccountsFilter},
    response::RpcSimulateTransactionResult,
};
use solana_signature::Signature;
use solana_signer::Signer;
use solana_transaction::{Instruction, InstructionError, Transaction, TransactionError};
use solana_transaction_status_client_types::{
    EncodedTransaction, TransactionConfirmationStatus, UiMessage,
};
use spl_associated_token_account_interface::{
    address::get_associated_token_address_with_program_id,
    instruction::create_associated_token_account_idempotent,
};
use spl_token_2022_interface::instruction::transfer_checked;
use tokio::io::{AsyncBufReadExt, BufReader};
use walletops_tests::{
    WAIT_TIMEOUT,
    solana_node::{
        LOCAL_GENESIS_HASH, SolanaNode, create_mint, drop_transactions, expire_blockhash, mint_to,
        token_balance,
    },
};

const LAMPORTS_PER_SOL: u64 = 1_000_000_000;

/// A fresh node on a random loopback port and a client for it.
async fn start() -> anyhow::Result<(SolanaNode, RpcClient)> {
    let node = SolanaNode::start("127.0.0.1:0".parse()?).await?;
    let rpc = RpcClient::new(node.url());
    Ok((node, rpc))
}

/// Polls `check` until it yields a value, failing after `WAIT_TIMEOUT` with `what`.
async fn wait_for<T, F, Fut>(what: &str, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = tokio::time::Instant::now() + WAIT_TIMEOUT;
    let mut poll = tokio::time::interval(Duration::from_millis(20));
    loop {
        poll.tick().await;
        if let Some(value) = check().await? {
            return Ok(value);
        }
        if tokio::time::Instant::now() > deadline {
            bail!("timed out waiting for {what}");
        }
    }
}

/// Waits until `signature` is finalized and returns its error, if it failed.
async fn wait_finalized(
    rpc: &RpcClient,
    signature: &Signature,
) -> anyhow::Result<Option<TransactionError>> {
    wait_for(&format!("{signature} to be finalized"), || async {
        let statuses = rpc.get_signature_statuses(&[*signature]).await?.value;
        Ok(statuses
            .into_iter()
            .flatten()
            .find(|status| {
                status.confirmation_status == Some(TransactionConfirmationStatus::Finalized)
            })
            .map(|status| status.err))
    })
    .await
}

/// A new keypair holding `lamports`, funded through `requestAirdrop`.
async fn funded(rpc: &RpcClient, lamports: u64) -> anyhow::Result<Keypair> {
    let keypair = Keypair::new();
    let signature = rpc.request_airdrop(&keypair.pubkey(), lamports).await?;
    if let Some(err) = wait_finalized(rpc, &signature).await? {
        bail!("airdrop failed: {err}");
    }
    Ok(keypair)
}

/// Signs `instructions` over the latest blockhash, the first signer paying.
async fn signed(
    rpc: &RpcClient,
    instructions: &[Instruction],
    signers: &[&Keypair],
) -> anyhow::Result<Transaction> {
    let blockhash = rpc.get_latest_blockhash().await?;
    Ok(signed_with(instructions, signers, blockhash))
}

fn signed_with(instructions: &[Instruction], signers: &[&Keypair], blockhash: Hash) -> Transaction {
    Transaction::new_signed_with_payer(instructions, Some(&signers[0].pubkey()), signers, blockhash)
}

/// The preflight failure carried by a `sendTransaction` error.
fn preflight_failure(err: &ClientError) -> Option<(i64, &str, &RpcSimulateTransactionResult)> {
    match err.kind() {
        ErrorKind::RpcError(RpcError::RpcResponseError {
            code,
            message,
            data: RpcResponseErrorData::SendTransactionPreflightFailure(result),
        }) => Some((*code, message.as_str(), result)),
        _ => None,
    }
}

fn system_transfer(from: &Pubkey, to: &Pubkey, lamports: u64) -> Instruction {
    solana_system_interface::instruction::transfer(from, to, lamports)
}

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
async fn cluster_information() -> anyhow::Result<()> {
    let (_node, rpc) = start().await?;
    rpc.get_health().await?;
    assert!(!rpc.get_version().await?.solana_core.is_empty());
    assert_eq!(
        rpc.get_genesis_hash().await?.to_string(),
        LOCAL_GENESIS_HASH
    );

    let slot = rpc.get_slot().await?;
    let height = rpc.get_block_height().await?;
    assert!(height < slot, "block height {height} trails slot {slot}");
    let epoch = rpc.get_epoch_info().await?;
    assert_eq!(epoch.absolute_slot, slot);
    assert_eq!(epoch.block_height, height);
    assert!(epoch.slot_index < epoch.slots_in_epoch);

    let (blockhash, last_valid) = rpc
        .get_latest_blockhash_with_commitment(CommitmentConfig::finalized())
        .await?;
    assert!(last_valid > height);
    assert!(
        rpc.is_blockhash_valid(&blockhash, CommitmentConfig::processed())
            .await?
    );

    // Landing a transaction moves the slot and the block height.
    funded(&rpc, LAMPORTS_PER_SOL).await?;
    assert!(rpc.get_slot().await? > slot);
    assert!(rpc.get_block_height().await? > height);

    let rent = rpc.get_minimum_balance_for_rent_exemption(165).await?;
    assert!(rent > 0);
    assert!(rpc.get_minimum_balance_for_rent_exemption(0).await? < rent);
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
async fn token_and_token_2022_mints_transfer_checked() -> anyhow::Result<()> {
    let (_node, rpc) = start().await?;
    let payer = funded(&rpc, 10 * LAMPORTS_PER_SOL).await?;
    let owner = Keypair::new();
    let recipient = Pubkey::new_unique();

    for (program, decimals) in [
        (spl_token_interface::ID, 6u8),
        (spl_token_2022_interface::ID, 9u8),
    ] {
        let mint = create_mint(&rpc, &payer, &program, decimals).await?;
        mint_to(&rpc, &payer, &mint, &owner.pubkey(), 1_000_000).await?;
        // Minting again reuses the associated token account.
        mint_to(&rpc, &payer, &mint, &owner.pubkey(), 500).await?;

        let accounts = rpc
            .get_token_accounts_by_owner(&owner.pubkey(), TokenAccountsFilter::ProgramId(program))
            .await?;
        assert_eq!(
            accounts.len(),
            1,
            "only the {program} account: {accounts:?}"
        );
        let ata = get_associated_token_address_with_program_id(&owner.pubkey(), &mint, &program);
        assert_eq!(accounts[0].pubkey, ata.to_string());
        assert_eq!(accounts[0].account.owner, program.to_string());
        let UiAccountData::Json(parsed) = &accounts[0].account.data else {
            bail!("jsonParsed data expected: {:?}", accounts[0].account.data);
        };
        let info = &parsed.parsed["info"];
        assert_eq!(parsed.parsed["type"], "account");
        assert_eq!(info["tokenAmount"]["amount"], "1000500");
        assert_eq!(info["tokenAmount"]["decimals"], decimals);
        assert_eq!(info["mint"], mint.to_string());
        assert_eq!(info["owner"], owner.pubkey().to_string());
        assert_eq!(
            parsed.space,
            165 + u64::from(program == spl_token_2022_interface::ID) * 5
        );

        // The recipient's associated token account is created in the transfer itself.
        let recipient_ata =
            get_associated_token_address_with_program_id(&recipient, &mint, &program);
        let tx = signed(
            &rpc,
            &[
                create_associated_token_account_idempotent(
                    &payer.pubkey(),
                    &recipient,
                    &mint,
                    &program,
                ),
                transfer_checked(
                    &program,
                    &ata,
                    &mint,
                    &recipient_ata,
                    &owner.pubkey(),
                    &[],
                    250_000,
                    decimals,
                )?,
            ],
            &[&payer, &owner],
        )
        .await?;
        rpc.send_and_confirm_transaction(&tx).await?;

        assert_eq!(token_balance(&rpc, &owner.pubkey(), &mint).await?, 750_500);
        assert_eq!(token_balance(&rpc, &recipient, &mint).await?, 250_000);
        let balance = rpc.get_token_account_balance(&recipient_ata).await?;
        assert_eq!(balance.amount, "250000");
        assert_eq!(balance.decimals, decimals);

        // Mints and token accounts parse in getAccountInfo too.
        let mint_account = rpc
            .get_ui_account_with_config(
                &mint,
                RpcAccountInfoConfig {
                    encoding: Some(UiAccountEncoding::JsonParsed),
                    ..RpcAccountInfoConfig::default()
                },
            )
            .await?
            .value
            .context("mint exists")?;
        let UiAccountData::Json(parsed_mint) = &mint_account.data else {
            bail!("jsonParsed mint expected: {:?}", mint_account.data);
        };
        assert_eq!(parsed_mint.parsed["type"], "mint");
        assert_eq!(parsed_mint.parsed["info"]["decimals"], decimals);
        assert_eq!(parsed_mint.parsed["info"]["supply"], "1000500");
        let raw = rpc.get_account(&recipient_ata).await?;
        assert_eq!(raw.owner, program);
        let base64 = rpc
            .get_ui_account_with_config(
                &recipient_ata,
                RpcAccountInfoConfig {
                    encoding: Some(UiAccountEncoding::Base64),
                    ..RpcAccountInfoConfig::default()
                },
            )
            .await?
            .value
            .context("token account exists")?;
        assert!(
            matches!(
                &base64.data,
                UiAccountData::Binary(_, UiAccountEncoding::Base64)
            ),
            "{:?}",
            base64.data
        );
        assert_eq!(base64.data.decode(), Some(raw.data));
    }

    // Mint filters keep the two programs' accounts apart.
    let all = rpc
        .get_token_accounts_by_owner(
            &recipient,
            TokenAccountsFilter::ProgramId(spl_token_2022_interface::ID),
        )
        .await?;
    assert_eq!(all.len(), 1);
    Ok(())
}

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

#[tokio::test]
async fn binary_funds_accounts_and_serves() -> anyhow::Result<()> {
    let funded_key = Pubkey::new_unique();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_walletops-solana-node"))
        .args(["--addr", "127.0.0.1:0", "--fund"])
        .arg(format!("{funded_key}=1234567"))
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let stdout = child.stdout.take().context("stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let line = tokio::time::timeout(WAIT_TIMEOUT, lines.next_line())
        .await
        .context("the node never announced itself")??
        .context("the node exited before announcing itself")?;
    let url = line
        .strip_prefix("Solana JSON-RPC listening on ")
        .with_context(|| format!("unexpected announcement {line:?}"))?;
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");

    let rpc = RpcClient::new(url.to_string());
    assert_eq!(rpc.get_balance(&funded_key).await?, 1_234_567);
    assert!(!rpc.get_version().await?.solana_core.is_empty());
    child.kill().await?;
    Ok(())
}

#[test]
fn genesis_hash_is_a_hash() {
    assert!(Hash::from_str(LOCAL_GENESIS_HASH).is_ok());
}

#[tokio::test]
async fn dropping_the_node_stops_the_server() -> anyhow::Result<()> {
    let (node, rpc) = start().await?;
    let url = node.url();
    // The client now holds a kept-alive connection to the node.
    rpc.get_slot().await?;
    drop(node);
    wait_for("the node to stop answering", || async {
        Ok(rpc.get_slot().await.is_err().then_some(()))
    })
    .await?;
    let fresh = RpcClient::new(url);
    assert!(fresh.get_slot().await.is_err());
    Ok(())
}
