//! The contract's error body for every code reachable without chain work, over REST and gRPC,
//! and the order of the checks: authentication before anything else, then input, then the
//! wallet's ownership and delegation.
//!
//! This module holds what the tests share; each file below tests one concern.

mod access;
mod grpc;
mod idempotency;
mod input;
mod slow_clients;

use serde_json::json;
use walletops_tests::{Options, Reply};

const SOME_EVM: &str = "0x1111111111111111111111111111111111111111";

/// Chain `base` pointed at a port where nothing listens, with a provider's API key in the
/// URL: requests that get as far as the node fail at once with PROVIDER_RPC_ERROR.
fn dead_base_node() -> Options {
    Options::with_config(format!(
        "[chains.base]\nrpc_url = \"http://127.0.0.1:1/v2/{PROVIDER_KEY}\"\n"
    ))
}

/// The API key in `dead_base_node`'s URL, which no answer may show.
const PROVIDER_KEY: &str = "provider-api-key-4f1c";

/// Asserts `reply` is a 502 PROVIDER_RPC_ERROR that does not show the node's URL.
fn assert_node_failed(reply: Reply) -> anyhow::Result<()> {
    reply.assert_error(502, "PROVIDER_RPC_ERROR")?;
    anyhow::ensure!(!reply.text.contains(PROVIDER_KEY), "{}", reply.text);
    Ok(())
}

fn send_body(chain: &str) -> serde_json::Value {
    json!({"chain": chain, "to": SOME_EVM, "asset": "native", "amount": "1000"})
}
