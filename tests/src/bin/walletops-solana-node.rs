//! `walletops-solana-node`: a local Solana JSON-RPC node (litesvm with SPL Token, Token-2022
//! and the associated token account program) for development and tests.
//!
//! Prints `Solana JSON-RPC listening on http://<addr>` once it serves, then runs until
//! killed.

use std::{net::SocketAddr, str::FromStr};

use clap::Parser;
use solana_pubkey::Pubkey;
use walletops_tests::solana_node::SolanaNode;

/// Command line.
#[derive(Debug, Parser)]
#[command(
    name = "walletops-solana-node",
    about = "A local Solana JSON-RPC test node"
)]
struct Args {
    /// Address to serve JSON-RPC on (port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:8899")]
    addr: SocketAddr,
    /// Fund an account at start from the faucet: `<PUBKEY>=<LAMPORTS>`. Repeatable.
    #[arg(long = "fund", value_name = "PUBKEY=LAMPORTS", value_parser = parse_fund)]
    fund: Vec<Fund>,
}

/// One `--fund` argument.
#[derive(Debug, Clone)]
struct Fund {
    pubkey: Pubkey,
    lamports: u64,
}

fn parse_fund(arg: &str) -> Result<Fund, String> {
    let (pubkey, lamports) = arg
        .split_once('=')
        .ok_or_else(|| format!("expected <PUBKEY>=<LAMPORTS>, got {arg:?}"))?;
    Ok(Fund {
        pubkey: Pubkey::from_str(pubkey).map_err(|e| format!("bad pubkey {pubkey:?}: {e}"))?,
        lamports: lamports
            .parse()
            .map_err(|e| format!("bad lamports {lamports:?}: {e}"))?,
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let node = SolanaNode::start(args.addr).await?;
    for fund in &args.fund {
        node.airdrop(&fund.pubkey, fund.lamports)?;
    }
    // Callers wait for this line before they connect.
    println!("Solana JSON-RPC listening on {}", node.url());
    tokio::signal::ctrl_c().await?;
    Ok(())
}
