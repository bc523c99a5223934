//! The wallet provider (the Privy wallet API): the wallets it holds for linked users, and
//! signing with them. The provider signs; the service stores what it signed and broadcasts
//! it itself, as for local keystore wallets, so the exactly-once write path is the same.
//!
//! **Invariant:** provider credentials (the app secret, the authorization key) are sent only
//! in headers to the configured base URL, and appear in no log line, message or error.

mod auth;
pub mod config;
pub mod privy;

#[cfg(test)]
mod tests;

pub use config::ProviderConfig;
pub use privy::Privy;

use crate::{error::WalletOpsError, upstream::UpstreamError};
use walletops_domain::WalletAddress;

/// The PROVIDER_RPC_ERROR of a failed call to the provider about `wallet`: the provider's
/// own words, never its credentials, and what to do.
pub fn provider_error(wallet: &WalletAddress, err: &UpstreamError) -> WalletOpsError {
    WalletOpsError::WalletProviderError(format!(
        "the wallet provider could not sign for wallet {wallet}: {err}; nothing was signed: retry"
    ))
}
