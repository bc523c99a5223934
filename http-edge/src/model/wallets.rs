//! `GET /wallets`: its query and the caller's wallets.

use serde::Serialize;
use utoipa::{IntoParams, ToSchema};
use walletops_proto::v1 as pb;

/// A chain family.
#[derive(ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)]
pub(crate) enum ChainType {
    Ethereum,
    Solana,
}

/// Query of `GET /wallets`.
#[derive(Debug, IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // Documents the query; the handler reads it through `QueryParams`.
pub(crate) struct ListWalletsQuery {
    /// Chain family: `ethereum` or `solana`.
    #[param(value_type = Option<ChainType>, inline)]
    chain: Option<String>,
    /// Only default wallets.
    #[param(rename = "defaultOnly")]
    default_only: Option<bool>,
    /// Only wallets with automation enabled.
    #[param(rename = "automationOnly")]
    automation_only: Option<bool>,
}

/// A wallet of the caller.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WalletJson {
    /// Wallet address.
    pub(crate) address: String,
    /// `ethereum` or `solana`.
    pub(crate) chain_type: String,
    /// Default wallet for its chain family.
    pub(crate) is_default: bool,
    /// Delegated to the server signer.
    pub(crate) automation_enabled: bool,
    /// Wallet provider kind.
    pub(crate) provider_type: String,
    /// Wallet client integration.
    pub(crate) client_type: String,
}

/// Response of `GET /wallets`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct WalletsJson {
    /// The caller's wallets that match the filters.
    pub(crate) wallets: Vec<WalletJson>,
}

impl From<pb::ListWalletsResponse> for WalletsJson {
    fn from(r: pb::ListWalletsResponse) -> Self {
        Self {
            wallets: r
                .wallets
                .into_iter()
                .map(|w| WalletJson {
                    address: w.address,
                    chain_type: w.chain_type,
                    is_default: w.is_default,
                    automation_enabled: w.automation_enabled,
                    provider_type: w.provider_type,
                    client_type: w.client_type,
                })
                .collect(),
        }
    }
}
