//! Spend limits as the owner sets and reads them: the amounts parsed for the chain's
//! family, the asset named as limits name it, the key found among the owner's.

use chrono::Utc;
use uuid::Uuid;

use super::{BUDGET_WINDOW, Limits, may_set};
use crate::auth::Caller;
use crate::{
    chains::Chain,
    error::{Result, Violations, WalletOpsError},
};
use walletops_domain::{
    AmountKind, ApiKey, ChainFamily, FEES_ASSET, GAS_ASSET, NATIVE_ASSET, SpendLimit,
    SpendStanding, WalletAddress, asset_name, parse_amount,
};

/// The limits' name of `raw` on `chain`: `native`, or the token's address (lowercase) or
/// mint, checked for the chain's family.
pub fn limit_asset(chain: &Chain, raw: &str) -> Result<String, String> {
    let raw = raw.trim();
    if raw.eq_ignore_ascii_case(NATIVE_ASSET) {
        return Ok(NATIVE_ASSET.to_owned());
    }
    if raw.eq_ignore_ascii_case(FEES_ASSET) {
        return Ok(FEES_ASSET.to_owned());
    }
    if raw.eq_ignore_ascii_case(GAS_ASSET) {
        return Ok(GAS_ASSET.to_owned());
    }
    match raw.parse::<WalletAddress>() {
        Ok(token) if token.family() == chain.family() => Ok(asset_name(Some(token))),
        _ => Err(format!(
            "must be native, fees, gas or a token of {}: {}",
            chain.slug(),
            if chain.family() == ChainFamily::Evm {
                "0x and 40 hex digits"
            } else {
                "a base58 mint"
            }
        )),
    }
}

/// A limit as given: amounts as text, `None` for no such limit.
#[derive(Debug, Clone, Copy)]
pub struct LimitText<'a> {
    /// The asset: `native`, a token address or a mint.
    pub asset: &'a str,
    /// The most one write may move, in base units.
    pub max_per_transaction: Option<&'a str>,
    /// The most a rolling 24 hours may move, in base units.
    pub daily_budget: Option<&'a str>,
    /// Above this, in base units, a write waits for a person's approval.
    pub approval_above: Option<&'a str>,
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

    /// Sets the limit of `user_id`'s key `id_or_prefix` on `given.asset` of `chain`,
    /// replacing any; every bad field in one INVALID_INPUT.
    pub async fn set(
        &self,
        user_id: Uuid,
        id_or_prefix: &str,
        chain: &Chain,
        given: LimitText<'_>,
    ) -> Result<SpendLimit> {
        let key = self.owned(user_id, id_or_prefix).await?;
        let kind = match chain.family() {
            ChainFamily::Evm => AmountKind::Uint256,
            ChainFamily::Solana => AmountKind::U64,
        };
        let mut v = Violations::default();
        let asset = v.check("asset", limit_asset(chain, given.asset));
        let max = given
            .max_per_transaction
            .and_then(|raw| v.check("max_per_transaction", parse_amount(raw, kind)));
        let daily = given
            .daily_budget
            .and_then(|raw| v.check("daily_budget", parse_amount(raw, kind)));
        let approval_above = given
            .approval_above
            .and_then(|raw| v.check("approval_above", parse_amount(raw, kind)));
        if given.max_per_transaction.is_none()
            && given.daily_budget.is_none()
            && given.approval_above.is_none()
        {
            v.check::<()>(
                "max_per_transaction",
                Err(
                    "give a maximum per write, a daily budget, an approval threshold, or any of them"
                        .to_owned(),
                ),
            );
        }
        v.finish()?;
        let limit = SpendLimit {
            key_id: key.id,
            chain: chain.slug().to_owned(),
            asset: asset.unwrap_or_default(),
            max_per_transaction: max,
            daily_budget: daily,
            approval_above,
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
        given: LimitText<'_>,
    ) -> Result<SpendLimit> {
        may_set(caller)?;
        self.set(caller.user_id, id_or_prefix, chain, given).await
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

    /// Removes the limit of `user_id`'s key `id_or_prefix` on `asset` of `chain`.
    pub async fn remove(
        &self,
        user_id: Uuid,
        id_or_prefix: &str,
        chain: &Chain,
        asset: &str,
    ) -> Result<()> {
        let key = self.owned(user_id, id_or_prefix).await?;
        let asset = limit_asset(chain, asset).map_err(|e| WalletOpsError::invalid("asset", e))?;
        if self
            .store
            .remove_spend_limit(key.id, chain.slug(), &asset)
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
            .spend_limits(key_id, Utc::now() - BUDGET_WINDOW)
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
