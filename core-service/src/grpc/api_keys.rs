//! `walletops.v1.ApiKeyService`: a caller manages the keys of its own user.

use chrono::Utc;
use tonic::{Request, Response, Status};
use walletops_proto::v1::{self as pb, api_key_service_server::ApiKeyService};

use super::convert;
use crate::{Core, auth::Expiration, domain::Scope};

/// The gRPC face of `ApiKeyService`.
#[derive(Debug, Clone)]
pub struct ApiKeyApi {
    core: Core,
}

impl ApiKeyApi {
    /// The service over `core`.
    pub fn new(core: Core) -> Self {
        Self { core }
    }
}

fn expiration(e: pb::KeyExpiration) -> Expiration {
    match e {
        pb::KeyExpiration::Unspecified | pb::KeyExpiration::Never => Expiration::Never,
        pb::KeyExpiration::SevenDays => Expiration::Days7,
        pb::KeyExpiration::ThirtyDays => Expiration::Days30,
        pb::KeyExpiration::NinetyDays => Expiration::Days90,
        pb::KeyExpiration::OneHundredEightyDays => Expiration::Days180,
        pb::KeyExpiration::OneYear => Expiration::Year1,
    }
}

#[tonic::async_trait]
impl ApiKeyService for ApiKeyApi {
    async fn create_api_key(
        &self,
        request: Request<pb::CreateApiKeyRequest>,
    ) -> Result<Response<pb::CreateApiKeyResponse>, Status> {
        let caller = self.core.admit(request.metadata(), Scope::Write).await?;
        let req = request.into_inner();
        let lifetime = pb::KeyExpiration::try_from(req.expiration).map_err(|_| {
            crate::WalletOpsError::invalid("expiration", "unknown expiration value")
        })?;
        let scopes = convert::scopes("scopes", &req.scopes)?;
        let (key, secret) = self
            .core
            .keys
            .create(
                caller.user_id,
                &req.name,
                expiration(lifetime),
                scopes,
                Some(&caller),
            )
            .await?;
        tracing::info!(prefix = %key.prefix, scopes = %key.scopes, "API key created");
        Ok(Response::new(pb::CreateApiKeyResponse {
            api_key: Some(convert::api_key(key, Utc::now())),
            secret: secret.expose().to_owned(),
        }))
    }

    async fn list_api_keys(
        &self,
        request: Request<pb::ListApiKeysRequest>,
    ) -> Result<Response<pb::ListApiKeysResponse>, Status> {
        let caller = self.core.admit(request.metadata(), Scope::Read).await?;
        let now = Utc::now();
        let keys = self.core.keys.list(caller.user_id).await?;
        Ok(Response::new(pb::ListApiKeysResponse {
            api_keys: keys.into_iter().map(|k| convert::api_key(k, now)).collect(),
        }))
    }

    async fn revoke_api_key(
        &self,
        request: Request<pb::RevokeApiKeyRequest>,
    ) -> Result<Response<pb::RevokeApiKeyResponse>, Status> {
        let caller = self.core.admit(request.metadata(), Scope::Write).await?;
        let req = request.into_inner();
        let key = self
            .core
            .keys
            .revoke(caller.user_id, &req.id, Some(&caller))
            .await?;
        tracing::info!(prefix = %key.prefix, "API key revoked");
        Ok(Response::new(pb::RevokeApiKeyResponse {
            api_key: Some(convert::api_key(key, Utc::now())),
        }))
    }

    async fn get_current_api_key(
        &self,
        request: Request<pb::GetCurrentApiKeyRequest>,
    ) -> Result<Response<pb::GetCurrentApiKeyResponse>, Status> {
        let caller = self.core.admit_any(request.metadata()).await?;
        let api_key = match &caller.credential {
            crate::auth::Credential::Key { id, .. } => self
                .core
                .keys
                .list(caller.user_id)
                .await?
                .into_iter()
                .find(|k| k.id == *id)
                .map(|k| convert::api_key(k, Utc::now())),
            _ => None,
        };
        Ok(Response::new(pb::GetCurrentApiKeyResponse {
            scopes: convert::scope_values(caller.scopes),
            api_key,
        }))
    }
}
