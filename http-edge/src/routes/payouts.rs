//! The `/payouts` routes: many recipients paid from one wallet in one request, each once.

use axum::{
    Json,
    extract::{Path, State},
    http::{HeaderMap, StatusCode},
};
use serde::Serialize;
use utoipa::{IntoParams, ToSchema};
use walletops_proto::v1 as pb;

use super::{Edge, call};
use crate::{
    error::{EdgeError, ErrorBody, RestNames, in_rest_names},
    extract::{EdgeJson, QueryParams},
    model::{PayoutBody, PayoutJson},
    openapi::WriteHeaders,
};

#[utoipa::path(post, path = "/payouts", tag = "payouts", request_body = PayoutBody,
    params(WriteHeaders), security(("api_key" = [])),
    responses(
        (status = 202, description = "Stored; its items are paid in the background (the same answer to a replay under the same Idempotency-Key)", body = PayoutJson),
        (status = 200, description = "`validateOnly`: the payout as it would be stored, its `id` empty; nothing stored or sent", body = PayoutJson),
        (status = 400, description = "A bad item, named `items[i].field`; nothing is stored or sent", body = ErrorBody),
        (status = 409, description = "IDEMPOTENT_BODY_MISMATCH: the key was used for another payout", body = ErrorBody),
        (status = 422, description = "INSUFFICIENT_FUNDS: the wallet holds less than the items move, per asset", body = ErrorBody),
    ))]
pub(super) async fn create_payout(
    State(edge): State<Edge>,
    headers: HeaderMap,
    body: Result<EdgeJson<PayoutBody>, EdgeError>,
) -> Result<(StatusCode, Json<PayoutJson>), EdgeError> {
    let req = body.map(|EdgeJson(body)| -> pb::CreatePayoutRequest { body.into() });
    let validate_only = req.as_ref().is_ok_and(|r| r.validate_only);
    let resp = edge.payouts().create_payout(call(&headers, req)?).await?;
    Ok((
        if validate_only {
            StatusCode::OK
        } else {
            StatusCode::ACCEPTED
        },
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
    State(edge): State<Edge>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Json<PayoutJson>, EdgeError> {
    let req = Ok(pb::GetPayoutRequest { id });
    let resp = edge.payouts().get_payout(call(&headers, req)?).await?;
    Ok(Json(PayoutJson::from(
        resp.into_inner().payout.unwrap_or_default(),
    )))
}

/// The REST names of `ListPayoutsRequest`'s fields.
const LIST_NAMES: &RestNames = &[("page_size", "limit"), ("page_token", "cursor")];

/// `GET /payouts`'s filters and page.
#[derive(Debug, IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // Documents the query; the handler reads it field by field.
pub(crate) struct PayoutsQuery {
    /// Only this chain's (slug).
    chain: Option<String>,
    /// `running` or `completed`.
    state: Option<String>,
    /// 1 to 500; default 50.
    limit: Option<u32>,
    /// `nextCursor` of the previous page.
    cursor: Option<String>,
}

/// A page of payouts, newest first, each with its totals (`GET /payouts/{id}` gives the
/// items).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PayoutsJson {
    /// The payouts.
    pub(crate) payouts: Vec<PayoutJson>,
    /// Pass as `cursor` for the next page; absent: this was the last.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) next_cursor: Option<String>,
}

#[utoipa::path(get, path = "/payouts", tag = "payouts",
    params(PayoutsQuery), security(("api_key" = [])),
    responses(
        (status = 200, description = "The caller's payouts, newest first, with their totals", body = PayoutsJson),
        (status = 400, description = "A bad filter, limit or cursor", body = ErrorBody),
    ))]
pub(super) async fn list_payouts(
    State(edge): State<Edge>,
    headers: HeaderMap,
    q: Result<QueryParams, EdgeError>,
) -> Result<Json<PayoutsJson>, EdgeError> {
    let req = q.and_then(|q| {
        let state = match q.string("state")?.as_deref().map(str::trim) {
            None | Some("") => pb::PayoutState::Unspecified,
            Some(name) => pb::PayoutState::from_str_name(&format!(
                "PAYOUT_STATE_{}",
                name.to_ascii_uppercase()
            ))
            .filter(|s| *s != pb::PayoutState::Unspecified)
            .ok_or_else(|| {
                EdgeError::invalid(
                    "state",
                    format!("must be running or completed, got {name:?}"),
                )
            })?,
        };
        Ok(pb::ListPayoutsRequest {
            chain: q.string("chain")?,
            state: state.into(),
            page_size: q.limit()?.unwrap_or(0),
            page_token: q.string("cursor")?,
        })
    });
    let resp = edge
        .payouts()
        .list_payouts(call(&headers, req)?)
        .await
        .map_err(in_rest_names(LIST_NAMES))?
        .into_inner();
    Ok(Json(PayoutsJson {
        payouts: resp.payouts.into_iter().map(PayoutJson::from).collect(),
        next_cursor: resp.next_page_token,
    }))
}
