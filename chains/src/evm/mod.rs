//! The EVM chain client over alloy: gas estimation with simulation, fees under the
//! operator's caps (`fees`), nonces, receipts; token reads through Multicall3 (`tokens`); broadcasting with its outcome
//! classified (`broadcast`).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use alloy::{
    eips::BlockId,
    primitives::{Address, B256, Bytes, TxKind, U256},
    providers::{Provider, RootProvider, bindings::IMulticall3},
    rpc::types::{TransactionReceipt, TransactionRequest},
    sol,
    sol_types::SolCall,
    transports::{RpcError, TransportErrorKind},
};

use super::{failover::evm::Failover, rpc_batch::BatchLayer};
use crate::ChainError;

mod broadcast;
mod fees;
mod prestate;
mod scan;
mod simulate;
mod state_reads;
mod tokens;

use broadcast::classify;
pub use broadcast::{BroadcastOutcome, Rejection};
pub use fees::{FeeCaps, FeeReading};
pub use scan::{ScannedBlock, TransferLog};
pub use simulate::{Signing, Simulation};
pub use state_reads::Watch;
pub use tokens::{
    TokenQuery, TokenReading, decode_balance, erc20_allowance, erc20_approve, erc20_balance_of,
    erc20_transfer,
};

/// Multicall3's address, the same on every chain that has it.
pub const MULTICALL3: Address = alloy::providers::MULTICALL3_ADDRESS;

/// How long one node call may take before it counts as failed.
const RPC_TIMEOUT: Duration = Duration::from_secs(15);

/// EIP-1559 fees (or a legacy gas price in both fields where the chain has no base fee).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fees {
    /// Maximum total fee per gas.
    pub max_fee_per_gas: u128,
    /// Maximum priority fee per gas.
    pub max_priority_fee_per_gas: u128,
}

/// A client of one EVM chain.
#[derive(Debug, Clone)]
pub struct EvmClient {
    provider: RootProvider,
    rpc: alloy::rpc::client::RpcClient,
    /// The chain's slug, for messages.
    chain: Arc<str>,
    /// Fees move once a block: one reading serves every send of the next second.
    fees: Arc<Mutex<Option<(std::time::Instant, FeeReading)>>>,
    /// What a transaction may pay at most.
    caps: FeeCaps,
    /// One client per RPC URL when the chain has several: fees are read from each and
    /// trusted only when they agree (`fees::agreed`).
    fee_witnesses: Arc<[RootProvider]>,
    /// Addresses seen holding code. Code, once deployed, stays (since EIP-6780 only a
    /// contract made in the same transaction can remove its own); no code is asked again.
    contracts: moka::sync::Cache<Address, ()>,
    /// How the node simulates a write (`simulate`).
    simulation: Arc<simulate::Methods>,
    /// HTTP requests this client has made of its nodes (see `requests_made`).
    requests: Arc<std::sync::atomic::AtomicU64>,
}

/// Contract addresses remembered per node.
const CONTRACTS_KEPT: u64 = 10_000;

/// How calls to one node are batched (see `rpc_batch`): up to 4 requests out at once, the
/// calls that queue behind them sent 50 to a batch (the batch limit of common providers is
/// 100 or more).
const RPC_BATCHING: BatchLayer = BatchLayer {
    max_batch: 50,
    max_in_flight: 4,
    timeout: RPC_TIMEOUT,
};

/// How long a fee estimate is reused.
const FEES_FRESH_FOR: Duration = Duration::from_secs(1);

/// EVM clients by RPC URL, made on first use.
#[derive(Debug, Default)]
pub struct EvmClients {
    clients: Mutex<HashMap<String, EvmClient>>,
    multicall: Mutex<HashMap<String, (bool, std::time::Instant)>>,
    caps: FeeCaps,
}

impl EvmClients {
    /// Clients whose transactions pay at most `caps`.
    pub fn new(caps: FeeCaps) -> Self {
        Self {
            caps,
            ..Self::default()
        }
    }

