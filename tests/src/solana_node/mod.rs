//! A Solana test node: a litesvm bank (with SPL Token, Token-2022 and the associated token
//! account program) behind an HTTP JSON-RPC 2.0 server that speaks the real node's wire
//! shapes, so the real `solana_rpc_client::nonblocking::rpc_client::RpcClient` (and the
//! service under test) can talk to it unchanged.
//!
//! Every landed transaction gets a block of its own: the slot and block height advance and a
//! new blockhash is produced, which stays valid for 150 blocks like on the real cluster.
//! Landed transactions are immediately `finalized`.
//!
//! Methods served: `getHealth`, `getVersion`, `getGenesisHash`, `getSlot`, `getBlockHeight`,
//! `getEpochInfo`, `getTransactionCount`, `getLatestBlockhash`, `isBlockhashValid`,
//! `getBalance`, `getAccountInfo`, `getMultipleAccounts`,
//! `getMinimumBalanceForRentExemption`, `getFeeForMessage`, `getTokenAccountsByOwner`,
//! `getTokenAccountBalance`, `sendTransaction`, `simulateTransaction`,
//! `getSignatureStatuses`, `getTransaction`, `getSignaturesForAddress`, `requestAirdrop`.
//!
//! Test-control methods, not part of the real API:
//! * `litesvm_expireBlockhash` (no params): advances the chain past the validity window of
//!   every blockhash handed out so far (150 empty blocks). Transactions signed with them are
//!   then rejected with `BlockhashNotFound` ("Blockhash not found") and `isBlockhashValid`
//!   answers `false` for them. Result `null`.
//! * `litesvm_dropTransactions` (`[n]`): the next `n` `sendTransaction` calls that pass
//!   preflight return the transaction's signature as if accepted, but the transaction is
//!   never applied and its signature never seen, as when the cluster loses a transaction.
//!   Replaces any count still pending. Result `null`.

mod chain;
mod client;
mod encoding;
mod fees;
mod history;
mod methods;
mod rpc;

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex, PoisonError},
};

use anyhow::Context;
use axum::{Router, body::Bytes, extract::State, routing::get};
use serde_json::{Value, json};
use solana_hash::Hash;
use solana_pubkey::Pubkey;
use solana_signature::Signature;
use tokio::{sync::oneshot, task::JoinHandle};

pub use client::{
    create_mint, drop_transactions, expire_blockhash, fault_sends, landed, mint_to,
    mint_to_existing, set_congestion, set_recent_fees, token_balance,
};

use chain::Chain;
use rpc::{Params, RpcError};

/// The genesis hash the node reports (SHA-256 of "walletops local solana test node"): fixed,
/// so a local node is recognisable, and distinct from mainnet-beta, devnet and testnet.
pub const LOCAL_GENESIS_HASH: &str = "6aZ4yZcpXRu2SXRnBqqGRDPmHJyNvcozcF7pcwvUWyeR";

/// A running test node. The server stops when the handle is dropped.
pub struct SolanaNode {
    addr: SocketAddr,
    chain: Arc<Mutex<Chain>>,
    shutdown: Option<oneshot::Sender<()>>,
    server: JoinHandle<()>,
}

impl std::fmt::Debug for SolanaNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SolanaNode")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl SolanaNode {
    /// Starts a fresh node serving JSON-RPC on `addr` (port 0 picks a free port).
    pub async fn start(addr: SocketAddr) -> anyhow::Result<SolanaNode> {
        let genesis_hash: Hash = LOCAL_GENESIS_HASH
            .parse()
            .map_err(|e| anyhow::anyhow!("bad genesis hash: {e:?}"))?;
        // Building the bank loads the SPL programs: keep that off the async workers.
        let chain = tokio::task::spawn_blocking(move || Chain::new(genesis_hash))
            .await
            .context("building the bank panicked")??;
        let chain = Arc::new(Mutex::new(chain));
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr}"))?;
        let addr = listener.local_addr()?;
        let app = Router::new()
            .route("/", axum::routing::post(handle))
            // The real node answers its health on `GET /health` too.
            .route("/health", get(|| async { "ok" }))
            .with_state(chain.clone());
        let (shutdown, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            let served = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await;
            if let Err(e) = served {
                eprintln!("solana test node on {addr} stopped: {e}");
            }
        });
        Ok(SolanaNode {
            addr,
            chain,
            shutdown: Some(shutdown),
            server,
        })
    }

    /// The address the node listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The JSON-RPC URL, `http://<addr>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Options of a service whose `solana-devnet` is this node, with `chain_toml` under the
    /// chain's table and `extra_toml` after it; reads are not rate limited and the monitor
    /// polls every 100 ms.
    pub fn service_options(&self, chain_toml: &str, extra_toml: &str) -> crate::Options {
        crate::Options {
            log_file: None,
            config_toml: Some(format!(
                "request_timeout_secs = 120\n[chains.solana-devnet]\nrpc_url = \"{}\"\n{chain_toml}\n[rate_limits]\nreads_per_minute = 100000\n[monitor]\npoll_interval_ms = 100\n{extra_toml}",
                self.url()
            )),
            env: Vec::new(),
        }
    }

    /// Sends `lamports` from the node's faucet to `to`, exactly as `requestAirdrop` does.
    pub fn airdrop(&self, to: &Pubkey, lamports: u64) -> anyhow::Result<Signature> {
        let mut chain = self.chain.lock().unwrap_or_else(PoisonError::into_inner);
        chain
            .airdrop(to, lamports)
            .map_err(|e| anyhow::anyhow!("airdrop to {to} failed: {e}"))
    }
}

impl Drop for SolanaNode {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        // Graceful shutdown closes idle connections; the abort makes sure the listener is
        // gone even if a client keeps a request open.
        self.server.abort();
    }
}

/// One HTTP POST: a single JSON-RPC request or a batch. Always HTTP 200, errors in the
/// body, as the real node answers.
async fn handle(State(chain): State<Arc<Mutex<Chain>>>, body: Bytes) -> axum::Json<Value> {
    let request: Value = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(_) => return axum::Json(error_response(Value::Null, &RpcError::parse_error())),
    };
    // Transactions execute synchronously in the bank: keep that off the async workers.
    let answered = tokio::task::spawn_blocking(move || {
        let mut chain = chain.lock().unwrap_or_else(PoisonError::into_inner);
        match request {
            Value::Array(batch) if !batch.is_empty() => Value::Array(
                batch
                    .into_iter()
                    .map(|one| answer(&mut chain, one))
                    .collect(),
            ),
            Value::Array(_) => error_response(Value::Null, &RpcError::invalid_request()),
            one => answer(&mut chain, one),
        }
    })
    .await;
    axum::Json(answered.unwrap_or_else(|_| error_response(Value::Null, &RpcError::internal())))
}

/// Answers one request object.
fn answer(chain: &mut Chain, request: Value) -> Value {
    let id = request.get("id").cloned().unwrap_or(Value::Null);
    let (Some("2.0"), Some(method)) = (
        request.get("jsonrpc").and_then(Value::as_str),
        request.get("method").and_then(Value::as_str),
    ) else {
        return error_response(id, &RpcError::invalid_request());
    };
    let result = Params::from_request(request.get("params").cloned())
        .and_then(|params| methods::call(chain, method, &params));
    match result {
        Ok(result) => json!({ "jsonrpc": "2.0", "result": result, "id": id }),
        Err(error) => error_response(id, &error),
    }
}

fn error_response(id: Value, error: &RpcError) -> Value {
    json!({ "jsonrpc": "2.0", "error": error.to_json(), "id": id })
}
