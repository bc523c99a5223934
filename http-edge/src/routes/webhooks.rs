//! The `/webhooks` routes: each maps onto one `WebhookService` RPC.

use axum::{
    Json,
    extract::{Path, State},
    http::{HeaderMap, StatusCode},
};
use walletops_proto::v1 as pb;

use super::{Edge, call};
use crate::{
    error::{EdgeError, ErrorBody, RestNames, in_rest_names},
    extract::{EdgeJson, QueryParams},
    model::{
        CreateWebhookBody, DeliveriesJson, DeliveriesQuery, ReplayBody, ReplayJson, WebhookJson,
        WebhookSecretJson, WebhooksJson, delivery_state,
    },
};

/// `CreateWebhookRequest`'s fields as the body spells them.
const CREATE_NAMES: &RestNames = &[("event_types", "eventTypes")];

/// `ListWebhookDeliveriesRequest`'s: the endpoint is the path's `id`.
const DELIVERIES_NAMES: &RestNames = &[("webhook_id", "id")];

/// `ReplayWebhookDeliveriesRequest`'s.
const REPLAY_NAMES: &RestNames = &[("webhook_id", "id"), ("delivery_ids", "deliveryIds")];

#[utoipa::path(post, path = "/webhooks", tag = "webhooks", request_body = CreateWebhookBody,
    security(("api_key" = [])),
    responses(
        (status = 201, description = "Registered; the secret is shown only here", body = WebhookSecretJson),
        (status = 400, description = "A bad URL (not http or https, or resolving to a private address) or event type, or the user holds 20 endpoints already", body = ErrorBody),
        (status = 403, description = "The key lacks the write scope", body = ErrorBody),
    ))]
pub(super) async fn create_webhook(
    State(edge): State<Edge>,
    headers: HeaderMap,
    body: Result<EdgeJson<CreateWebhookBody>, EdgeError>,
) -> Result<(StatusCode, Json<WebhookSecretJson>), EdgeError> {
    let req = body.map(|EdgeJson(body)| body.into());
    let resp = edge
        .webhooks()
        .create_webhook(call(&headers, req)?)
        .await
        .map_err(in_rest_names(CREATE_NAMES))?;
    Ok((StatusCode::CREATED, Json(resp.into_inner().into())))
}

#[utoipa::path(get, path = "/webhooks", tag = "webhooks", security(("api_key" = [])),
    responses((status = 200, description = "The caller's endpoints", body = WebhooksJson)))]
pub(super) async fn list_webhooks(
    State(edge): State<Edge>,
    headers: HeaderMap,
) -> Result<Json<WebhooksJson>, EdgeError> {
    let req = Ok(pb::ListWebhooksRequest {});
    let resp = edge.webhooks().list_webhooks(call(&headers, req)?).await?;
    Ok(Json(resp.into_inner().into()))
}

#[utoipa::path(delete, path = "/webhooks/{id}", tag = "webhooks",
    params(("id" = uuid::Uuid, Path, description = "Endpoint id")),
    security(("api_key" = [])),
    responses(
        (status = 200, description = "Deleted, with every delivery to it", body = WebhookJson),
        (status = 404, description = "Unknown id, or not the caller's", body = ErrorBody),
    ))]
pub(super) async fn delete_webhook(
    State(edge): State<Edge>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Json<WebhookJson>, EdgeError> {
    let req = Ok(pb::DeleteWebhookRequest { id });
    let resp = edge.webhooks().delete_webhook(call(&headers, req)?).await?;
    Ok(Json(resp.into_inner().webhook.into()))
}

#[utoipa::path(post, path = "/webhooks/{id}/rotate-secret", tag = "webhooks",
    params(("id" = uuid::Uuid, Path, description = "Endpoint id")),
    security(("api_key" = [])),
    responses(
        (status = 200, description = "The new secret, shown only here; deliveries from now on are signed with it", body = WebhookSecretJson),
        (status = 404, description = "Unknown id, or not the caller's", body = ErrorBody),
    ))]
