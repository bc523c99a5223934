//! The `/approvals` routes: a key reads the writes of its own held for approval. Deciding
//! is for a person (the dashboard, the CLI): no route does it.

use axum::{
    Json,
    extract::{Path, State},
    http::HeaderMap,
};
use walletops_proto::v1 as pb;

use super::{Edge, call};
use crate::{
    error::{EdgeError, ErrorBody},
    extract::QueryParams,
    model::{ApprovalJson, ApprovalsJson, ApprovalsQuery, approval_state},
};

#[utoipa::path(get, path = "/approvals", tag = "approvals",
    params(ApprovalsQuery), security(("api_key" = [])),
    responses(
        (status = 200, description = "The key's writes held for approval, newest first (at most 200)", body = ApprovalsJson),
        (status = 400, description = "An unknown state", body = ErrorBody),
    ))]
pub(super) async fn list_approvals(
    State(edge): State<Edge>,
    headers: HeaderMap,
    q: Result<QueryParams, EdgeError>,
) -> Result<Json<ApprovalsJson>, EdgeError> {
    let req = q.and_then(|q| {
        let state = approval_state(q.string("state")?.as_deref())
            .map_err(|e| EdgeError::invalid("state", e))?;
        Ok(pb::ListApprovalsRequest {
            state: state.into(),
        })
    });
    let resp = edge
        .approvals()
        .list_approvals(call(&headers, req)?)
        .await?;
    Ok(Json(resp.into_inner().into()))
}

#[utoipa::path(get, path = "/approvals/{id}", tag = "approvals",
    params(("id" = uuid::Uuid, Path, description = "Approval id")),
    security(("api_key" = [])),
    responses(
        (status = 200, description = "The approval: where it stands, who decided, and the transaction once submitted", body = ApprovalJson),
        (status = 404, description = "Unknown id, or not the key's", body = ErrorBody),
    ))]
pub(super) async fn get_approval(
    State(edge): State<Edge>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Json<ApprovalJson>, EdgeError> {
    let req = Ok(pb::GetApprovalRequest { id });
    let resp = edge.approvals().get_approval(call(&headers, req)?).await?;
    Ok(Json(ApprovalJson::from(
        resp.into_inner().approval.unwrap_or_default(),
    )))
}
