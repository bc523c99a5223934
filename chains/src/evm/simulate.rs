//! A write's simulation before it is signed: `eth_simulateV1` with `traceTransfers` (native
//! moves, internal calls included, come back as ERC-20 `Transfer` logs of `0xEeee…EEeE`), or
//! on a node without it `debug_traceCall` with the call tracer and its logs, whose frames
//! that carry value are turned into those same logs. A node with neither leaves the write's
//! effects unknown. Which method a node answers is remembered per client.
//!
//! The simulated transaction is the one that will be signed: its gas limit and fee fields,
//! on the pending block, with `eth_simulateV1`'s validation (the block's real base fee, the
//! sender's balance for gas): a contract cannot tell it from the execution by `tx.gasprice`,
//! `block.basefee` or `gasleft()`. (Its nonce is the node's: no opcode reads it.) Where the
//! caller watches the wallet's state, reads of it run in the same block before and after
//! the write (`state_reads`), and every allowance an `Approval` of the wallet names is read
//! the same way in a second simulation.

use std::{
    sync::{Mutex, PoisonError},
    time::{Duration, Instant},
};

use alloy::{
    eips::BlockNumberOrTag,
    primitives::{Address, B256, Bytes, U256},
    providers::Provider,
    rpc::types::{
        TransactionRequest,
        simulate::{SimBlock, SimCallResult, SimulatePayload},
        trace::geth::{
            CallConfig, CallFrame, GethDebugTracingCallOptions, GethDebugTracingOptions,
        },
    },
    sol_types::SolEvent,
    transports::{RpcError, TransportErrorKind},
};
use serde::Deserialize;

use super::{
    EvmClient, Fees, RPC_TIMEOUT, rpc_failed,
    state_reads::{Watch, effective_price},
    would_fail,
};
use crate::{
    effects::evm::{Erc20, Log, NATIVE_TRANSFERS, StateReads},
    error::ChainError,
};

/// What a simulation of a call said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Simulation {
    /// The call ran to its end: what it returned and its logs, in order, native moves
    /// included.
    Ran {
        /// The call's return data.
        output: Bytes,
        /// Its logs.
        logs: Vec<Log>,
        /// The wallet's state read around it, when it was watched and the node simulates
        /// with `eth_simulateV1`.
        reads: Option<StateReads>,
    },
    /// The node can simulate neither way: why, naming the chain's missing methods.
    Unavailable(String),
}

/// The ways a node may be asked to simulate, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Method {
    SimulateV1,
    TraceCall,
    Neither,
}

/// Which method a node answers, learned from its answers. A node found with neither is
/// asked again after `RECHECK`, so one that gains a method is used without a restart.
#[derive(Debug)]
pub(super) struct Methods(Mutex<(Method, Instant)>);

const RECHECK: Duration = Duration::from_secs(600);

impl Default for Methods {
    fn default() -> Self {
        Self(Mutex::new((Method::SimulateV1, Instant::now())))
    }
}

impl Methods {
    fn current(&self) -> Method {
        let mut known = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if known.0 == Method::Neither && known.1.elapsed() >= RECHECK {
            *known = (Method::SimulateV1, Instant::now());
        }
        known.0
    }

    fn lacks(&self, method: Method) {
        let mut known = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if known.0 == method {
            let next = match method {
                Method::SimulateV1 => Method::TraceCall,
                _ => Method::Neither,
            };
            *known = (next, Instant::now());
        }
    }
}

/// Whether a JSON-RPC error says the node has no such method (providers word it several
/// ways, not all with -32601).
pub(super) fn no_such_method(code: i64, message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    code == -32601
        || [
            "not found",
            "does not exist",
            "not supported",
            "not available",
            "unsupported",
            "not allowed",
            "disabled",
        ]
        .iter()
        .any(|p| message.contains(p))
            && message.contains("method")
}

