//! The `/payouts` routes: many recipients paid from one wallet in one request, each once.

use axum::{
    Json,
    extract::{Path, State},
    http::{HeaderMap, StatusCode},
};
use walletops_proto::v1 as pb;

use super::{Edge, call};
use crate::{
    error::{EdgeError, ErrorBody},
    extract::EdgeJson,
    model::{PayoutBody, PayoutJson},
    openapi::WriteHeaders,
};

#[utoipa::path(post, path = "/payouts", tag = "payouts", request_body = PayoutBody,
    params(WriteHeaders), security(("api_key" = [])),
    responses(
        (status = 202, description = "Stored; its items are paid in the background (the same answer to a replay under the same Idempotency-Key)", body = PayoutJson),
        (status = 400, description = "A bad item, named `items[i].field`; nothing is stored or sent", body = ErrorBody),
        (status = 409, description = "IDEMPOTENT_BODY_MISMATCH: the key was used for another payout", body = ErrorBody),
        (status = 422, description = "INSUFFICIENT_FUNDS: the wallet holds less than the items move, per asset", body = ErrorBody),
    ))]
pub(super) async fn create_payout(
    State(mut edge): State<Edge>,
    headers: HeaderMap,
    body: Result<EdgeJson<PayoutBody>, EdgeError>,
) -> Result<(StatusCode, Json<PayoutJson>), EdgeError> {
    let req = body.map(|EdgeJson(body)| -> pb::CreatePayoutRequest { body.into() });
    let resp = edge.payouts.create_payout(call(&headers, req)?).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(PayoutJson::from(
            resp.into_inner().payout.unwrap_or_default(),
        )),
    ))
}

#[utoipa::path(get, path = "/payouts/{id}", tag = "payouts",
    params(("id" = uuid::Uuid, Path, description = "Payout id")),
    security(("api_key" = [])),
    responses(
        (status = 200, description = "The payout, each item's state, hash and error, and the totals per state", body = PayoutJson),
        (status = 404, description = "Unknown id, or not the caller's", body = ErrorBody),
    ))]
pub(super) async fn get_payout(
    State(mut edge): State<Edge>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Json<PayoutJson>, EdgeError> {
    let req = Ok(pb::GetPayoutRequest { id });
    let resp = edge.payouts.get_payout(call(&headers, req)?).await?;
    Ok(Json(PayoutJson::from(
        resp.into_inner().payout.unwrap_or_default(),
    )))
}
