//! First start: on an empty database, one user with one API key, a delegated default
//! wallet per chain family and a one-time dashboard sign-in link, so a newcomer can call
//! the API and open the dashboard at once.

use crate::{
    Core,
    auth::{ApiKeySecret, sessions::Token},
    error::Result,
};
use walletops_domain::{ChainFamily, User, Wallet};

/// Name of the user made on first start.
pub const FIRST_USER: &str = "owner";

/// What the first start made. The key's value is shown once, by the caller, and dropped.
#[derive(Debug)]
pub struct Bootstrapped {
    /// The user.
    pub user: User,
    /// Its first key's value.
    pub secret: ApiKeySecret,
    /// Its wallets: one EVM, one Solana, both default and delegated.
    pub wallets: Vec<Wallet>,
    /// A one-time link to set its dashboard password, and when it stops working.
    pub sign_in_link: (Token, chrono::DateTime<chrono::Utc>),
}

impl Core {
    /// Makes the first user, its wallets and key when no user exists, or finishes that when
    /// a first start stopped half-way (the user made, no key yet); `None` otherwise. The key
    /// comes last, so that a first start that fails before it is finished by the next one,
    /// which then shows the key. Two cores starting together over one empty PostgreSQL
    /// make one user (its name is unique) and one key (made only while the user has none,
    /// under its lock); the wallets the loser may make besides are not defaults.
    pub async fn bootstrap(&self) -> Result<Option<Bootstrapped>> {
        let user = match self.store.find_user(FIRST_USER).await? {
            Some(user) if self.keys.list(user.id).await?.is_empty() => user,
            Some(_) => return Ok(None),
            None if self.store.count_users().await? > 0 => return Ok(None),
            None => match self.store.insert_user(FIRST_USER).await {
                Ok(user) => user,
                Err(walletops_store::StoreError::UserNameTaken) => return Ok(None),
                Err(e) => return Err(e.into()),
            },
        };
        let wallets = self.create_starter_wallets(user.id).await?;
        fail::fail_point!("bootstrap-before-key", |_| Err(
            crate::error::WalletOpsError::Internal(anyhow::anyhow!(
                "stopped by the bootstrap-before-key failpoint"
            ))
        ));
        let Some((_, secret)) = self
            .keys
            .create_first(user.id, self.config.first_key_scopes)
            .await?
        else {
            return Ok(None);
        };
        let sign_in_link = self.sessions.issue_link(user.id).await?;
        Ok(Some(Bootstrapped {
            user,
            secret,
            wallets,
            sign_in_link,
        }))
    }

    /// Gives `user_id` one delegated wallet per chain family it has none of (the first of a
    /// family is its default); returns its default wallets.
    pub async fn create_starter_wallets(&self, user_id: uuid::Uuid) -> Result<Vec<Wallet>> {
        let mut wallets = Vec::new();
        for family in [ChainFamily::Evm, ChainFamily::Solana] {
            let filter = |default_only| walletops_domain::WalletFilter {
                family: Some(family),
                default_only,
                automation_only: false,
            };
            if self.wallets.list(user_id, filter(false)).await?.is_empty() {
                self.wallets
                    .create(user_id, family, false, Default::default())
                    .await?;
            }
            wallets.extend(self.wallets.list(user_id, filter(true)).await?);
        }
        Ok(wallets)
    }
}
