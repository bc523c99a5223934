//! Wallets: listing the caller's wallets, resolving the wallet a request acts on (the
//! caller's default for the chain family when none is named) with its ownership check, and
//! creating wallets whose keys the keystore generates.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::{
    chains::ChainFamily,
    error::{Result, WalletOpsError},
    signer::Keystore,
    store::{NewWallet, Store, WalletFilter},
};

/// A custodial wallet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wallet {
    /// Wallet id.
    pub id: Uuid,
    /// Owner.
    pub user_id: Uuid,
    /// Chain family.
    pub family: ChainFamily,
    /// Canonical address.
    pub address: String,
    /// Provider kind, e.g. `embedded`.
    pub provider_type: String,
    /// Client integration, e.g. `walletops`.
    pub client_type: String,
    /// The provider's id for the wallet.
    pub provider_wallet_id: Option<String>,
    /// The owner's default for its family.
    pub is_default: bool,
    /// Delegated to the server signer.
    pub automation_enabled: bool,
    /// Linked to the signing provider.
    pub linked: bool,
    /// When it was made.
    pub created_at: DateTime<Utc>,
}

/// A wallet that passed the ownership, link and delegation checks of a write: the only kind
/// the signer accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DelegatedWallet(Wallet);

impl DelegatedWallet {
    /// The wallet.
    pub fn wallet(&self) -> &Wallet {
        &self.0
    }
}

/// Wallet operations.
#[derive(Debug, Clone)]
pub struct Wallets {
    store: Store,
    keystore: Arc<Keystore>,
}

impl Wallets {
    /// Wallets over `store`, with keys from `keystore`.
    pub fn new(store: Store, keystore: Arc<Keystore>) -> Self {
        Self { store, keystore }
    }

    /// `user_id`'s wallets that pass `filter`, oldest first.
    pub async fn list(&self, user_id: Uuid, filter: WalletFilter) -> Result<Vec<Wallet>> {
        self.store.list_wallets(user_id, filter).await
    }

    /// The wallet of `family` a request of `user_id` acts on: the one at `address` (request
    /// field `field`), which must be the caller's, or the caller's default for the family.
    /// A malformed address is `INVALID_INPUT`, an unknown one `WALLET_NOT_FOUND`, another
    /// user's `FORBIDDEN`.
    pub async fn resolve_owned(
        &self,
        user_id: Uuid,
        family: ChainFamily,
        address: Option<&str>,
        field: &str,
    ) -> Result<Wallet> {
        match address {
            Some(raw) => {
                let address = family
                    .parse_address(raw)
                    .map_err(|e| WalletOpsError::invalid(field, e))?;
                let wallet = self
                    .store
                    .find_wallet(family, address.as_str())
                    .await?
                    .ok_or_else(|| {
                        WalletOpsError::WalletNotFound(format!("{field}: no wallet {address}"))
                    })?;
                if wallet.user_id != user_id {
                    return Err(WalletOpsError::Forbidden(format!(
                        "{field}: wallet {address} belongs to another user"
                    )));
                }
                Ok(wallet)
            }
            None => self
                .store
                .list_wallets(
                    user_id,
                    WalletFilter {
                        family: Some(family),
                        default_only: true,
                        automation_only: false,
                    },
                )
                .await?
                .into_iter()
                .next()
                .ok_or_else(|| {
                    WalletOpsError::WalletNotFound(format!(
                        "you have no default {family} wallet; name one with `{field}`"
                    ))
                }),
        }
    }

    /// The wallet a write of `user_id` acts on, as `resolve_owned`, which must also be linked
    /// to the signing provider (`USER_NOT_LINKED`) and delegated to the server signer
    /// (`WALLET_NOT_DELEGATED`). Only a `DelegatedWallet` can be signed for.
    pub async fn resolve_delegated(
        &self,
        user_id: Uuid,
        family: ChainFamily,
        address: Option<&str>,
        field: &str,
    ) -> Result<DelegatedWallet> {
        let wallet = self.resolve_owned(user_id, family, address, field).await?;
        if !wallet.linked {
            return Err(WalletOpsError::UserNotLinked(format!(
                "wallet {} is not linked to the signing provider",
                wallet.address
            )));
        }
        if !wallet.automation_enabled {
            return Err(WalletOpsError::WalletNotDelegated(format!(
                "wallet {} is not delegated to the server signer",
                wallet.address
            )));
        }
        Ok(DelegatedWallet(wallet))
    }

    /// Wallet `id` if it is still linked and delegated, for the monitor's maintenance of a
    /// transaction the wallet's owner submitted (replacing it, filling its nonce).
    pub async fn delegated_by_id(&self, id: Uuid) -> Result<DelegatedWallet> {
        let wallet = self
            .store
            .wallet_by_id(id)
            .await?
            .ok_or_else(|| WalletOpsError::WalletNotFound(format!("no wallet {id}")))?;
        if !wallet.linked || !wallet.automation_enabled {
            return Err(WalletOpsError::WalletNotDelegated(format!(
                "wallet {} is no longer delegated to the server signer",
                wallet.address
            )));
        }
        Ok(DelegatedWallet(wallet))
    }

    /// Binds the database to the keystore's master key, or checks that it is bound to it
    /// (see `Keystore::bind_to`): before the first key is sealed, and when a core starts.
    pub async fn bind_keystore(&self) -> anyhow::Result<()> {
        self.keystore.bind_to(&self.store).await
    }

    /// Generates a wallet of `family` for `user_id`, delegated to the server signer. The
    /// first wallet of a family becomes the default; `make_default` makes any one so.
    pub async fn create(
        &self,
        user_id: Uuid,
        family: ChainFamily,
        make_default: bool,
    ) -> Result<Wallet> {
        self.bind_keystore()
            .await
            .map_err(WalletOpsError::Internal)?;
        let (address, key) = self
            .keystore
            .generate(family)
            .map_err(WalletOpsError::Internal)?;
        self.store
            .insert_wallet(NewWallet {
                user_id,
                family,
                address,
                make_default,
                key,
            })
            .await
    }

    /// Changes the wallet at `address` (any family): `make_default` (only `true` is
    /// meaningful) and delegation to the server signer.
    pub async fn update(
        &self,
        address: &str,
        make_default: Option<bool>,
        automation_enabled: Option<bool>,
    ) -> Result<Wallet> {
        let canonical = [ChainFamily::Evm, ChainFamily::Solana]
            .into_iter()
            .find_map(|f| f.parse_address(address).ok())
            .ok_or_else(|| {
                WalletOpsError::invalid("address", "must be an EVM or Solana address")
            })?;
        let wallet = self
            .store
            .find_wallet(canonical.family(), canonical.as_str())
            .await?
            .ok_or_else(|| WalletOpsError::WalletNotFound(format!("no wallet {canonical}")))?;
        if make_default == Some(false) {
            return Err(WalletOpsError::invalid(
                "makeDefault",
                "only true is accepted: make another wallet the default instead",
            ));
        }
        if make_default == Some(true) {
            self.store.make_default_wallet(&wallet).await?;
        }
        if let Some(enabled) = automation_enabled {
            self.store.set_wallet_automation(&wallet, enabled).await?;
        }
        self.store
            .wallet_by_id(wallet.id)
            .await?
            .ok_or_else(|| WalletOpsError::WalletNotFound(format!("no wallet {canonical}")))
    }
}
