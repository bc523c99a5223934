//! The `/deposits` routes: money that arrived at the caller's wallets, listed, one by one,
//! and as a stream of changes.

use axum::{
    Json,
    extract::{Path, State},
    http::HeaderMap,
};
use walletops_proto::v1 as pb;

use super::{Edge, EventStream, call, last_event_id, sse};
use crate::{
    error::{EdgeError, ErrorBody, RestNames, in_rest_names},
    extract::QueryParams,
    model::{DepositJson, DepositsJson, DepositsQuery, deposit_state},
};

/// The REST names of `ListDepositsRequest`'s fields.
const LIST_NAMES: &RestNames = &[("page_size", "limit"), ("page_token", "cursor")];

#[utoipa::path(get, path = "/deposits", tag = "deposits",
    params(DepositsQuery), security(("api_key" = [])),
    responses(
        (status = 200, description = "The caller's deposits, newest first", body = DepositsJson),
        (status = 400, description = "A bad filter, limit or cursor", body = ErrorBody),
    ))]
pub(super) async fn list_deposits(
    State(edge): State<Edge>,
    headers: HeaderMap,
    q: Result<QueryParams, EdgeError>,
) -> Result<Json<DepositsJson>, EdgeError> {
    let req = q.and_then(|q| {
        let state = deposit_state(q.string("state")?.as_deref())
            .map_err(|e| EdgeError::invalid("state", e))?;
        let since = match q.string("since")?.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(t) => {
                let at = chrono::DateTime::parse_from_rfc3339(t)
                    .map_err(|_| EdgeError::invalid("since", "must be an RFC 3339 time"))?;
                Some(prost_types::Timestamp {
                    seconds: at.timestamp(),
                    nanos: i32::try_from(at.timestamp_subsec_nanos()).unwrap_or(0),
                })
            }
        };
        let page_size = q.limit()?.unwrap_or(0);
        Ok(pb::ListDepositsRequest {
            chain: q.string("chain")?,
            wallet: q.string("wallet")?,
            state: state.into(),
            since,
            page_size,
            page_token: q.string("cursor")?,
        })
    });
    let resp = edge
        .deposits()
        .list_deposits(call(&headers, req)?)
        .await
        .map_err(in_rest_names(LIST_NAMES))?;
    Ok(Json(resp.into_inner().into()))
}

#[utoipa::path(get, path = "/deposits/{id}", tag = "deposits",
    params(("id" = uuid::Uuid, Path, description = "Deposit id")),
    security(("api_key" = [])),
    responses(
        (status = 200, description = "The deposit", body = DepositJson),
        (status = 404, description = "Unknown id, or not the caller's", body = ErrorBody),
    ))]
pub(super) async fn get_deposit(
    State(edge): State<Edge>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Json<DepositJson>, EdgeError> {
    let req = Ok(pb::GetDepositRequest { id });
    let resp = edge.deposits().get_deposit(call(&headers, req)?).await?;
    Ok(Json(DepositJson::from(
        resp.into_inner().deposit.unwrap_or_default(),
    )))
}

#[utoipa::path(get, path = "/deposits/events", tag = "deposits",
    params(
        ("chain" = Option<String>, Query, description = "Only this chain's changes (slug)"),
        ("Last-Event-ID" = Option<u64>, Header, description = "Resume after this event id (0: from the oldest kept); absent: from now on"),
    ),
    security(("api_key" = [])),
    responses(
        (status = 200, content_type = "text/event-stream", body = String,
         description = "Server-Sent Events, one per change of a deposit's state in commit order: `id` the event id, `event` its type (`deposit.pending`, `deposit.confirmed`, `deposit.reverted`), `data` the deposit as GET /deposits/{id} gives it, in that state. A stream cut off ends with an `error` event holding the error body."),
        (status = 400, description = "A bad chain or Last-Event-ID", body = ErrorBody),
    ))]
pub(super) async fn watch_deposits(
    State(edge): State<Edge>,
    headers: HeaderMap,
    q: Result<QueryParams, EdgeError>,
) -> Result<EventStream, EdgeError> {
    use axum::response::sse::Event;
    let req = q.and_then(|q| {
        Ok(pb::WatchDepositsRequest {
            chain: q.string("chain")?,
            after_event_id: last_event_id(&headers)?,
        })
    });
    const WATCH_NAMES: &RestNames = &[("after_event_id", "Last-Event-ID")];
    let events = edge
        .deposits()
        .watch_deposits(call(&headers, req)?)
        .await
        .map_err(in_rest_names(WATCH_NAMES))?
        .into_inner();
    Ok(sse(events, &headers, |event| {
        let deposit = DepositJson::from(event.deposit.unwrap_or_default());
        Event::default()
            .id(event.event_id.to_string())
            .event(event.r#type)
            .json_data(deposit)
            .unwrap_or_default()
    }))
}
