//! Wallets: listing the caller's wallets, resolving the wallet a request acts on (the
//! caller's default for the chain family when none is named) with its ownership check,
//! creating wallets whose keys the keystore (or the HSM) generates, and keeping the wallets of users
//! linked to the wallet provider in step with it.

use std::sync::Arc;

use uuid::Uuid;

use crate::{
    error::{Result, WalletOpsError},
    signer::{Hsm, Keystore},
};

use walletops_chains::provider::Privy;
use walletops_domain::{
    ChainFamily, Custody, DelegatedWallet, NewKey, NewWallet, NotSignable, SyncReport, User,
    Wallet, WalletAddress, WalletFilter,
};
use walletops_store::Store;

/// Wallet operations.
#[derive(Debug, Clone)]
pub struct Wallets {
    store: Store,
    keystore: Arc<Keystore>,
    provider: Option<Arc<Privy>>,
    hsm: Option<Arc<Hsm>>,
}

impl Wallets {
    /// Wallets over `store`, with keys from `keystore` and, when one is configured, the
    /// wallet provider's.
    pub fn new(
        store: Store,
        keystore: Arc<Keystore>,
        provider: Option<Arc<Privy>>,
        hsm: Option<Arc<Hsm>>,
    ) -> Self {
        Self {
            store,
            keystore,
            provider,
            hsm,
        }
    }

    /// The HSM, or SERVICE_UNAVAILABLE naming the options that would configure it.
    pub fn hsm(&self) -> Result<&Arc<Hsm>> {
        self.hsm.as_ref().ok_or_else(|| {
            WalletOpsError::ServiceUnavailable(
                "no HSM is configured: set [hsm] module, token_label and pin".to_owned(),
            )
        })
    }

    /// The provider, or SERVICE_UNAVAILABLE naming the option that would configure it.
    fn provider(&self) -> Result<&Privy> {
        self.provider.as_deref().ok_or_else(|| {
            WalletOpsError::ServiceUnavailable(
                "no wallet provider is configured: set provider.app_id and provider.app_secret"
                    .to_owned(),
            )
        })
    }

    /// Links `user` to provider user `provider_user_id` and syncs its wallets.
    pub async fn link(&self, user: &User, provider_user_id: &str) -> Result<SyncReport> {
        if provider_user_id.trim().is_empty() {
            return Err(WalletOpsError::invalid("providerUserId", "required"));
        }
        self.provider()?;
        self.store
            .link_user(user.id, provider_user_id)
            .await
            .map_err(|e| match e {
                walletops_store::StoreError::ProviderUserTaken => WalletOpsError::invalid(
                    "providerUserId",
                    format!("{provider_user_id} is linked to another user already"),
                ),
                e => e.into(),
            })?;
        let linked = User {
            provider_user_id: Some(provider_user_id.to_owned()),
            ..user.clone()
        };
        self.sync(&linked).await
    }

    /// Unlinks `user`: its provider wallets stay listed but cannot be written from.
    pub async fn unlink(&self, user: &User) -> Result<()> {
        Ok(self.store.unlink_user(user.id).await?)
    }

    /// Reads `user`'s wallets from the provider and brings its provider wallets in step.
    pub async fn sync(&self, user: &User) -> Result<SyncReport> {
        let Some(provider_user_id) = &user.provider_user_id else {
            return Err(WalletOpsError::UserNotLinked(format!(
                "user {} is not linked to the wallet provider: link it with `walletops users link`",
                user.name
            )));
        };
        let listed = self
            .provider()?
            .linked_wallets(provider_user_id)
            .await
            .map_err(|e| {
                WalletOpsError::WalletProviderError(format!(
                    "reading the wallets of {provider_user_id} from the wallet provider: {e}"
                ))
            })?;
        Ok(self
            .store
            .sync_provider_wallets(user.id, listed.as_deref())
            .await?)
    }

    /// Syncs every linked user; returns how many were synced, and the failures by user.
    pub async fn sync_all(&self) -> Result<(usize, Vec<(String, WalletOpsError)>)> {
        let users = self.store.linked_users().await?;
        let mut failed = Vec::new();
        for user in &users {
            if let Err(e) = self.sync(user).await {
                failed.push((user.name.clone(), e));
            }
        }
        Ok((users.len() - failed.len(), failed))
    }

    /// `user_id`'s wallets that pass `filter`, oldest first.
    pub async fn list(&self, user_id: Uuid, filter: WalletFilter) -> Result<Vec<Wallet>> {
        Ok(self.store.list_wallets(user_id, filter).await?)
    }

