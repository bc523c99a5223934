//! The cluster's own answers: health, version, genesis hash, slots, epochs and blockhashes;
//! the node binary's command line; and the server stopping with its handle.

use std::{process::Stdio, str::FromStr};

use anyhow::Context as _;
use solana_hash::Hash;
use solana_pubkey::Pubkey;
use solana_rpc_client::nonblocking::rpc_client::RpcClient;
use solana_rpc_client_api::config::CommitmentConfig;
use tokio::io::{AsyncBufReadExt, BufReader};
use walletops_tests::{poll_until, solana_node::LOCAL_GENESIS_HASH, within};

use super::{LAMPORTS_PER_SOL, funded, start};

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
    let line = within("the node to announce itself", lines.next_line())
        .await??
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
    poll_until("the node to stop answering", || async {
        Ok(rpc.get_slot().await.is_err().then_some(()))
    })
    .await?;
    let fresh = RpcClient::new(url);
    assert!(fresh.get_slot().await.is_err());
    Ok(())
}
