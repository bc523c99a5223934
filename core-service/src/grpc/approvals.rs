//! `walletops.v1.ApprovalService`: the caller's writes held for approval, and a person's
//! decision on them.

use tonic::{Request, Response, Status};
use walletops_proto::v1::{self as pb, approval_service_server::ApprovalService};

use super::convert;
use crate::{
    Core,
    auth::Operation,
    requests::{DecideRequest, approval_id, approval_state},
};

/// The gRPC face of `ApprovalService`.
#[derive(Debug, Clone)]
pub struct ApprovalApi {
    core: Core,
}

impl ApprovalApi {
    /// The service over `core`.
    pub fn new(core: Core) -> Self {
        Self { core }
    }
}

#[tonic::async_trait]
impl ApprovalService for ApprovalApi {
    async fn list_approvals(
        &self,
        request: Request<pb::ListApprovalsRequest>,
    ) -> Result<Response<pb::ListApprovalsResponse>, Status> {
        let caller = self
            .core
            .admit(request.metadata(), Operation::ListApprovals)
            .await?;
        let state = approval_state(request.get_ref().state)?;
        let approvals = self.core.approvals.list(&caller, state).await?;
        Ok(Response::new(pb::ListApprovalsResponse {
            approvals: approvals.into_iter().map(|a| self.approval(a)).collect(),
        }))
    }

    async fn get_approval(
        &self,
        request: Request<pb::GetApprovalRequest>,
    ) -> Result<Response<pb::GetApprovalResponse>, Status> {
        let caller = self
            .core
            .admit(request.metadata(), Operation::GetApproval)
            .await?;
        let id = approval_id(&request.get_ref().id, "id")?;
        let approval = self.core.approvals.get(&caller, id).await?;
        Ok(Response::new(pb::GetApprovalResponse {
            approval: Some(self.approval(approval)),
        }))
    }

    async fn decide_approval(
        &self,
        request: Request<pb::DecideApprovalRequest>,
    ) -> Result<Response<pb::DecideApprovalResponse>, Status> {
        let caller = self
            .core
            .admit(request.metadata(), Operation::DecideApproval)
            .await?;
        let req = DecideRequest::parse(request.get_ref())?;
        let user = self.core.find_user(&caller.user_id.to_string()).await?;
        let approval = self
            .core
            .approvals
            .decide_as(
                &caller,
                req.id,
                req.decision,
                &format!("dashboard:{}", user.name),
            )
            .await?;
        Ok(Response::new(pb::DecideApprovalResponse {
            approval: Some(self.approval(approval)),
        }))
    }
}

impl ApprovalApi {
    /// `a` as the API gives it, with its asset's units when known.
    fn approval(&self, a: walletops_domain::Approval) -> pb::Approval {
        let units = self.core.units(&a.chain, &a.asset);
        convert::approval(a, units)
    }
}
