//! The EVM chain client over alloy: balances through Multicall3, gas and fee estimation with
//! simulation, nonces, broadcasting with its outcome classified, receipts.

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

use super::rpc_batch::BatchLayer;
use crate::error::WalletOpsError;

sol! {
    /// The parts of ERC20 the service calls.
    interface IERC20 {
        function balanceOf(address owner) external view returns (uint256);
        function decimals() external view returns (uint8);
        function symbol() external view returns (string);
        function transfer(address to, uint256 amount) external returns (bool);
        function approve(address spender, uint256 amount) external returns (bool);
        function allowance(address owner, address spender) external view returns (uint256);
    }
}

/// Multicall3's address, the same on every chain that has it.
pub const MULTICALL3: Address = alloy::providers::MULTICALL3_ADDRESS;

/// How long one node call may take before it counts as failed.
const RPC_TIMEOUT: Duration = Duration::from_secs(15);

/// What the node said to a broadcast.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BroadcastOutcome {
    /// Accepted into the pool (or already known there).
    Accepted,
    /// Refused for good: the transaction was not and will not be accepted as sent.
    Rejected(Rejection),
    /// No answer (connection refused, timeout): it may or may not have arrived.
    Unknown(String),
}

/// Why a node refused a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    /// The nonce is already used on chain.
    NonceTooLow(String),
    /// A transaction with this nonce is in the pool and this one does not pay enough more.
    Underpriced(String),
    /// The sender cannot pay value plus fee.
    InsufficientFunds(String),
    /// Anything else the node refused.
    Other(String),
}

/// One token's balance read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenReading {
    /// The token.
    pub token: Address,
    /// The balance, if `balanceOf` answered.
    pub balance: Option<U256>,
    /// Decimals, if `decimals()` answered.
    pub decimals: Option<u8>,
    /// Symbol, if `symbol()` answered.
    pub symbol: Option<String>,
}

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
    /// Fees move once a block: one estimate serves every send of the next second.
    fees: Arc<Mutex<Option<(std::time::Instant, Fees)>>>,
    /// Addresses seen holding code. Code, once deployed, stays (since EIP-6780 only a
    /// contract made in the same transaction can remove its own); no code is asked again.
    contracts: moka::sync::Cache<Address, ()>,
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
}

impl EvmClients {
    /// The client for `rpc_url`.
    pub fn get(&self, rpc_url: &str) -> Result<EvmClient, WalletOpsError> {
        let mut clients = self
            .clients
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(c) = clients.get(rpc_url) {
            return Ok(c.clone());
        }
        let url = rpc_url.parse().map_err(|_| {
            WalletOpsError::ServiceUnavailable(format!("bad RPC URL configured: {rpc_url}"))
        })?;
        let rpc = alloy::rpc::client::ClientBuilder::default()
            .layer(RPC_BATCHING)
            .http(url);
        let client = EvmClient {
            provider: RootProvider::new(rpc.clone()),
            rpc,
            fees: Arc::new(Mutex::new(None)),
            contracts: moka::sync::Cache::new(CONTRACTS_KEPT),
        };
        clients.insert(rpc_url.to_owned(), client.clone());
        Ok(client)
    }

