//! Wallets: listing the caller's wallets, resolving the wallet a request acts on (the
//! caller's default for the chain family when none is named) with its ownership check, and
//! creating wallets whose keys the keystore generates.

use std::sync::Arc;

use uuid::Uuid;

use crate::{
    domain::{
        ChainFamily, DelegatedWallet, NewWallet, NotSignable, Wallet, WalletAddress, WalletFilter,
    },
    error::{Result, WalletOpsError},
    signer::Keystore,
    store::Store,
};

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
    /// field `field`, parsed for `family`), which must be the caller's, or the caller's
    /// default for the family. An unknown one is `WALLET_NOT_FOUND`, another user's
    /// `FORBIDDEN`.
    pub async fn resolve_owned(
        &self,
        user_id: Uuid,
        family: ChainFamily,
        address: Option<&WalletAddress>,
        field: &str,
    ) -> Result<Wallet> {
        match address {
            Some(address) => {
                let wallet = self.store.find_wallet(address).await?.ok_or_else(|| {
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
        address: Option<&WalletAddress>,
        field: &str,
    ) -> Result<DelegatedWallet> {
        let wallet = self.resolve_owned(user_id, family, address, field).await?;
        DelegatedWallet::try_from(wallet).map_err(|(why, wallet)| match why {
            NotSignable::NotLinked => WalletOpsError::UserNotLinked(format!(
                "wallet {} is not linked to the signing provider",
                wallet.address
            )),
            NotSignable::NotDelegated => WalletOpsError::WalletNotDelegated(format!(
                "wallet {} is not delegated to the server signer",
                wallet.address
            )),
        })
    }

    /// Wallet `id` if it is still linked and delegated, for the monitor's maintenance of a
    /// transaction the wallet's owner submitted (replacing it, filling its nonce).
    pub async fn delegated_by_id(&self, id: Uuid) -> Result<DelegatedWallet> {
        let wallet = self
            .store
            .wallet_by_id(id)
            .await?
            .ok_or_else(|| WalletOpsError::WalletNotFound(format!("no wallet {id}")))?;
        DelegatedWallet::try_from(wallet).map_err(|(_, wallet)| {
            WalletOpsError::WalletNotDelegated(format!(
                "wallet {} is no longer delegated to the server signer",
                wallet.address
            ))
        })
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
        canonical: &WalletAddress,
        make_default: Option<bool>,
        automation_enabled: Option<bool>,
    ) -> Result<Wallet> {
        let wallet = self
            .store
            .find_wallet(canonical)
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