    /// An empty set of clients with the same caps: clients of their own, whose requests
    /// (and batches) are counted apart from these.
    pub fn apart(&self) -> Self {
        Self::new(self.caps)
    }

    /// The client for `chain`, over its RPC URLs (tried in order, see `failover`).
    pub fn get(&self, chain: &super::Chain) -> Result<EvmClient, ChainError> {
        let rpc_urls = chain.rpc_urls();
        let key = format!("{} {}", chain.slug(), rpc_urls.join(" "));
        let mut clients = self
            .clients
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(c) = clients.get(&key) {
            return Ok(c.clone());
        }
        let transport = |urls: &[String]| {
            Failover::new(chain.slug(), urls, RPC_TIMEOUT)
                .map_err(|url| ChainError::Unavailable(format!("bad RPC URL configured: {url}")))
        };
        let is_local = rpc_urls
            .iter()
            .all(alloy::transports::utils::guess_local_url);
        let main = transport(rpc_urls)?;
        let requests = main.requests();
        let rpc = alloy::rpc::client::ClientBuilder::default()
            .layer(RPC_BATCHING)
            .transport(main, is_local);
        let fee_witnesses = if rpc_urls.len() > 1 {
            rpc_urls
                .iter()
                .map(|url| {
                    let one = transport(std::slice::from_ref(url))?;
                    Ok(RootProvider::new(
                        alloy::rpc::client::ClientBuilder::default().transport(one, is_local),
                    ))
                })
                .collect::<Result<_, ChainError>>()?
        } else {
            Arc::default()
        };
        let client = EvmClient {
            provider: RootProvider::new(rpc.clone()),
            rpc,
            chain: chain.slug().into(),
            fees: Arc::new(Mutex::new(None)),
            caps: self.caps,
            fee_witnesses,
            contracts: moka::sync::Cache::new(CONTRACTS_KEPT),
            simulation: Arc::default(),
            requests,
        };
        clients.insert(key, client.clone());
        Ok(client)
    }

    /// Whether the chain at `rpc_url` has Multicall3. Present is remembered; absent is asked
    /// again after `MULTICALL_RECHECK`, so a chain (or a dev node) that gains it later is
    /// read through it without a restart.
    pub async fn has_multicall(
        &self,
        rpc_url: &str,
        client: &EvmClient,
    ) -> Result<bool, ChainError> {
        if let Some(&(known, at)) = self
            .multicall
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(rpc_url)
            && (known || at.elapsed() < MULTICALL_RECHECK)
        {
            return Ok(known);
        }
        let code = client.code_at(MULTICALL3).await?;
        let present = !code.is_empty();
        self.multicall
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(rpc_url.to_owned(), (present, std::time::Instant::now()));
        Ok(present)
    }
}

/// How long a chain found without Multicall3 is read with JSON-RPC batches before it is
/// asked again.
const MULTICALL_RECHECK: Duration = Duration::from_secs(600);

/// The refusal of a write whose gas estimate or simulation the node answered with an
/// error: a shortfall is INSUFFICIENT_FUNDS, anything else (a revert, mostly) SEND_FAILED
/// with the node's words and revert data.
fn would_fail(payload: &alloy::rpc::json_rpc::ErrorPayload) -> ChainError {
    match classify(&payload.message) {
        Rejection::InsufficientFunds(m) => {
            ChainError::CannotPay(format!("the sender cannot pay for this transaction: {m}"))
        }
        Rejection::NonceTooLow(message)
        | Rejection::Underpriced(message)
        | Rejection::Other(message) => ChainError::WouldFail(format!(
            "the transaction would fail: {message}{}",
            payload
                .data
                .as_ref()
                .map(|d| format!(
                    " (revert data {})",
                    walletops_domain::chain_text(d.get(), walletops_domain::MESSAGE_CHARS)
                ))
                .unwrap_or_default()
        )),
    }
}

/// A node that failed to answer a read.
fn rpc_failed(what: &str, err: impl std::fmt::Display) -> ChainError {
    ChainError::Node(format!("the chain node failed to {what}: {err}"))
}