    /// Whether the chain at `rpc_url` has Multicall3. Present is remembered; absent is asked
    /// again after `MULTICALL_RECHECK`, so a chain (or a dev node) that gains it later is
    /// read through it without a restart.
    pub async fn has_multicall(
        &self,
        rpc_url: &str,
        client: &EvmClient,
    ) -> Result<bool, WalletOpsError> {
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

/// A node that failed to answer a read.
fn rpc_failed(what: &str, err: impl std::fmt::Display) -> WalletOpsError {
    WalletOpsError::ProviderRpcError(format!("the chain node failed to {what}: {err}"))
}

async fn timed<T, E: std::fmt::Display>(
    what: &str,
    fut: impl Future<Output = Result<T, E>>,
) -> Result<T, WalletOpsError> {
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

/// Classifies a node's refusal by its message; node implementations agree on these phrases.
fn classify(message: &str) -> Rejection {
    let m = message.to_ascii_lowercase();
    if m.contains("nonce too low")
        || m.contains("nonce is too low")
        || m.contains("already been used")
    {
        Rejection::NonceTooLow(message.to_owned())
    } else if m.contains("underpriced") || m.contains("fee too low") {
        Rejection::Underpriced(message.to_owned())
    } else if m.contains("insufficient funds") || m.contains("insufficient balance") {
        Rejection::InsufficientFunds(message.to_owned())
    } else {
        Rejection::Other(message.to_owned())
    }
}

impl EvmClient {
    /// The native balance of `owner`.
    pub async fn balance(&self, owner: Address) -> Result<U256, WalletOpsError> {
        timed(
            "read a balance",
            self.provider.get_balance(owner).into_future(),
        )
        .await
    }

    /// Code deployed at `address`.
    pub async fn code_at(&self, address: Address) -> Result<Bytes, WalletOpsError> {
        timed(
            "read code",
            self.provider.get_code_at(address).into_future(),
        )
        .await
    }

    /// Whether `address` holds code: a call to an address without any does nothing and
    /// succeeds.
    pub async fn has_code(&self, address: Address) -> Result<bool, WalletOpsError> {
        if self.contracts.contains_key(&address) {
            return Ok(true);
        }
        let found = !self.code_at(address).await?.is_empty();
        if found {
            self.contracts.insert(address, ());
        }
        Ok(found)
    }

    /// The native balance of `owner` and, for each query, the token's balance (and, where
    /// asked, its decimals and symbol) in one `eth_call` to Multicall3's `aggregate3`, each
    /// call allowed to fail on its own.
    pub async fn balances_multicall(
        &self,
        owner: Address,
        queries: &[TokenQuery],
    ) -> Result<(U256, Vec<TokenReading>), WalletOpsError> {
        let mut calls = vec![IMulticall3::Call3 {
            target: MULTICALL3,
            allowFailure: false,
            callData: IMulticall3::getEthBalanceCall { addr: owner }
                .abi_encode()
                .into(),
        }];
        calls.extend(
            token_calls(owner, queries).map(|(target, data)| IMulticall3::Call3 {
                target,
                allowFailure: true,
                callData: data.into(),
            }),
        );
        let request = TransactionRequest::default()
            .to(MULTICALL3)
            .input(IMulticall3::aggregate3Call { calls }.abi_encode().into());
        let out = timed("read balances", self.provider.call(request).into_future()).await?;
        let results = IMulticall3::aggregate3Call::abi_decode_returns(&out)
            .map_err(|e| rpc_failed("decode the Multicall3 answer", e))?;
        let native = results
            .first()
            .and_then(|r| IMulticall3::getEthBalanceCall::abi_decode_returns(&r.returnData).ok())
            .ok_or_else(|| rpc_failed("read the native balance", "no answer"))?;
        let answers = results
            .into_iter()
            .skip(1)
            .map(|r| r.success.then_some(r.returnData));
        Ok((native, readings(queries, answers)))
    }

    /// The same reads as `balances_multicall` for a chain without Multicall3: JSON-RPC
    /// batches of `eth_getBalance` and `eth_call`s, none larger than the node is sent
    /// otherwise (50 tokens with their metadata are 151 calls). A call the contract fails
    /// (a revert, say) fails alone, as in `aggregate3`; any other error (a node or gateway
    /// fault, a rate limit) fails the read: read as a revert, it would report a token as no
    /// ERC20, or remember it with no decimals.
    pub async fn balances_batch(
        &self,
        owner: Address,
        queries: &[TokenQuery],
    ) -> Result<(U256, Vec<TokenReading>), WalletOpsError> {
        let mut batches = Vec::new();
        let mut waiters = Vec::new();
        let mut batch = self.rpc.new_batch();
        let native = batch
            .add_call::<_, U256>("eth_getBalance", &(owner, BlockId::latest()))
            .map_err(|e| rpc_failed("build a batch", e))?;
        let mut in_batch = 1;
        for (target, data) in token_calls(owner, queries) {
            if in_batch == RPC_BATCHING.max_batch {
                batches.push(std::mem::replace(&mut batch, self.rpc.new_batch()).send());
                in_batch = 0;
            }
            let req = TransactionRequest::default()
                .to(target)
                .input(Bytes::from(data).into());
            waiters.push(
                batch
                    .add_call::<_, Bytes>("eth_call", &(req, BlockId::latest()))
                    .map_err(|e| rpc_failed("build a batch", e))?,
            );
            in_batch += 1;
        }
        batches.push(batch.send());
        // One after another: a caller's batches pass the in-flight limit of `rpc_batch`.
        for batch in batches {
            timed("read balances", batch).await?;
        }
        let native = timed("read the native balance", native).await?;
        let mut answers = Vec::with_capacity(waiters.len());
        for w in waiters {
            answers.push(match w.await {
                Ok(data) => Some(data),
                Err(RpcError::ErrorResp(payload))
                    if call_failed(payload.code, &payload.message) =>
                {
                    None
                }
                // An answer that is no data (`null`): the call gave nothing, as a failed one.
                Err(RpcError::DeserError { .. }) => None,
                Err(e) => return Err(rpc_failed("read a token", e)),
            });
        }
        Ok((native, readings(queries, answers.into_iter())))
    }

    /// The sender's next nonce counting its pending transactions.
    pub async fn pending_nonce(&self, owner: Address) -> Result<u64, WalletOpsError> {
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
    pub async fn mined_nonce(&self, owner: Address, depth: u64) -> Result<u64, WalletOpsError> {
        let count = self.provider.get_transaction_count(owner);
        let count = if depth > 1 {
            let height = self.block_number().await?;
            count.block_id(height.saturating_sub(depth - 1).into())
        } else {
            count.latest()
        };
        timed("read a nonce", count.into_future()).await
    }

    /// Current EIP-1559 fees (at most a second old), or the legacy gas price where the chain
    /// has no base fee.
    pub async fn fees(&self) -> Result<Fees, WalletOpsError> {
        let cached = *self
            .fees
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((at, fees)) = cached
            && at.elapsed() < FEES_FRESH_FOR
        {
            return Ok(fees);
        }
        let fees = self.fetch_fees().await?;
        *self
            .fees
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some((std::time::Instant::now(), fees));
        Ok(fees)
    }

    async fn fetch_fees(&self) -> Result<Fees, WalletOpsError> {
        match tokio::time::timeout(RPC_TIMEOUT, self.provider.estimate_eip1559_fees()).await {
            Ok(Ok(est)) => Ok(Fees {
                max_fee_per_gas: est.max_fee_per_gas,
                max_priority_fee_per_gas: est.max_priority_fee_per_gas,
            }),
            _ => {
                let price = timed(
                    "read the gas price",
                    self.provider.get_gas_price().into_future(),
                )
                .await?;
                Ok(Fees {
                    max_fee_per_gas: price,
                    max_priority_fee_per_gas: price,
                })
            }
        }
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
    ) -> Result<u64, WalletOpsError> {
        let request = TransactionRequest::default()
            .from(from)
            .to(to)
            .value(value)
            .max_fee_per_gas(fees.max_fee_per_gas)
            .max_priority_fee_per_gas(fees.max_priority_fee_per_gas)
            .input(input.clone().into());
        match tokio::time::timeout(
            RPC_TIMEOUT,
            self.provider.estimate_gas(request).into_future(),
        )
        .await
        {
            Ok(Ok(gas)) => Ok(gas),
            Ok(Err(RpcError::ErrorResp(payload))) => {
                let message = payload.message.to_string();
                match classify(&message) {
                    Rejection::InsufficientFunds(m) => Err(WalletOpsError::InsufficientFunds(
                        format!("the sender cannot pay for this transaction: {m}"),
                    )),
                    _ => Err(WalletOpsError::SendFailed(format!(
                        "the transaction would fail: {message}{}",
                        payload
                            .data
                            .as_ref()
                            .map(|d| format!(" (revert data {})", d.get()))
                            .unwrap_or_default()
                    ))),
                }
            }
            Ok(Err(e)) => Err(rpc_failed("simulate the transaction", e)),
            Err(_) => Err(rpc_failed("simulate the transaction", "timed out")),
        }
    }

    /// A read-only call.
    pub async fn call(&self, to: Address, input: Bytes) -> Result<Bytes, WalletOpsError> {
        self.call_from(None, to, input).await
    }

    /// A read-only call made as `from`, if given.
    pub async fn call_from(
        &self,
        from: Option<Address>,
        to: Address,
        input: Bytes,
    ) -> Result<Bytes, WalletOpsError> {
        let mut request = TransactionRequest::default().to(to).input(input.into());
        request.from = from;
        timed("call a contract", self.provider.call(request).into_future()).await
    }

    /// Sends signed bytes and says what became of them.
    pub async fn broadcast(&self, raw: &[u8]) -> BroadcastOutcome {
        match tokio::time::timeout(RPC_TIMEOUT, self.provider.send_raw_transaction(raw)).await {
            Ok(answer) => outcome(answer.map(drop)),
            Err(_) => BroadcastOutcome::Unknown("timed out".to_owned()),
        }
    }

    /// Sends several signed payloads in one JSON-RPC batch, in the order given (a wallet's
    /// transactions in nonce order, so that none waits in the node's queue for an earlier
    /// one), and says what became of each.
    pub async fn broadcast_all(&self, raws: &[&[u8]]) -> Vec<BroadcastOutcome> {
        let mut outcomes = Vec::with_capacity(raws.len());
        // No larger batches than the node is sent otherwise; each after the one before.
        for chunk in raws.chunks(RPC_BATCHING.max_batch) {
            outcomes.extend(self.broadcast_batch(chunk).await);
        }
        outcomes
    }

    /// One JSON-RPC batch of `broadcast_all`.
    async fn broadcast_batch(&self, raws: &[&[u8]]) -> Vec<BroadcastOutcome> {
        if let [raw] = raws {
            return vec![self.broadcast(raw).await];
        }
        let mut batch = self.rpc.new_batch();
        let mut waiters = Vec::with_capacity(raws.len());
        for raw in raws {
            waiters.push(
                batch
                    .add_call::<_, B256>("eth_sendRawTransaction", &(Bytes::copy_from_slice(raw),)),
            );
        }
        let sent = tokio::time::timeout(RPC_TIMEOUT, batch.send()).await;
        let mut outcomes = Vec::with_capacity(raws.len());
        for waiter in waiters {
            outcomes.push(match (&sent, waiter) {
                (Err(_), _) => BroadcastOutcome::Unknown("timed out".to_owned()),
                (Ok(Err(e)), _) => BroadcastOutcome::Unknown(e.to_string()),
                (Ok(Ok(())), Err(e)) => BroadcastOutcome::Unknown(e.to_string()),
                (Ok(Ok(())), Ok(waiter)) => outcome(waiter.await.map(drop)),
            });
        }
        outcomes
    }

    /// The receipt of `hash`, once mined.
    pub async fn receipt(&self, hash: B256) -> Result<Option<TransactionReceipt>, WalletOpsError> {
        timed(
            "read a receipt",
            self.provider.get_transaction_receipt(hash).into_future(),
        )
        .await
    }

    /// The number of the node's latest block.
    pub async fn block_number(&self) -> Result<u64, WalletOpsError> {
        timed(
            "read the block height",
            self.provider.get_block_number().into_future(),
        )
        .await
    }

    /// Whether the node knows `hash` (in its pool or mined).
    pub async fn knows(&self, hash: B256) -> Result<bool, WalletOpsError> {
        let tx = timed(
            "read a transaction",
            self.provider.get_transaction_by_hash(hash).into_future(),
        )
        .await?;
        Ok(tx.is_some())
    }
}

/// Error phrases of gateways and overloaded nodes that say nothing of the transaction: it may
/// have been passed on before the error. Read as "outcome unknown", so the record is left to
/// the monitor (which sends the same bytes again) instead of failed with its nonce freed.
const NO_VERDICT: &[&str] = &[
    "timeout",
    "timed out",
    "internal error",
    "rate limit",
    "too many requests",
    "temporarily",
    "unavailable",
    "try again",
    "header not found",
    "upstream",
    // A connection cut after the request went out.
    "gateway",
    "connection",
    "deadline",
    "broken pipe",
    "unexpected eof",
    // A nonce ahead of the node's (geth: "nonce too high", Nethermind: "NonceGap", Besu:
    // "NONCE_TOO_FAR_IN_FUTURE_FOR_SENDER"): the transaction is fine, an earlier one of the
    // wallet has not reached this node yet (another core's, or a batch a gateway split).
    "nonce too high",
    "nonce is too high",
    "noncegap",
    "nonce gap",
    "too far in future",
    "too_far_in_future",
];

/// How nodes say they hold a transaction already (geth, reth, erigon: "already known"; besu:
/// "known transaction"; anvil: "transaction already imported"; nethermind: "AlreadyKnown";
/// openethereum: "... was already imported"): the send is as good as accepted.
const HELD_ALREADY: &[&str] = &[
    "already known",
    "alreadyknown",
    "known transaction",
    "already imported",
    "already in mempool",
];

/// What an answer to `eth_sendRawTransaction` says of the transaction.
fn outcome(answer: Result<(), RpcError<TransportErrorKind>>) -> BroadcastOutcome {
    match answer {
        Ok(()) => BroadcastOutcome::Accepted,
        Err(RpcError::ErrorResp(payload)) => {
            let message = payload.message.to_string();
            let m = message.to_ascii_lowercase();
            if mentions(&m, HELD_ALREADY) {
                return BroadcastOutcome::Accepted;
            }
            // A known refusal counts even when a gateway wraps it in one of its own words.
            match classify(&message) {
                Rejection::Other(_) if mentions(&m, NO_VERDICT) => {
                    BroadcastOutcome::Unknown(message)
                }
                rejection => BroadcastOutcome::Rejected(rejection),
            }
        }
        // No answer, or one we cannot read: the node may hold the transaction or not.
        Err(e) => BroadcastOutcome::Unknown(e.to_string()),
    }
}

/// Calldata of ERC20 `transfer(to, amount)`.
pub fn erc20_transfer(to: Address, amount: U256) -> Bytes {
    IERC20::transferCall { to, amount }.abi_encode().into()
}

/// Calldata of ERC20 `approve(spender, amount)`.
pub fn erc20_approve(spender: Address, amount: U256) -> Bytes {
    IERC20::approveCall { spender, amount }.abi_encode().into()
}

/// Calldata of ERC20 `balanceOf(owner)`.
pub fn erc20_balance_of(owner: Address) -> Bytes {
    IERC20::balanceOfCall { owner }.abi_encode().into()
}

/// Decodes a `balanceOf` answer.
pub fn decode_balance(data: &[u8]) -> Option<U256> {
    IERC20::balanceOfCall::abi_decode_returns(data).ok()
}

/// One token to read: its balance always, its decimals and symbol when `meta` is set (they
/// do not change, so a caller that knows them skips two calls per token).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenQuery {
    /// The token.
    pub token: Address,
    /// Also read `decimals()` and `symbol()`.
    pub meta: bool,
}

/// The calls of `queries`, in order: `balanceOf`, then `decimals` and `symbol` where asked.
fn token_calls(
    owner: Address,
    queries: &[TokenQuery],
) -> impl Iterator<Item = (Address, Vec<u8>)> + '_ {
    queries.iter().flat_map(move |q| {
        let mut calls = vec![(q.token, IERC20::balanceOfCall { owner }.abi_encode())];
        if q.meta {
            calls.push((q.token, IERC20::decimalsCall {}.abi_encode()));
            calls.push((q.token, IERC20::symbolCall {}.abi_encode()));
        }
        calls
    })
}

/// The readings of `queries` from the answers of `token_calls`, in the same order.
fn readings(
    queries: &[TokenQuery],
    mut answers: impl Iterator<Item = Option<Bytes>>,
) -> Vec<TokenReading> {
    queries
        .iter()
        .map(|q| {
            let balance = answers.next().flatten();
            let (decimals, symbol) = if q.meta {
                (answers.next().flatten(), answers.next().flatten())
            } else {
                (None, None)
            };
            decode_reading(
                q.token,
                balance.as_ref().map(|b| &b[..]),
                decimals.as_ref().map(|b| &b[..]),
                symbol.as_ref().map(|b| &b[..]),
            )
        })
        .collect()
}

fn decode_reading(
    token: Address,
    balance: Option<&[u8]>,
    decimals: Option<&[u8]>,
    symbol: Option<&[u8]>,
) -> TokenReading {
    TokenReading {
        token,
        balance: balance.and_then(decode_balance),
        decimals: decimals.and_then(|d| IERC20::decimalsCall::abi_decode_returns(d).ok()),
        symbol: symbol.and_then(decode_symbol),
    }
}

/// `symbol()` as a string, or as the `bytes32` some early tokens return.
fn decode_symbol(data: &[u8]) -> Option<String> {
    if let Ok(s) = IERC20::symbolCall::abi_decode_returns(data) {
        return Some(s);
    }
    (data.len() == 32).then(|| {
        String::from_utf8_lossy(data)
            .trim_end_matches('\0')
            .to_owned()
    })
}

/// `TxKind::Call(to)`, spelled once.
pub fn call_to(to: Address) -> TxKind {
    TxKind::Call(to)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_contracts_failure_is_told_from_the_nodes() {
        assert!(call_failed(3, "execution reverted: not a token"));
        assert!(call_failed(-32000, "execution reverted"));
        assert!(call_failed(-32000, "invalid opcode: INVALID"));
        assert!(call_failed(-32000, "out of gas"));
        assert!(call_failed(-32000, "stack limit reached 1024 (1023)"));
        assert!(call_failed(-32015, "VM execution error."));
        assert!(!call_failed(-32005, "request rate exceeded"));
        assert!(!call_failed(-32000, "header not found"));
        assert!(!call_failed(-32603, "Internal error"));
    }

    #[test]
    fn node_refusals_are_classified() {
        assert!(matches!(
            classify("nonce too low: next nonce 5, tx nonce 3"),
            Rejection::NonceTooLow(_)
        ));
        assert!(matches!(
            classify("replacement transaction underpriced"),
            Rejection::Underpriced(_)
        ));
        assert!(matches!(
            classify("Insufficient funds for gas * price + value"),
            Rejection::InsufficientFunds(_)
        ));
        assert!(matches!(
            classify("intrinsic gas too low"),
            Rejection::Other(_)
        ));
    }

    fn error_answer(message: &str) -> BroadcastOutcome {
        outcome(Err(RpcError::ErrorResp(
            alloy::rpc::json_rpc::ErrorPayload {
                code: -32000,
                message: message.to_owned().into(),
                data: None,
            },
        )))
    }

    #[test]
    fn gateway_errors_leave_the_outcome_unknown() {
        for message in [
            "request timed out",
            "Internal error",
            "rate limit exceeded",
            "header not found",
            "upstream connect error",
            "nonce too high",
            "NonceGap",
            "NONCE_TOO_FAR_IN_FUTURE_FOR_SENDER",
        ] {
            assert!(
                matches!(error_answer(message), BroadcastOutcome::Unknown(_)),
                "{message}"
            );
        }
        for held in [
            "already known",
            "transaction already imported",
            "AlreadyKnown",
            "Transaction with the same hash was already imported.",
            "Known transaction (0xabc)",
        ] {
            assert_eq!(error_answer(held), BroadcastOutcome::Accepted, "{held}");
        }
        for cut in [
            "502 Bad Gateway",
            "connection reset by peer",
            "context deadline exceeded",
        ] {
            assert!(
                matches!(error_answer(cut), BroadcastOutcome::Unknown(_)),
                "{cut}"
            );
        }
        for refusal in [
            "max fee per gas less than block base fee",
            "invalid EOF initcode",
            "nonce reset not allowed",
        ] {
            assert!(
                matches!(
                    error_answer(refusal),
                    BroadcastOutcome::Rejected(Rejection::Other(_))
                ),
                "{refusal}"
            );
        }
        assert!(matches!(
            error_answer("nonce too low"),
            BroadcastOutcome::Rejected(Rejection::NonceTooLow(_))
        ));
        assert!(matches!(
            error_answer("upstream error: insufficient funds for gas * price + value"),
            BroadcastOutcome::Rejected(Rejection::InsufficientFunds(_))
        ));
    }

    #[test]
    fn bytes32_symbols_decode() {
        let mut word = [0u8; 32];
        word[..3].copy_from_slice(b"MKR");
        assert_eq!(decode_symbol(&word).as_deref(), Some("MKR"));
    }
}
