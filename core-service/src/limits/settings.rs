//! Spend limits as the owner sets and reads them (parsed for their chain in
//! `requests::limits`), on a key found among the owner's.

use uuid::Uuid;

use super::{BUDGET_WINDOW, Limits, may_set};
use crate::auth::Caller;
use crate::error::{Result, WalletOpsError};
use alloy::primitives::U256;
use walletops_chains::Chain;
use walletops_domain::{ApiKey, SpendLimit, SpendStanding};

/// A limit to set, parsed for its chain (`requests::limits`): `None` for no such limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewLimit {
    /// The asset as limits name it: `native`, `fees`, `gas`, a token address or a mint.
    pub asset: String,
    /// The most one write may move, in base units.
    pub max_per_transaction: Option<U256>,
    /// The most a rolling 24 hours may move, in base units.
    pub daily_budget: Option<U256>,
    /// Above this, in base units, a write waits for a person's approval.
    pub approval_above: Option<U256>,
}

impl Limits {
    /// `user_id`'s key `id_or_prefix`.
    pub async fn owned(&self, user_id: Uuid, id_or_prefix: &str) -> Result<ApiKey> {
        let wanted = id_or_prefix.trim();
        self.store
            .list_api_keys(user_id)
            .await?
            .into_iter()
            .find(|k| k.id.to_string() == wanted || k.prefix == wanted)
            .ok_or_else(|| WalletOpsError::NotFound("no such API key".to_owned()))
    }

    /// Sets `limit` on `chain` for `user_id`'s key `id_or_prefix`, replacing any on its
    /// asset.
    pub async fn set(
        &self,
        user_id: Uuid,
        id_or_prefix: &str,
        chain: &Chain,
        limit: NewLimit,
    ) -> Result<SpendLimit> {
        let key = self.owned(user_id, id_or_prefix).await?;
        let limit = SpendLimit {
            key_id: key.id,
            chain: chain.slug().to_owned(),
            asset: limit.asset,
            max_per_transaction: limit.max_per_transaction,
            daily_budget: limit.daily_budget,
            approval_above: limit.approval_above,
        };
        self.store.set_spend_limit(&limit).await?;
        Ok(limit)
    }

    /// `set` for `caller`, if it may set limits (`may_set`).
    pub async fn set_as(
        &self,
        caller: &Caller,
        id_or_prefix: &str,
        chain: &Chain,
        limit: NewLimit,
    ) -> Result<SpendLimit> {
        may_set(caller)?;
        self.set(caller.user_id, id_or_prefix, chain, limit).await
    }

    /// `remove` for `caller`, if it may set limits (`may_set`).
    pub async fn remove_as(
        &self,
        caller: &Caller,
        id_or_prefix: &str,
        chain: &Chain,
        asset: &str,
    ) -> Result<()> {
        may_set(caller)?;
        self.remove(caller.user_id, id_or_prefix, chain, asset)
            .await
    }

    /// Removes the limit of `user_id`'s key `id_or_prefix` on `asset` of `chain` (as limits
    /// name it: `requests::limits::asset`).
    pub async fn remove(
        &self,
        user_id: Uuid,
        id_or_prefix: &str,
        chain: &Chain,
        asset: &str,
    ) -> Result<()> {
        let key = self.owned(user_id, id_or_prefix).await?;
        if self
            .store
            .remove_spend_limit(key.id, chain.slug(), asset)
            .await?
        {
            Ok(())
        } else {
            Err(WalletOpsError::NotFound(format!(
                "the key has no limit on {asset} of {}",
                chain.slug()
            )))
        }
    }

    /// The limits of key `key_id`, each with what the budget's window holds against it.
    pub async fn of_key(&self, key_id: Uuid) -> Result<Vec<SpendStanding>> {
        Ok(self
            .store
            .spend_limits(key_id, crate::clock::now() - BUDGET_WINDOW)
            .await?)
    }

    /// The limits of `user_id`'s key `id_or_prefix`, each with what is spent of it.
    pub async fn of_owned_key(
        &self,
        user_id: Uuid,
        id_or_prefix: &str,
    ) -> Result<(ApiKey, Vec<SpendStanding>)> {
        let key = self.owned(user_id, id_or_prefix).await?;
        let limits = self.of_key(key.id).await?;
        Ok((key, limits))
    }
}

impl Limits {
    /// Why key line `line_id` is frozen, if it is.
    pub async fn frozen(&self, line_id: Uuid) -> Result<Option<walletops_domain::FrozenLine>> {
        Ok(self.store.frozen_line(line_id).await?)
    }

    /// Unfreezes the line of `user_id`'s key `id_or_prefix`: every key of it writes again.
    /// NOT_FOUND when the line is not frozen.
    pub async fn unfreeze(&self, user_id: Uuid, id_or_prefix: &str) -> Result<ApiKey> {
        let key = self.owned(user_id, id_or_prefix).await?;
        if !self.store.unfreeze_line(user_id, key.lineage_id).await? {
            return Err(WalletOpsError::NotFound(format!(
                "the line of key {} is not frozen",
                key.prefix
            )));
        }
        tracing::info!(key = %key.prefix, line = %key.lineage_id, "key line unfrozen");
        Ok(key)
    }

    /// `unfreeze` for `caller`, if it may set limits (`may_set`).
    pub async fn unfreeze_as(&self, caller: &Caller, id_or_prefix: &str) -> Result<ApiKey> {
        may_set(caller)?;
        self.unfreeze(caller.user_id, id_or_prefix).await
    }
}