async fn timed<T, E: std::fmt::Display>(
    what: &str,
    fut: impl Future<Output = Result<T, E>>,
) -> Result<T, ChainError> {
    match tokio::time::timeout(RPC_TIMEOUT, fut).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(rpc_failed(what, e)),
        Err(_) => Err(rpc_failed(what, "timed out")),
    }
}

/// Whether a call's JSON-RPC error is the contract's own failure (a revert, an invalid opcode,
/// running out of gas) rather than the node's: nodes answer a revert with code 3, other
/// execution failures with the EVM's words (OpenEthereum-style nodes with -32015).
fn call_failed(code: i64, message: &str) -> bool {
    code == 3 || code == -32015 || mentions(&message.to_ascii_lowercase(), EXECUTION_FAILED)
}

/// How nodes word a call's own failure in the EVM.
const EXECUTION_FAILED: &[&str] = &[
    "revert",
    "invalid opcode",
    "out of gas",
    "stack underflow",
    "stack limit",
    "invalid jump",
    "return data out of bounds",
    "vm execution error",
];

/// Whether `lowercase`, a node's message in lower case, holds one of `phrases`.
fn mentions(lowercase: &str, phrases: &[&str]) -> bool {
    phrases.iter().any(|p| lowercase.contains(p))
}

impl EvmClient {
    /// The native balance of `owner`.
    pub async fn balance(&self, owner: Address) -> Result<U256, ChainError> {
        timed(
            "read a balance",
            self.provider.get_balance(owner).into_future(),
        )
        .await
    }

    /// Code deployed at `address`.
    pub async fn code_at(&self, address: Address) -> Result<Bytes, ChainError> {
        timed(
            "read code",
            self.provider.get_code_at(address).into_future(),
        )
        .await
    }

    /// Whether `address` holds code: a call to an address without any does nothing and
    /// succeeds.
    pub async fn has_code(&self, address: Address) -> Result<bool, ChainError> {
        if self.contracts.contains_key(&address) {
            return Ok(true);
        }
        let found = !self.code_at(address).await?.is_empty();
        if found {
            self.contracts.insert(address, ());
        }
        Ok(found)
    }

    /// The sender's next nonce counting its pending transactions.
    pub async fn pending_nonce(&self, owner: Address) -> Result<u64, ChainError> {
        timed(
            "read a nonce",
            self.provider
                .get_transaction_count(owner)
                .pending()
                .into_future(),
        )
        .await
    }

    /// The number of the sender's transactions included in blocks at least `depth` deep (1:
    /// up to the latest block).
    pub async fn mined_nonce(&self, owner: Address, depth: u64) -> Result<u64, ChainError> {
        let count = self.provider.get_transaction_count(owner);
        let count = if depth > 1 {
            let height = self.block_number().await?;
            count.block_id(height.saturating_sub(depth - 1).into())
        } else {
            count.latest()
        };
        timed("read a nonce", count.into_future()).await
    }

    /// The fees to sign at now, under the caps (see `fees`): `SERVICE_UNAVAILABLE` while
    /// the chain's base fee is above the cap or its RPC URLs disagree about it.
    pub async fn fees(&self) -> Result<Fees, ChainError> {
        self.caps.apply(&self.chain, self.fee_reading().await?)
    }

    /// The caps this client's transactions are held to.
    pub fn caps(&self) -> FeeCaps {
        self.caps
    }

    /// The chain's current fees as its nodes suggest them (at most a second old), before
    /// the caps.
    pub async fn fee_reading(&self) -> Result<FeeReading, ChainError> {
        let cached = *self
            .fees
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((at, reading)) = cached
            && at.elapsed() < FEES_FRESH_FOR
        {
            return Ok(reading);
        }
        let reading = if self.fee_witnesses.is_empty() {
            fees::read(&self.provider).await?
        } else {
            let answers =
                futures::future::join_all(self.fee_witnesses.iter().map(fees::read)).await;
            fees::agreed(
                &self.chain,
                answers.into_iter().filter_map(Result::ok).collect(),
            )?
        };
        *self
            .fees
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some((std::time::Instant::now(), reading));
        Ok(reading)
    }