    /// The wallet of `family` a request of `user_id` acts on: the one at `address` (request
    /// field `field`, parsed for `family`), which must be the caller's, or the caller's
    /// default for the family. An unknown one is `WALLET_NOT_FOUND`, another user's
    /// `FORBIDDEN`. For a request that only reads (`reads_only`: a balance read) the wallet
    /// may be one this core holds in memory, dropped when any core changes a wallet.
    pub async fn resolve_owned(
        &self,
        user_id: Uuid,
        family: ChainFamily,
        address: Option<&WalletAddress>,
        field: &str,
        reads_only: bool,
    ) -> Result<Wallet> {
        match address {
            Some(address) => {
                let found = if reads_only {
                    self.store.find_wallet_for_read(address).await?
                } else {
                    self.store.find_wallet(address).await?
                };
                let wallet = found.ok_or_else(|| {
                    WalletOpsError::WalletNotFound(format!("{field}: no wallet {address}"))
                })?;
                if wallet.user_id != user_id {
                    return Err(WalletOpsError::Forbidden(format!(
                        "{field}: wallet {address} belongs to another user"
                    )));
                }
                Ok(wallet)
            }
            None => {
                let found = if reads_only {
                    self.store.default_wallet_for_read(user_id, family).await?
                } else {
                    self.store.default_wallet(user_id, family).await?
                };
                found.ok_or_else(|| {
                    WalletOpsError::WalletNotFound(format!(
                        "you have no default {family} wallet; name one with `{field}`"
                    ))
                })
            }
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
        let wallet = self
            .resolve_owned(user_id, family, address, field, false)
            .await?;
        let wallet = match DelegatedWallet::try_from(wallet) {
            Ok(delegated) => return Ok(delegated),
            // The user may have delegated it at the provider since the last sync: a write is
            // not refused on a stale listing.
            Err((NotSignable::NotDelegated | NotSignable::NoWalletId, wallet))
                if wallet.held_by_provider() && self.provider.is_some() =>
            {
                let user = self.store.user_by_id(user_id).await?;
                self.sync(&user).await?;
                self.store.wallet_by_id(wallet.id).await?.unwrap_or(wallet)
            }
            Err((_, wallet)) => wallet,
        };
        DelegatedWallet::try_from(wallet).map_err(|(why, wallet)| not_signable(why, &wallet))
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

    /// Re-seals every wallet key under `new`'s master key (see `Keystore::rotate`).
    pub async fn rotate_keystore(&self, new: &Keystore) -> anyhow::Result<usize> {
        self.keystore.bind_to(&self.store).await?;
        self.keystore.rotate(&self.store, new).await
    }

    /// Generates a wallet of `family` for `user_id`, delegated to the server signer, its key
    /// in `custody`. The first wallet of a family becomes the default; `make_default` makes
    /// any one so.
    pub async fn create(
        &self,
        user_id: Uuid,
        family: ChainFamily,
        make_default: bool,
        custody: Custody,
    ) -> Result<Wallet> {
        self.bind_keystore()
            .await
            .map_err(WalletOpsError::Internal)?;
        let (address, key) = match custody {
            Custody::Keystore => {
                let (address, sealed) = self
                    .keystore
                    .generate(family)
                    .map_err(WalletOpsError::Internal)?;
                (address, NewKey::Sealed(sealed))
            }
            Custody::Hsm => {
                // Labelled with the wallet's id: a key whose wallet is not stored after all
                // is found by the audit.
                let id = Uuid::now_v7();
                let address = self.hsm()?.generate(family, id.to_string()).await?;
                (address, NewKey::Hsm { id })
            }
        };
        Ok(self
            .store
            .insert_wallet(
                NewWallet {
                    user_id,
                    address,
                    make_default,
                    key,
                },
                |check| self.keystore.opens_check(check),
            )
            .await?)
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

/// The contract's answer to a write from `wallet`, which cannot be signed for `why`: what
/// is wrong, and what the user must do.
fn not_signable(why: NotSignable, wallet: &Wallet) -> WalletOpsError {
    let address = &wallet.address;
    match why {
        NotSignable::NotLinked => WalletOpsError::UserNotLinked(format!(
            "wallet {address} belongs to a user not linked to the wallet provider (or no longer known there): link the user again with `walletops users link`"
        )),
        NotSignable::NotDelegated if wallet.is_external() => {
            WalletOpsError::WalletNotDelegated(format!(
                "wallet {address} is an external {} wallet: the server can never sign for it; use an embedded wallet",
                wallet.client_type
            ))
        }
        NotSignable::NotDelegated => WalletOpsError::WalletNotDelegated(format!(
            "wallet {address} is not delegated to the server signer: delegate it in the app (or with `walletops wallets update`), then retry"
        )),
        NotSignable::NoWalletId => WalletOpsError::WalletIdRequired(format!(
            "wallet {address} is delegated, but the wallet provider gave no wallet id to sign with: have the user delegate it again in the app, then retry"
        )),
        NotSignable::Removed => WalletOpsError::WalletNotDelegated(format!(
            "wallet {address} is no longer among the user's wallets at the wallet provider: it cannot be written from"
        )),
    }
}