/// A block of `eth_simulateV1`'s answer: its base fee and its calls.
#[derive(Debug, Deserialize)]
struct SimulatedCalls {
    #[serde(rename = "baseFeePerGas", default)]
    base_fee_per_gas: Option<U256>,
    calls: Vec<SimCallResult>,
}

/// A write to simulate, as it will be signed.
#[derive(Debug, Clone, Copy)]
pub struct Signing<'a> {
    /// The wallet.
    pub from: Address,
    /// The recipient or contract.
    pub to: Address,
    /// The coin sent.
    pub value: U256,
    /// The calldata.
    pub input: &'a Bytes,
    /// The gas limit it is signed with.
    pub gas: u64,
    /// The fees it is signed with.
    pub fees: Fees,
}

impl Signing<'_> {
    pub(super) fn request(&self) -> TransactionRequest {
        TransactionRequest::default()
            .from(self.from)
            .to(self.to)
            .value(self.value)
            .input(self.input.clone().into())
            .gas_limit(self.gas)
            .max_fee_per_gas(self.fees.max_fee_per_gas)
            .max_priority_fee_per_gas(self.fees.max_priority_fee_per_gas)
    }
}

impl EvmClient {
    /// Simulates `write` on the pending block, reading the wallet's coin and `watch`'s
    /// tokens and allowances around it when `watch` is given (and then every allowance its
    /// `Approval`s name). A revert is SEND_FAILED with the node's reason, a shortfall
    /// INSUFFICIENT_FUNDS; nothing has been signed at this point.
    pub async fn simulate(
        &self,
        write: Signing<'_>,
        watch: Option<&Watch>,
    ) -> Result<Simulation, ChainError> {
        loop {
            let method = self.simulation.current();
            let ran = match method {
                Method::SimulateV1 => self.simulate_watched(write, watch).await,
                Method::TraceCall => self.trace_call(write.request()).await,
                Method::Neither => {
                    return Ok(Simulation::Unavailable(
                        "the node has neither eth_simulateV1 nor debug_traceCall".to_owned(),
                    ));
                }
            };
            match ran {
                Err(RpcError::ErrorResp(e)) if no_such_method(e.code, &e.message) => {
                    tracing::info!(?method, error = %e.message, "the node lacks a simulation method");
                    self.simulation.lacks(method);
                }
                Err(RpcError::ErrorResp(e)) => return Err(would_fail(&e)),
                Err(e) => return Err(rpc_failed("simulate the transaction", e)),
                Ok(simulation) => return simulation,
            }
        }
    }

    /// `eth_simulateV1` of `write` with the reads of `watch`; again with the allowances
    /// its `Approval`s name, when it names any.
    async fn simulate_watched(
        &self,
        write: Signing<'_>,
        watch: Option<&Watch>,
    ) -> Result<Result<Simulation, ChainError>, RpcError<TransportErrorKind>> {
        let Some(watch) = watch else {
            return self.simulate_v1(write, None).await;
        };
        let first = self.simulate_v1(write, Some(watch)).await?;
        let Ok(Simulation::Ran { logs, .. }) = &first else {
            return Ok(first);
        };
        let mut more = watch.clone();
        for pair in approvals_of(write.from, logs) {
            if !more.allowances.contains(&pair) {
                more.allowances.push(pair);
            }
        }
        if more.allowances.len() == watch.allowances.len() {
            return Ok(first);
        }
        self.simulate_v1(write, Some(&more)).await
    }

