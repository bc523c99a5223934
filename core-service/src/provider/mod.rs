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

use crate::{
    domain::{ChainFamily, WalletAddress},
    error::WalletOpsError,
    upstream::UpstreamError,
};

/// A wallet a provider user has linked, as the provider lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkedWallet {
    /// Its address.
    pub address: WalletAddress,
    /// The provider's server wallet id, which signing needs; absent for external wallets
    /// and, with some providers, for embedded wallets not delegated.
    pub wallet_id: Option<String>,
    /// `connector_type`: `embedded` for the provider's own wallets (the contract's
    /// `providerType`).
    pub connector_type: String,
    /// `wallet_client_type`: `privy` for the provider's own wallets (`clientType`).
    pub client_type: String,
    /// Whether the user delegated it to the server (`automationEnabled`).
    pub delegated: bool,
    /// Its HD index among the user's embedded wallets of its chain type (0: the first).
    pub wallet_index: Option<u32>,
}

/// The provider's own kind of wallet; anything else is an external wallet the user linked
/// (MetaMask, Phantom…), which the server can never sign for.
const EMBEDDED_CONNECTOR: &str = "embedded";
const PROVIDER_CLIENT: &str = "privy";

impl LinkedWallet {
    /// Its chain family.
    pub fn family(&self) -> ChainFamily {
        self.address.family()
    }

    /// Whether the provider holds its key (an embedded wallet), so the server may sign with
    /// it once it is delegated.
    pub fn is_embedded(&self) -> bool {
        self.connector_type == EMBEDDED_CONNECTOR && self.client_type == PROVIDER_CLIENT
    }

    /// Whether it is the user's default of its family: the first embedded wallet.
    pub fn is_default(&self) -> bool {
        self.is_embedded() && self.wallet_index == Some(0)
    }
}

/// The PROVIDER_RPC_ERROR of a failed call to the provider about `wallet`: the provider's
/// own words, never its credentials, and what to do.
pub fn provider_error(wallet: &WalletAddress, err: &UpstreamError) -> WalletOpsError {
    WalletOpsError::ProviderRpcError(format!(
        "the wallet provider could not sign for wallet {wallet}: {err}; nothing was stored: send the request again"
    ))
}
