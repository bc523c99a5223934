//! The Solana test node, exercised only through the real nonblocking `RpcClient` (and the
//! node binary through its command line).
//!
//! This file holds what the tests share; each module below tests one concern.

mod cluster;
mod failures;
mod tokens;
mod transfers;

use anyhow::bail;
use solana_hash::Hash;
use solana_keypair::Keypair;
use solana_pubkey::Pubkey;
use solana_rpc_client::nonblocking::rpc_client::RpcClient;
use solana_rpc_client_api::{
    client_error::{Error as ClientError, ErrorKind},
    request::{RpcError, RpcResponseErrorData},
    response::RpcSimulateTransactionResult,
};
use solana_signature::Signature;
use solana_signer::Signer;
use solana_transaction::{Instruction, Transaction, TransactionError};
use solana_transaction_status_client_types::TransactionConfirmationStatus;
use walletops_tests::{poll_until, solana_node::SolanaNode};

const LAMPORTS_PER_SOL: u64 = 1_000_000_000;

/// A fresh node on a random loopback port and a client for it.
async fn start() -> anyhow::Result<(SolanaNode, RpcClient)> {
    let node = SolanaNode::start("127.0.0.1:0".parse()?).await?;
    let rpc = RpcClient::new(node.url());
    Ok((node, rpc))
}

/// Waits until `signature` is finalized and returns its error, if it failed.
async fn wait_finalized(
    rpc: &RpcClient,
    signature: &Signature,
) -> anyhow::Result<Option<TransactionError>> {
    poll_until(&format!("{signature} to be finalized"), || async {
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