    async fn simulate_v1(
        &self,
        write: Signing<'_>,
        watch: Option<&Watch>,
    ) -> Result<Result<Simulation, ChainError>, RpcError<TransportErrorKind>> {
        let block = match watch {
            Some(watch) => SimBlock::default()
                .with_state_overrides(Watch::overrides())
                .extend_calls(watch.around(write.from, write.fees, write.request())),
            None => SimBlock::default().call(write.request()),
        };
        let mut payload = SimulatePayload::default()
            .extend(block)
            .with_trace_transfers();
        payload.validation = true;
        let blocks: Vec<SimulatedCalls> = timeout(self.provider.raw_request(
            "eth_simulateV1".into(),
            (payload, BlockNumberOrTag::Pending),
        ))
        .await?;
        let Some(block) = blocks.into_iter().next() else {
            return Ok(Err(no_call()));
        };
        let at = watch.map_or(0, Watch::count);
        let reads = watch.map(|w| {
            w.read(
                &block.calls,
                effective_price(write.fees, block.base_fee_per_gas),
            )
        });
        let Some(result) = block.calls.into_iter().nth(at) else {
            return Ok(Err(no_call()));
        };
        if !result.status {
            let why = result
                .error
                .map(|e| e.message)
                .unwrap_or_else(|| "execution reverted".to_owned());
            return Ok(Err(reverted(&why, &result.return_data)));
        }
        let logs = result
            .logs
            .into_iter()
            .map(|l| Log {
                address: l.inner.address,
                topics: l.inner.data.topics().to_vec(),
                data: l.inner.data.data,
            })
            .collect();
        Ok(Ok(Simulation::Ran {
            output: result.return_data,
            logs,
            reads,
        }))
    }

    async fn trace_call(
        &self,
        call: TransactionRequest,
    ) -> Result<Result<Simulation, ChainError>, RpcError<TransportErrorKind>> {
        let tracer = GethDebugTracingOptions::call_tracer(CallConfig {
            only_top_call: Some(false),
            with_log: Some(true),
        });
        let root: CallFrame = timeout(self.provider.raw_request(
            "debug_traceCall".into(),
            (
                call,
                BlockNumberOrTag::Latest,
                GethDebugTracingCallOptions::new(tracer),
            ),
        ))
        .await?;
        if let Some(error) = &root.error {
            let why = root.revert_reason.as_deref().unwrap_or(error);
            return Ok(Err(reverted(
                why,
                root.output.as_ref().unwrap_or(&Bytes::new()),
            )));
        }
        let mut logs = Vec::new();
        frame_logs(&root, &mut logs);
        Ok(Ok(Simulation::Ran {
            output: root.output.clone().unwrap_or_default(),
            logs,
            reads: None,
        }))
    }
}

fn no_call() -> ChainError {
    rpc_failed(
        "simulate the transaction",
        "eth_simulateV1 answered without the call",
    )
}

/// Every (token, spender) an ERC-20 `Approval` of `wallet` in `logs` names, each once.
fn approvals_of(wallet: Address, logs: &[Log]) -> Vec<(Address, Address)> {
    let mut pairs = Vec::new();
    for log in logs {
        if log.topics.len() == 3
            && log.topics[0] == Erc20::Approval::SIGNATURE_HASH
            && log.topics[1] == wallet.into_word()
        {
            let pair = (log.address, Address::from_word(log.topics[2]));
            if !pairs.contains(&pair) {
                pairs.push(pair);
            }
        }
    }
    pairs
}

pub(super) async fn timeout<T>(
    call: impl Future<Output = Result<T, RpcError<TransportErrorKind>>>,
) -> Result<T, RpcError<TransportErrorKind>> {
    tokio::time::timeout(RPC_TIMEOUT, call)
        .await
        .unwrap_or_else(|_| Err(TransportErrorKind::custom_str("timed out")))
}

/// The refusal of a call the simulation saw revert.
/// The reason is the contract's own words: bounded and cleaned (`chain_text`), as is the
/// data shown.
fn reverted(why: &str, data: &Bytes) -> ChainError {
    use walletops_domain::{MESSAGE_CHARS, chain_text};
    ChainError::WouldFail(format!(
        "the transaction would fail: {}{}",
        chain_text(why, MESSAGE_CHARS),
        if data.is_empty() {
            String::new()
        } else {
            format!(
                " (revert data {})",
                chain_text(&data.to_string(), MESSAGE_CHARS)
            )
        }
    ))
}

