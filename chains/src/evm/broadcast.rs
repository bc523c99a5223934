//! Broadcasting, and what a node's answer means: accepted, refused for good (and why), or
//! no verdict at all, in which case the transaction may have arrived.

use super::*;

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

/// Classifies a node's refusal by its message; node implementations agree on these phrases.
/// The message kept is bounded and cleaned (`chain_text`): a node's words are the chain's.
pub(super) fn classify(message: &str) -> Rejection {
    let message = &walletops_domain::chain_text(message, walletops_domain::MESSAGE_CHARS);
    let m = message.to_ascii_lowercase();
    if m.contains("nonce too low")
        || m.contains("nonce is too low")
        || m.contains("already been used")
    {
        Rejection::NonceTooLow(message.to_owned())
    } else if m.contains("underpriced")
        || m.contains("fee too low")
        // A fee cap under the base fee (anvil, Nethermind, Erigon refuse it where geth
        // keeps it waiting): a price to raise, never a reason to end the record.
        || m.contains("less than block base fee")
    {
        Rejection::Underpriced(message.to_owned())
    } else if m.contains("insufficient funds") || m.contains("insufficient balance") {
        Rejection::InsufficientFunds(message.to_owned())
    } else {
        Rejection::Other(message.to_owned())
    }
}

impl EvmClient {
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
            classify("max fee per gas less than block base fee"),
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
            "intrinsic gas too low",
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
}
