//! `walletops.v1.PayoutService`: batches of recipients paid from one wallet.

use tonic::{Request, Response, Status};
use walletops_proto::v1::{self as pb, payout_service_server::PayoutService};

use crate::Core;
use crate::events::body::payout as described;
use walletops_domain::Payout;

/// The gRPC face of `PayoutService`.
#[derive(Debug, Clone)]
pub struct PayoutApi {
    core: Core,
}

impl PayoutApi {
    /// The service over `core`.
    pub fn new(core: Core) -> Self {
        Self { core }
    }

    /// `payout` as the API gives it, each item where it stands.
    async fn described(&self, payout: Payout) -> Result<pb::Payout, Status> {
        let standings = self
            .core
            .payout_standings(std::slice::from_ref(&payout))
            .await?;
        Ok(described(
            payout,
            standings.into_iter().next().unwrap_or_default(),
            true,
        ))
    }
}

#[tonic::async_trait]
impl PayoutService for PayoutApi {
    async fn create_payout(
        &self,
        request: Request<pb::CreatePayoutRequest>,
    ) -> Result<Response<pb::CreatePayoutResponse>, Status> {
        let caller = super::admission::caller(&request)?;
        let (metadata, _, req) = request.into_parts();
        let payout = self.core.create_payout(&caller, &metadata, req).await?;
        Ok(Response::new(pb::CreatePayoutResponse {
            payout: Some(self.described(payout).await?),
        }))
    }

    async fn get_payout(
        &self,
        request: Request<pb::GetPayoutRequest>,
    ) -> Result<Response<pb::GetPayoutResponse>, Status> {
        let caller = super::admission::caller(&request)?;
        let payout = self.core.get_payout(&caller, &request.get_ref().id).await?;
        Ok(Response::new(pb::GetPayoutResponse {
            payout: Some(self.described(payout).await?),
        }))
    }

    async fn list_payouts(
        &self,
        request: Request<pb::ListPayoutsRequest>,
    ) -> Result<Response<pb::ListPayoutsResponse>, Status> {
        let caller = super::admission::caller(&request)?;
        let (payouts, next) = self.core.list_payouts(&caller, request.get_ref()).await?;
        let standings = self.core.payout_standings(&payouts).await?;
        Ok(Response::new(pb::ListPayoutsResponse {
            payouts: payouts
                .into_iter()
                .zip(standings)
                .map(|(p, s)| described(p, s, false))
                .collect(),
            next_page_token: next.map(|id| id.to_string()),
        }))
    }
}
