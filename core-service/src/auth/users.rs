//! Users, as operators manage them: made with a first key, found by id or name, listed.

use walletops_domain::{Scopes, User};
use walletops_store::Store;

use super::{ApiKeySecret, ApiKeys, Expiration};
use crate::error::{Result, WalletOpsError};

/// The users of the service.
#[derive(Debug, Clone)]
pub struct Users {
    store: Store,
    keys: ApiKeys,
}

impl Users {
    /// Users kept in `store`, their first keys made by `keys`.
    pub fn new(store: Store, keys: ApiKeys) -> Self {
        Self { store, keys }
    }

    /// Makes a user named `name` with a first key with `scopes` that never expires.
    pub async fn create(
        &self,
        name: &str,
        scopes: Scopes,
    ) -> Result<(User, walletops_domain::ApiKey, ApiKeySecret)> {
        let name =
            walletops_domain::check_name(name).map_err(|e| WalletOpsError::invalid("name", e))?;
        let user = self.store.insert_user(name).await.map_err(|e| match e {
            walletops_store::StoreError::UserNameTaken => {
                WalletOpsError::invalid("name", format!("a user named {name:?} already exists"))
            }
            e => e.into(),
        })?;
        let (key, secret) = self
            .keys
            .create(user.id, "first key", Expiration::Never, scopes, None)
            .await?;
        Ok((user, key, secret))
    }

    /// The user whose id or name is `id_or_name`.
    pub async fn find(&self, id_or_name: &str) -> Result<User> {
        self.store
            .find_user(id_or_name)
            .await?
            .ok_or_else(|| WalletOpsError::NotFound(format!("no user {id_or_name:?}")))
    }

    /// Every user, oldest first.
    pub async fn list(&self) -> Result<Vec<User>> {
        Ok(self.store.list_users().await?)
    }
}