/// The logs of call frame `frame` and its children, in the order they happened, with a
/// `traceTransfers`-style log for each move of value (geth's rule: not in a failed frame,
/// not by `DELEGATECALL` or `CALLCODE`, which keep the caller's value).
fn frame_logs(frame: &CallFrame, logs: &mut Vec<Log>) {
    if frame.error.is_some() {
        return;
    }
    if let (Some(value), Some(to)) = (frame.value, frame.to)
        && !value.is_zero()
        && !matches!(frame.typ.as_str(), "DELEGATECALL" | "CALLCODE")
    {
        logs.push(Log {
            address: NATIVE_TRANSFERS,
            topics: vec![
                Erc20::Transfer::SIGNATURE_HASH,
                B256::left_padding_from(frame.from.as_slice()),
                B256::left_padding_from(to.as_slice()),
            ],
            data: value.to_be_bytes::<32>().to_vec().into(),
        });
    }
    // A log's `position` counts the child calls made before it.
    let mut own = frame.logs.iter().peekable();
    for (i, child) in frame.calls.iter().enumerate() {
        while let Some(log) = own.next_if(|l| l.position.is_some_and(|p| p <= i as u64)) {
            logs.extend(log_of(log));
        }
        frame_logs(child, logs);
    }
    logs.extend(own.filter_map(log_of));
}

fn log_of(log: &alloy::rpc::types::trace::geth::CallLogFrame) -> Option<Log> {
    Some(Log {
        address: log.address?,
        topics: log.topics.clone().unwrap_or_default(),
        data: log.data.clone().unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_without_a_method_says_so_in_several_ways() {
        assert!(no_such_method(-32601, "whatever"));
        assert!(no_such_method(
            -32000,
            "the method eth_simulateV1 does not exist/is not available"
        ));
        assert!(no_such_method(-32004, "Method not supported"));
        assert!(!no_such_method(3, "execution reverted"));
        assert!(!no_such_method(
            -38014,
            "insufficient funds for gas * price + value"
        ));
    }

    #[test]
    fn a_node_found_without_either_method_is_asked_again_later() {
        let methods = Methods::default();
        assert_eq!(methods.current(), Method::SimulateV1);
        methods.lacks(Method::SimulateV1);
        assert_eq!(methods.current(), Method::TraceCall);
        methods.lacks(Method::TraceCall);
        assert_eq!(methods.current(), Method::Neither);
        *methods.0.lock().unwrap() = (Method::Neither, Instant::now() - RECHECK);
        assert_eq!(methods.current(), Method::SimulateV1);
    }

    #[test]
    fn value_in_trace_frames_becomes_native_transfer_logs() {
        let (wallet, relay, payee) = (
            Address::repeat_byte(1),
            Address::repeat_byte(2),
            Address::repeat_byte(3),
        );
        let frame: CallFrame = serde_json::from_value(serde_json::json!({
            "type": "CALL", "from": wallet, "to": relay, "value": "0x64", "input": "0x",
            "gas": "0x0", "gasUsed": "0x0",
            "calls": [
                {"type": "CALL", "from": relay, "to": payee, "value": "0x28", "input": "0x", "gas": "0x0", "gasUsed": "0x0"},
                {"type": "DELEGATECALL", "from": relay, "to": payee, "value": "0x28", "input": "0x", "gas": "0x0", "gasUsed": "0x0"},
                {"type": "CALL", "from": relay, "to": payee, "value": "0x5", "error": "execution reverted", "input": "0x", "gas": "0x0", "gasUsed": "0x0"}
            ]
        }))
        .unwrap();
        let mut logs = Vec::new();
        frame_logs(&frame, &mut logs);
        let effects = crate::effects::evm::effects_of(wallet, &logs);
        assert_eq!(
            logs.len(),
            2,
            "the root's and the first child's; not the delegate's nor the failed one's"
        );
        assert_eq!(
            effects.outflow_of(walletops_domain::Asset::Native),
            U256::from(100)
        );
    }
}