pub(super) async fn rotate_webhook_secret(
    State(edge): State<Edge>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Json<WebhookSecretJson>, EdgeError> {
    let req = Ok(pb::RotateWebhookSecretRequest { id });
    let resp = edge
        .webhooks()
        .rotate_webhook_secret(call(&headers, req)?)
        .await?;
    Ok(Json(resp.into_inner().into()))
}

#[utoipa::path(post, path = "/webhooks/{id}/enable", tag = "webhooks",
    params(("id" = uuid::Uuid, Path, description = "Endpoint id")),
    security(("api_key" = [])),
    responses(
        (status = 200, description = "Enabled again: its pending deliveries are sent, and new events delivered", body = WebhookJson),
        (status = 403, description = "Always, for an API key: only the owner may enable an endpoint, from the dashboard or the CLI", body = ErrorBody),
        (status = 404, description = "Unknown id, or not the caller's", body = ErrorBody),
    ))]
pub(super) async fn enable_webhook(
    State(edge): State<Edge>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Json<WebhookJson>, EdgeError> {
    let req = Ok(pb::EnableWebhookRequest { id });
    let resp = edge.webhooks().enable_webhook(call(&headers, req)?).await?;
    Ok(Json(resp.into_inner().webhook.into()))
}

#[utoipa::path(get, path = "/webhooks/{id}/deliveries", tag = "webhooks",
    params(("id" = uuid::Uuid, Path, description = "Endpoint id"), DeliveriesQuery),
    security(("api_key" = [])),
    responses(
        (status = 200, description = "Its deliveries, newest event first", body = DeliveriesJson),
        (status = 400, description = "A bad state or a limit outside 1 to 500", body = ErrorBody),
        (status = 404, description = "Unknown id, or not the caller's", body = ErrorBody),
    ))]
pub(super) async fn list_webhook_deliveries(
    State(edge): State<Edge>,
    Path(webhook_id): Path<String>,
    headers: HeaderMap,
    q: Result<QueryParams, EdgeError>,
) -> Result<Json<DeliveriesJson>, EdgeError> {
    let req = q.and_then(|q| {
        let state = delivery_state(q.string("state")?.as_deref())
            .map_err(|e| EdgeError::invalid("state", e))?;
        let limit = q.limit()?;
        Ok(pb::ListWebhookDeliveriesRequest {
            webhook_id,
            state: state.into(),
            limit,
        })
    });
    let resp = edge
        .webhooks()
        .list_webhook_deliveries(call(&headers, req)?)
        .await
        .map_err(in_rest_names(DELIVERIES_NAMES))?;
    Ok(Json(resp.into_inner().into()))
}

#[utoipa::path(post, path = "/webhooks/{id}/deliveries/replay", tag = "webhooks",
    params(("id" = uuid::Uuid, Path, description = "Endpoint id")),
    request_body = ReplayBody,
    security(("api_key" = [])),
    responses(
        (status = 200, description = "How many dead deliveries are pending again (same webhook-id, a new retry window)", body = ReplayJson),
        (status = 400, description = "More deliveries named than webhooks.replay_max_per_call", body = ErrorBody),
        (status = 429, description = "The user's replays of the hour reached webhooks.replay_max_per_hour; Retry-After says when", body = ErrorBody),
        (status = 404, description = "Unknown id, or not the caller's", body = ErrorBody),
    ))]
pub(super) async fn replay_webhook_deliveries(
    State(edge): State<Edge>,
    Path(webhook_id): Path<String>,
    headers: HeaderMap,
    body: Result<EdgeJson<ReplayBody>, EdgeError>,
) -> Result<Json<ReplayJson>, EdgeError> {
    let req = body.map(|EdgeJson(body)| pb::ReplayWebhookDeliveriesRequest {
        webhook_id,
        delivery_ids: body.delivery_ids,
    });
    let resp = edge
        .webhooks()
        .replay_webhook_deliveries(call(&headers, req)?)
        .await
        .map_err(in_rest_names(REPLAY_NAMES))?;
    Ok(Json(ReplayJson {
        replayed: resp.into_inner().replayed,
    }))
}
