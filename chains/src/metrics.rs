//! The metrics the chain clients record themselves; the core describes them with the rest
//! (`walletops-core`'s `metrics.rs`).

use std::time::Duration;

use metrics::{counter, histogram};

/// Calls to chain nodes, by `chain`, JSON-RPC `method` (`batch` for several) and `outcome`.
pub const RPC_CALLS: &str = "walletops_chain_rpc_calls_total";
/// How long calls to chain nodes took, by `chain` and `method`.
pub const RPC_SECONDS: &str = "walletops_chain_rpc_duration_seconds";

/// A call to a node of `chain` for `method` ended with `outcome` (`ok`, `error`,
/// `timeout`) after `took`.
pub(crate) fn rpc_call(chain: &str, method: &str, outcome: &'static str, took: Duration) {
    let (chain, method) = (chain.to_owned(), method.to_owned());
    counter!(RPC_CALLS, "chain" => chain.clone(), "method" => method.clone(), "outcome" => outcome)
        .increment(1);
    histogram!(RPC_SECONDS, "chain" => chain, "method" => method).record(took.as_secs_f64());
}
