//! `walletops.v1.ApiKeyService`: a caller manages the keys of its own user.

use chrono::Utc;
use tonic::{Request, Response, Status};
use walletops_proto::v1::{self as pb, api_key_service_server::ApiKeyService};

use super::convert;
use crate::{
    auth::{ApiKeys, Operation},
    balances::Units,
    limits::Limits,
    requests::{keys, limits},
};
use walletops_chains::Registry;
use walletops_domain::ApiKey;

/// The gRPC face of `ApiKeyService`: the keys, their limits, and the chains and units
/// limits are written in.
#[derive(Debug, Clone)]
pub struct ApiKeyApi {
    keys: ApiKeys,
    limits: Limits,
    chains: std::sync::Arc<Registry>,
    units: Units,
}

impl ApiKeyApi {
    /// The service over `keys` and their `limits`, on `chains`.
    pub fn new(
        keys: ApiKeys,
        limits: Limits,
        chains: std::sync::Arc<Registry>,
        units: Units,
    ) -> Self {
        Self {
            keys,
            limits,
            chains,
            units,
        }
    }
}

#[tonic::async_trait]
impl ApiKeyService for ApiKeyApi {
    async fn unfreeze_api_key(
        &self,
        request: Request<pb::UnfreezeApiKeyRequest>,
    ) -> Result<Response<pb::UnfreezeApiKeyResponse>, Status> {
        let caller = super::admission::caller(&request)?;
        let req = request.into_inner();
        let key = self.limits.unfreeze_as(&caller, &req.key_id).await?;
        Ok(Response::new(pb::UnfreezeApiKeyResponse {
            api_key: Some(self.described(key, crate::clock::now()).await?),
        }))
    }

    async fn add_policy_rule(
        &self,
        request: Request<pb::AddPolicyRuleRequest>,
    ) -> Result<Response<pb::AddPolicyRuleResponse>, Status> {
        let caller = super::admission::caller(&request)?;
        let req = request.into_inner();
        let (chain, allowed) = keys::rule(&self.chains, req.rule.as_ref())?;
        let rule = self
            .limits
            .allow_as(&caller, &req.key_id, chain, allowed)
            .await?;
        tracing::info!(%rule, "policy rule added");
        Ok(Response::new(pb::AddPolicyRuleResponse {
            api_key: Some(self.key_with_limits(caller.user_id, &req.key_id).await?),
        }))
    }

    async fn remove_policy_rule(
        &self,
        request: Request<pb::RemovePolicyRuleRequest>,
    ) -> Result<Response<pb::RemovePolicyRuleResponse>, Status> {
        let caller = super::admission::caller(&request)?;
        let req = request.into_inner();
        let (chain, allowed) = keys::rule(&self.chains, req.rule.as_ref())?;
        self.limits
            .disallow_as(&caller, &req.key_id, chain, allowed)
            .await?;
        tracing::info!(key = %req.key_id, "policy rule removed");
        Ok(Response::new(pb::RemovePolicyRuleResponse {
            api_key: Some(self.key_with_limits(caller.user_id, &req.key_id).await?),
        }))
    }

    async fn create_api_key(
        &self,
        request: Request<pb::CreateApiKeyRequest>,
    ) -> Result<Response<pb::CreateApiKeyResponse>, Status> {
        let caller = super::admission::caller(&request)?;
        let req = request.into_inner();
        let lifetime = keys::expiration(req.expiration)?;
        // Made with a key, none asked: the maker's own, which is all it may give.
        let scopes = match caller.key_id() {
            Some(_) if req.scopes.is_empty() => caller.scopes,
            _ => keys::scopes("scopes", &req.scopes)?,
        };
        let (key, secret) = self
            .keys
            .create(caller.user_id, &req.name, lifetime, scopes, Some(&caller))
            .await?;
        tracing::info!(prefix = %key.prefix, scopes = %key.scopes, "API key created");
        Ok(Response::new(pb::CreateApiKeyResponse {
            api_key: Some(convert::api_key(key, crate::clock::now())),
            secret: secret.expose().to_owned(),
        }))
    }

    async fn list_api_keys(
        &self,
        request: Request<pb::ListApiKeysRequest>,
    ) -> Result<Response<pb::ListApiKeysResponse>, Status> {
        let caller = super::admission::caller(&request)?;
        let now = crate::clock::now();
        let keys = self.keys.list(caller.user_id).await?;
        let mut api_keys = Vec::with_capacity(keys.len());
        for key in keys {
            api_keys.push(self.described(key, now).await?);
        }
        Ok(Response::new(pb::ListApiKeysResponse { api_keys }))
    }