    /// Simulates the call at `fees` and returns its gas. The node checks that the sender can
    /// pay value plus gas at those fees: a shortfall is `INSUFFICIENT_FUNDS`, a revert
    /// `SEND_FAILED` with the node's reason; nothing has been signed at this point.
    pub async fn estimate_gas(
        &self,
        from: Address,
        to: Address,
        value: U256,
        input: &Bytes,
        fees: Fees,
    ) -> Result<u64, ChainError> {
        let request = TransactionRequest::default()
            .from(from)
            .to(to)
            .value(value)
            .max_fee_per_gas(fees.max_fee_per_gas)
            .max_priority_fee_per_gas(fees.max_priority_fee_per_gas)
            .input(input.clone().into());
        self.estimate(request, "simulate the transaction").await
    }

    /// The node's gas estimate of `request`; `what` names it in a failure.
    async fn estimate(&self, request: TransactionRequest, what: &str) -> Result<u64, ChainError> {
        match tokio::time::timeout(
            RPC_TIMEOUT,
            self.provider.estimate_gas(request).into_future(),
        )
        .await
        {
            Ok(Ok(gas)) => Ok(gas),
            Ok(Err(RpcError::ErrorResp(payload))) => Err(would_fail(&payload)),
            Ok(Err(e)) => Err(rpc_failed(what, e)),
            Err(_) => Err(rpc_failed(what, "timed out")),
        }
    }

    /// The gas of a call of `to` with `input` from `from` carrying the EIP-7702
    /// `authorization` (a delegation), at `fees`; a refusal as `estimate_gas`'s.
    pub async fn estimate_delegation(
        &self,
        from: Address,
        to: Address,
        input: &Bytes,
        authorization: alloy::eips::eip7702::SignedAuthorization,
        fees: Fees,
    ) -> Result<u64, ChainError> {
        let mut request = TransactionRequest::default()
            .from(from)
            .to(to)
            .max_fee_per_gas(fees.max_fee_per_gas)
            .max_priority_fee_per_gas(fees.max_priority_fee_per_gas)
            .input(input.clone().into());
        request.authorization_list = Some(vec![authorization]);
        self.estimate(request, "simulate the delegation").await
    }

    /// A read-only call.
    pub async fn call(&self, to: Address, input: Bytes) -> Result<Bytes, ChainError> {
        self.call_from(None, to, input).await
    }

    /// A read-only call made as `from`, if given.
    pub async fn call_from(
        &self,
        from: Option<Address>,
        to: Address,
        input: Bytes,
    ) -> Result<Bytes, ChainError> {
        let mut request = TransactionRequest::default().to(to).input(input.into());
        request.from = from;
        timed("call a contract", self.provider.call(request).into_future()).await
    }

    /// The receipt of `hash`, once mined.
    pub async fn receipt(&self, hash: B256) -> Result<Option<TransactionReceipt>, ChainError> {
        timed(
            "read a receipt",
            self.provider.get_transaction_receipt(hash).into_future(),
        )
        .await
    }

    /// HTTP requests this client has made of the chain's nodes (a batch of calls is one; the
    /// fee witnesses of a chain with several URLs are not counted).
    pub fn requests_made(&self) -> u64 {
        self.requests.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The number of the node's latest block.
    pub async fn block_number(&self) -> Result<u64, ChainError> {
        timed(
            "read the block height",
            self.provider.get_block_number().into_future(),
        )
        .await
    }

    /// Whether the node knows `hash` (in its pool or mined). The transaction itself is not
    /// decoded: the monitor asks this of a backlog's records by the thousand.
    pub async fn knows(&self, hash: B256) -> Result<bool, ChainError> {
        let tx: Option<serde::de::IgnoredAny> = timed(
            "read a transaction",
            self.provider
                .raw_request("eth_getTransactionByHash".into(), (hash,)),
        )
        .await?;
        Ok(tx.is_some())
    }
}

/// `TxKind::Call(to)`, spelled once.
pub fn call_to(to: Address) -> TxKind {
    TxKind::Call(to)
}
