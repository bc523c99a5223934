//! `walletops.v1.AdminService`: users and wallets, for operators. Guarded by the configured
//! admin token, compared in constant time, wrong tokens throttled per client; with none
//! configured every call is refused.

use tonic::{Request, Response, Status};
use walletops_proto::v1::{self as pb, admin_service_server::AdminService};

use super::convert;
use crate::{Core, auth::Users, requests::keys, wallets::Wallets};

/// The gRPC face of `AdminService`.
#[derive(Debug, Clone)]
pub struct AdminApi {
    users: Users,
    wallets: Wallets,
}

impl AdminApi {
    /// The service over the parts of `core` it uses.
    pub fn new(core: &Core) -> Self {
        Self {
            users: core.users(),
            wallets: core.wallets.clone(),
        }
    }
}

#[tonic::async_trait]
impl AdminService for AdminApi {
    async fn create_user(
        &self,
        request: Request<pb::CreateUserRequest>,
    ) -> Result<Response<pb::CreateUserResponse>, Status> {
        super::admission::admin(&request)?;
        let req = request.into_inner();
        let scopes = keys::scopes("scopes", &req.scopes)?;
        let (user, key, secret) = self.users.create(&req.name, scopes).await?;
        Ok(Response::new(pb::CreateUserResponse {
            user: Some(convert::user(user)),
            api_key: Some(convert::api_key(key, crate::clock::now())),
            secret: secret.expose().to_owned(),
        }))
    }

    async fn list_users(
        &self,
        request: Request<pb::ListUsersRequest>,
    ) -> Result<Response<pb::ListUsersResponse>, Status> {
        super::admission::admin(&request)?;
        let users = self.users.list().await?;
        Ok(Response::new(pb::ListUsersResponse {
            users: users.into_iter().map(convert::user).collect(),
        }))
    }

    async fn create_wallet(
        &self,
        request: Request<pb::CreateWalletRequest>,
    ) -> Result<Response<pb::CreateWalletResponse>, Status> {
        super::admission::admin(&request)?;
        let req = request.into_inner();
        let (family, custody) = keys::new_wallet(&req)?;
        let user = self.users.find(&req.user).await?;
        let make_default = req.make_default.unwrap_or(false);
        let wallet = self
            .wallets
            .create(user.id, family, make_default, custody)
            .await?;
        Ok(Response::new(pb::CreateWalletResponse {
            wallet: Some(convert::wallet(wallet)),
        }))
    }

    async fn update_wallet(
        &self,
        request: Request<pb::UpdateWalletRequest>,
    ) -> Result<Response<pb::UpdateWalletResponse>, Status> {
        super::admission::admin(&request)?;
        let req = request.into_inner();
        let address = crate::requests::any_address(&req.address, "address")?;
        let wallet = self
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
        super::admission::admin(&request)?;
        let req = request.into_inner();
        let user = self.users.find(&req.user).await?;
        let report = self.wallets.link(&user, &req.provider_user_id).await?;
        let user = self.users.find(&user.id.to_string()).await?;
        Ok(Response::new(pb::LinkUserResponse {
            user: Some(convert::user(user)),
            sync: Some(convert::sync_report(report)),
        }))
    }

    async fn unlink_user(
        &self,
        request: Request<pb::UnlinkUserRequest>,
    ) -> Result<Response<pb::UnlinkUserResponse>, Status> {
        super::admission::admin(&request)?;
        let user = self.users.find(&request.into_inner().user).await?;
        self.wallets.unlink(&user).await?;
        let user = self.users.find(&user.id.to_string()).await?;
        Ok(Response::new(pb::UnlinkUserResponse {
            user: Some(convert::user(user)),
        }))
    }

    async fn sync_wallets(
        &self,
        request: Request<pb::SyncWalletsRequest>,
    ) -> Result<Response<pb::SyncWalletsResponse>, Status> {
        super::admission::admin(&request)?;
        let user = self.users.find(&request.into_inner().user).await?;
        let report = self.wallets.sync(&user).await?;
        Ok(Response::new(pb::SyncWalletsResponse {
            sync: Some(convert::sync_report(report)),
        }))
    }
}
