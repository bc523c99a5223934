//! `walletops.v1.PayoutService`: batches of recipients paid from one wallet.

use tonic::{Request, Response, Status};
use walletops_proto::v1::{self as pb, payout_service_server::PayoutService};

use super::convert::timestamp;
use crate::Core;
use walletops_domain::{ItemStanding, Payout, PayoutState};

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

/// `payout` as the API gives it, its items where `standings` say (without them, its totals
/// only, unless `with_items`).
pub(crate) fn described(
    payout: Payout,
    standings: Vec<ItemStanding>,
    with_items: bool,
) -> pb::Payout {
    let mut totals = std::collections::HashMap::new();
    for s in &standings {
        *totals.entry(s.state.clone()).or_insert(0u32) += 1;
    }
    let item_count = u32::try_from(payout.items.len()).unwrap_or(u32::MAX);
    let mut transactions: Vec<uuid::Uuid> =
        standings.iter().filter_map(|s| s.transaction_id).collect();
    transactions.sort_unstable();
    transactions.dedup();
    let items = if with_items {
        payout
            .items
            .into_iter()
            .zip(standings)
            .map(|(item, s)| pb::PayoutItem {
                index: item.index,
                to: item.to,
                asset: item.asset,
                token: item.token,
                amount: item.amount,
                reference: item.reference,
                state: s.state,
                transaction_id: s.transaction_id.map(|t| t.to_string()),
                hash: s.hash,
                error: s.error,
                approval_id: s.approval_id.map(|a| a.to_string()),
            })
            .collect()
    } else {
        Vec::new()
    };
    let state = match payout.state {
        PayoutState::Running => pb::PayoutState::Running,
        PayoutState::Completed => pb::PayoutState::Completed,
    };
    pb::Payout {
        id: if payout.id.is_nil() {
            String::new()
        } else {
            payout.id.to_string()
        },
        chain: payout.chain,
        from: payout.from,
        state: state.into(),
        items,
        totals,
        created_at: Some(timestamp(payout.created_at)),
        completed_at: payout.completed_at.map(timestamp),
        item_count,
        transaction_count: u32::try_from(transactions.len()).unwrap_or(u32::MAX),
        rent: payout.rent.map(|r| r.to_string()),
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
