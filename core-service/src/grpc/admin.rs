//! `walletops.v1.AdminService`: users and wallets, for operators. Guarded by the configured
//! admin token, compared in constant time, wrong tokens throttled per client; with none
//! configured every call is refused.

use chrono::Utc;
use subtle::ConstantTimeEq;
use tonic::{Request, Response, Status};
use walletops_proto::{
    ADMIN_TOKEN_HEADER,
    v1::{self as pb, admin_service_server::AdminService},
};

use super::convert;
use crate::{Core, error::WalletOpsError};
use walletops_domain::ChainFamily;

/// The gRPC face of `AdminService`.
#[derive(Debug, Clone)]
pub struct AdminApi {
    core: Core,
}

impl AdminApi {
    /// The service over `core`.
    pub fn new(core: Core) -> Self {
        Self { core }
    }

    /// Checks the call's admin token. Wrong tokens are counted per client like failed API
    /// keys, and past the limit refused before they are compared.
    async fn authorize<T>(&self, request: &Request<T>) -> Result<(), WalletOpsError> {
        let subjects = [format!(
            "admin:client:{}",
            crate::app::client_address(request.metadata())
        )];
        let limit = self.core.limiter.failed_auth();
        self.core.limiter.check_failures(limit, &subjects).await?;
        let checked = self.compare(request);
        if let Err(WalletOpsError::Unauthorized(_)) = &checked {
            self.core.limiter.record_failure(limit, &subjects).await;
        }
        checked
    }

    fn compare<T>(&self, request: &Request<T>) -> Result<(), WalletOpsError> {
        let expected = self.core.config.admin_token.as_ref().ok_or_else(|| {
            WalletOpsError::ServiceUnavailable(
                "the admin API is disabled: set admin_token (WALLETOPS_ADMIN_TOKEN)".to_owned(),
            )
        })?;
        let presented = request
            .metadata()
            .get(ADMIN_TOKEN_HEADER)
            .map(|v| v.as_bytes())
            .unwrap_or_default();
        // Digests, compared in constant time: comparing the tokens themselves would end
        // early on a length mismatch, and tell the token's length.
        let digest = |b: &[u8]| <sha2::Sha256 as sha2::Digest>::digest(b);
        if bool::from(
            digest(presented)
                .as_slice()
                .ct_eq(digest(expected.expose().as_bytes()).as_slice()),
        ) {
            Ok(())
        } else {
            Err(WalletOpsError::Unauthorized("bad admin token"))
        }
    }
}

#[tonic::async_trait]
impl AdminService for AdminApi {
    async fn create_user(
        &self,
        request: Request<pb::CreateUserRequest>,
    ) -> Result<Response<pb::CreateUserResponse>, Status> {
        self.authorize(&request).await?;
        let req = request.into_inner();
        let scopes = convert::scopes("scopes", &req.scopes)?;
        let (user, key, secret) = self.core.create_user(&req.name, scopes).await?;
        Ok(Response::new(pb::CreateUserResponse {
            user: Some(convert::user(user)),
            api_key: Some(convert::api_key(key, Utc::now())),
            secret: secret.expose().to_owned(),
        }))
    }

    async fn list_users(
        &self,
        request: Request<pb::ListUsersRequest>,
    ) -> Result<Response<pb::ListUsersResponse>, Status> {
        self.authorize(&request).await?;
        let users = self.core.list_users().await?;
        Ok(Response::new(pb::ListUsersResponse {
            users: users.into_iter().map(convert::user).collect(),
        }))
    }

    async fn create_wallet(
        &self,
        request: Request<pb::CreateWalletRequest>,
    ) -> Result<Response<pb::CreateWalletResponse>, Status> {
        self.authorize(&request).await?;
        let req = request.into_inner();
        let family = req
            .chain_type
            .parse::<ChainFamily>()
            .map_err(|e| WalletOpsError::invalid("chainType", e))?;
        let user = self.core.find_user(&req.user).await?;
        let wallet = self
            .core
            .wallets
            .create(user.id, family, req.make_default.unwrap_or(false))
            .await?;
        Ok(Response::new(pb::CreateWalletResponse {
            wallet: Some(convert::wallet(wallet)),
        }))
    }

    async fn update_wallet(
        &self,
        request: Request<pb::UpdateWalletRequest>,
    ) -> Result<Response<pb::UpdateWalletResponse>, Status> {
        self.authorize(&request).await?;
        let req = request.into_inner();
        let address = crate::requests::any_address(&req.address, "address")?;
        let wallet = self
            .core
            .wallets
            .update(&address, req.make_default, req.automation_enabled)
            .await?;
        Ok(Response::new(pb::UpdateWalletResponse {
            wallet: Some(convert::wallet(wallet)),
        }))
    }

    async fn link_user(
        &self,
        request: Request<pb::LinkUserRequest>,
    ) -> Result<Response<pb::LinkUserResponse>, Status> {
        self.authorize(&request).await?;
        let req = request.into_inner();
        let user = self.core.find_user(&req.user).await?;
        let report = self.core.wallets.link(&user, &req.provider_user_id).await?;
        let user = self.core.find_user(&user.id.to_string()).await?;
        Ok(Response::new(pb::LinkUserResponse {
            user: Some(convert::user(user)),
            sync: Some(convert::sync_report(report)),
        }))
    }

    async fn unlink_user(
        &self,
        request: Request<pb::UnlinkUserRequest>,
    ) -> Result<Response<pb::UnlinkUserResponse>, Status> {
        self.authorize(&request).await?;
        let user = self.core.find_user(&request.into_inner().user).await?;
        self.core.wallets.unlink(&user).await?;
        let user = self.core.find_user(&user.id.to_string()).await?;
        Ok(Response::new(pb::UnlinkUserResponse {
            user: Some(convert::user(user)),
        }))
    }

    async fn sync_wallets(
        &self,
        request: Request<pb::SyncWalletsRequest>,
    ) -> Result<Response<pb::SyncWalletsResponse>, Status> {
        self.authorize(&request).await?;
        let user = self.core.find_user(&request.into_inner().user).await?;
        let report = self.core.wallets.sync(&user).await?;
        Ok(Response::new(pb::SyncWalletsResponse {
            sync: Some(convert::sync_report(report)),
        }))
    }
}