    async fn revoke_api_key(
        &self,
        request: Request<pb::RevokeApiKeyRequest>,
    ) -> Result<Response<pb::RevokeApiKeyResponse>, Status> {
        let caller = super::admission::caller(&request)?;
        let req = request.into_inner();
        let key = self
            .keys
            .revoke(caller.user_id, &req.id, Some(&caller))
            .await?;
        tracing::info!(prefix = %key.prefix, "API key revoked");
        Ok(Response::new(pb::RevokeApiKeyResponse {
            api_key: Some(convert::api_key(key, crate::clock::now())),
        }))
    }

    async fn get_current_api_key(
        &self,
        request: Request<pb::GetCurrentApiKeyRequest>,
    ) -> Result<Response<pb::GetCurrentApiKeyResponse>, Status> {
        let caller = super::admission::caller(&request)?;
        let api_key = self.keys.current(&caller).await?;
        Ok(Response::new(pb::GetCurrentApiKeyResponse {
            scopes: convert::scope_values(caller.scopes),
            api_key: api_key.map(|k| convert::api_key(k, crate::clock::now())),
            operations: Operation::allowed(caller.scopes)
                .into_iter()
                .map(str::to_owned)
                .collect(),
        }))
    }

    async fn set_spend_limit(
        &self,
        request: Request<pb::SetSpendLimitRequest>,
    ) -> Result<Response<pb::SetSpendLimitResponse>, Status> {
        let caller = super::admission::caller(&request)?;
        let req = request.into_inner();
        let chain = crate::requests::chain(&self.chains, &req.chain)?;
        let given = limits::LimitText {
            asset: &req.asset,
            max_per_transaction: req.max_per_transaction.as_deref(),
            daily_budget: req.daily_budget.as_deref(),
            approval_above: req.approval_above.as_deref(),
        };
        let limit = self
            .limits
            .set_as(&caller, &req.key_id, chain, limits::limit(chain, given)?)
            .await?;
        tracing::info!(chain = %limit.chain, asset = %limit.asset, "spend limit set");
        Ok(Response::new(pb::SetSpendLimitResponse {
            api_key: Some(self.key_with_limits(caller.user_id, &req.key_id).await?),
        }))
    }

    async fn remove_spend_limit(
        &self,
        request: Request<pb::RemoveSpendLimitRequest>,
    ) -> Result<Response<pb::RemoveSpendLimitResponse>, Status> {
        let caller = super::admission::caller(&request)?;
        let req = request.into_inner();
        let chain = crate::requests::chain(&self.chains, &req.chain)?;
        self.limits
            .remove_as(
                &caller,
                &req.key_id,
                chain,
                &limits::asset(chain, &req.asset)?,
            )
            .await?;
        Ok(Response::new(pb::RemoveSpendLimitResponse {
            api_key: Some(self.key_with_limits(caller.user_id, &req.key_id).await?),
        }))
    }
}

impl ApiKeyApi {
    /// `key` with its limits and, if it has ever been limited, its policy.
    async fn described(
        &self,
        key: ApiKey,
        now: chrono::DateTime<Utc>,
    ) -> crate::error::Result<pb::ApiKey> {
        let limits = self.limits.of_key(key.id).await?;
        let (rules, frozen) = if key.limited {
            (
                self.limits.rules_of(key.id).await?,
                self.limits.frozen(key.lineage_id).await?,
            )
        } else {
            (Vec::new(), None)
        };
        let described = convert::with_limits(convert::api_key(key, now), limits, |chain, asset| {
            self.units.of(chain, asset)
        });
        let mut described = convert::with_rules(described, rules);
        if let Some(frozen) = frozen {
            described.frozen_at = Some(convert::timestamp(frozen.frozen_at));
            described.frozen_reason = Some(frozen.reason);
        }
        Ok(described)
    }

    /// `user_id`'s key `id_or_prefix`, with its limits and policy.
    async fn key_with_limits(
        &self,
        user_id: uuid::Uuid,
        id_or_prefix: &str,
    ) -> crate::error::Result<pb::ApiKey> {
        let key = self.limits.owned(user_id, id_or_prefix).await?;
        self.described(key, crate::clock::now()).await
    }
}
