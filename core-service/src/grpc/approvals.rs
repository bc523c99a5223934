//! `walletops.v1.ApprovalService`: the caller's writes held for approval, and a person's
//! decision on them.

use tonic::{Request, Response, Status};
use walletops_proto::v1::{self as pb, approval_service_server::ApprovalService};

use super::convert;
use crate::{
    approvals::Approvals,
    balances::Units,
    requests::{DecideRequest, approval_id, approval_state},
};

/// The gRPC face of `ApprovalService`: the approvals, and the units their amounts are
/// shown in.
#[derive(Debug, Clone)]
pub struct ApprovalApi {
    approvals: Approvals,
    units: Units,
}

impl ApprovalApi {
    /// The service over `approvals`, naming amounts in `units`.
    pub fn new(approvals: Approvals, units: Units) -> Self {
        Self { approvals, units }
    }
}

#[tonic::async_trait]
impl ApprovalService for ApprovalApi {
    async fn list_approvals(
        &self,
        request: Request<pb::ListApprovalsRequest>,
    ) -> Result<Response<pb::ListApprovalsResponse>, Status> {
        let caller = super::admission::caller(&request)?;
        let state = approval_state(request.get_ref().state)?;
        let approvals = self.approvals.list(&caller, state).await?;
        Ok(Response::new(pb::ListApprovalsResponse {
            approvals: approvals.into_iter().map(|a| self.approval(a)).collect(),
        }))
    }

    async fn get_approval(
        &self,
        request: Request<pb::GetApprovalRequest>,
    ) -> Result<Response<pb::GetApprovalResponse>, Status> {
        let caller = super::admission::caller(&request)?;
        let id = approval_id(&request.get_ref().id, "id")?;
        let approval = self.approvals.get(&caller, id).await?;
        Ok(Response::new(pb::GetApprovalResponse {
            approval: Some(self.approval(approval)),
        }))
    }

    async fn decide_approval(
        &self,
        request: Request<pb::DecideApprovalRequest>,
    ) -> Result<Response<pb::DecideApprovalResponse>, Status> {
        let caller = super::admission::caller(&request)?;
        let req = DecideRequest::parse(request.get_ref())?;
        let approval = self
            .approvals
            .decide_as(&caller, req.id, req.decision)
            .await?;
        Ok(Response::new(pb::DecideApprovalResponse {
            approval: Some(self.approval(approval)),
        }))
    }
}

impl ApprovalApi {
    /// `a` as the API gives it, with its asset's units when known.
    fn approval(&self, a: walletops_domain::Approval) -> pb::Approval {
        let units = self.units.of(&a.chain, &a.asset);
        convert::approval(a, units)
    }
}
