//! Key policies as the owner sets and reads them: each rule (parsed for its chain in
//! `requests::limits`) added to or removed from a key found among the owner's. What the
//! rules allow is judged in `policy`.

use uuid::Uuid;
use walletops_domain::{Allowed, PolicyRule};

use super::{Limits, may_set};
use crate::{
    auth::Caller,
    error::{Result, WalletOpsError},
};
use walletops_chains::Chain;

impl Limits {
    /// The rule `allowed` on `chain` of `user_id`'s key `id_or_prefix`.
    async fn owned_rule(
        &self,
        user_id: Uuid,
        id_or_prefix: &str,
        chain: &Chain,
        allowed: Allowed,
    ) -> Result<PolicyRule> {
        let key = self.owned(user_id, id_or_prefix).await?;
        Ok(PolicyRule {
            key_id: key.id,
            chain: chain.slug().to_owned(),
            allowed,
        })
    }

    /// Adds `allowed` on `chain` to the policy of `user_id`'s key `id_or_prefix`.
    pub async fn allow(
        &self,
        user_id: Uuid,
        id_or_prefix: &str,
        chain: &Chain,
        allowed: Allowed,
    ) -> Result<PolicyRule> {
        let rule = self
            .owned_rule(user_id, id_or_prefix, chain, allowed)
            .await?;
        self.store.add_policy_rule(&rule).await?;
        Ok(rule)
    }

    /// Removes `allowed` on `chain` from the policy of `user_id`'s key `id_or_prefix`.
    pub async fn disallow(
        &self,
        user_id: Uuid,
        id_or_prefix: &str,
        chain: &Chain,
        allowed: Allowed,
    ) -> Result<()> {
        let rule = self
            .owned_rule(user_id, id_or_prefix, chain, allowed)
            .await?;
        if self.store.remove_policy_rule(&rule).await? {
            Ok(())
        } else {
            Err(WalletOpsError::NotFound(format!(
                "the key's policy has no rule {rule}"
            )))
        }
    }

    /// `allow` for `caller`, if it may change keys' limits and policies (`may_set`).
    pub async fn allow_as(
        &self,
        caller: &Caller,
        id_or_prefix: &str,
        chain: &Chain,
        allowed: Allowed,
    ) -> Result<PolicyRule> {
        may_set(caller)?;
        self.allow(caller.user_id, id_or_prefix, chain, allowed)
            .await
    }

    /// `disallow` for `caller`, if it may change keys' limits and policies (`may_set`).
    pub async fn disallow_as(
        &self,
        caller: &Caller,
        id_or_prefix: &str,
        chain: &Chain,
        allowed: Allowed,
    ) -> Result<()> {
        may_set(caller)?;
        self.disallow(caller.user_id, id_or_prefix, chain, allowed)
            .await
    }

    /// The policy of key `key_id`.
    pub async fn rules_of(&self, key_id: Uuid) -> Result<Vec<PolicyRule>> {
        Ok(self.store.policy_rules(key_id).await?)
    }
}
