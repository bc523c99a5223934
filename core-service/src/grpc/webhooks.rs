//! `walletops.v1.WebhookService`: a caller manages its own webhook endpoints and reads and
//! replays their deliveries.

use tonic::{Request, Response, Status};
use walletops_proto::v1::{self as pb, webhook_service_server::WebhookService};

use super::convert::timestamp;
use crate::{
    auth::ApiKeys,
    requests::{DeliveriesRequest, NewWebhook, ReplayRequest, webhook_id},
    webhooks::Webhooks,
};
use walletops_domain::{
    ApiKey, DeliveryState, DisabledReason, EndpointMaker, EventType, WebhookDelivery,
    WebhookEndpoint,
};

/// The gRPC face of `WebhookService`: the endpoints, and the keys that registered them.
#[derive(Debug, Clone)]
pub struct WebhookApi {
    webhooks: Webhooks,
    keys: ApiKeys,
}

impl WebhookApi {
    /// The service over `webhooks`, naming endpoints' keys from `keys`.
    pub fn new(webhooks: Webhooks, keys: ApiKeys) -> Self {
        Self { webhooks, keys }
    }

    /// `user_id`'s keys, to name the keys that registered endpoints.
    async fn keys(&self, user_id: uuid::Uuid) -> Result<Vec<ApiKey>, Status> {
        Ok(self.keys.list(user_id).await?)
    }
}

/// `e` as the contract gives it, its creating key named by prefix from `keys` (the owner's).
fn webhook(e: WebhookEndpoint, keys: &[ApiKey]) -> pb::Webhook {
    let (created_by, created_by_key_prefix) = match e.created_by {
        EndpointMaker::Key(id) => (
            pb::WebhookCreator::ApiKey,
            keys.iter().find(|k| k.id == id).map(|k| k.prefix.clone()),
        ),
        EndpointMaker::Session(_) => (pb::WebhookCreator::Dashboard, None),
        EndpointMaker::Owner => (pb::WebhookCreator::Owner, None),
    };
    let (state, reason) = match e.disabled.map(|d| d.reason) {
        None => (
            pb::WebhookState::Enabled,
            pb::WebhookDisabledReason::Unspecified,
        ),
        Some(DisabledReason::KeyRevoked) => (
            pb::WebhookState::Disabled,
            pb::WebhookDisabledReason::KeyRevoked,
        ),
        Some(DisabledReason::Failing) => (
            pb::WebhookState::Disabled,
            pb::WebhookDisabledReason::Failing,
        ),
    };
    pb::Webhook {
        id: e.id.to_string(),
        url: e.url.to_string(),
        event_types: e.event_types.iter().map(|t| t.name()).collect(),
        created_at: Some(timestamp(e.created_at)),
        created_by: created_by.into(),
        created_by_key_prefix,
        state: state.into(),
        disabled_reason: reason.into(),
        disabled_at: e.disabled.map(|d| timestamp(d.at)),
    }
}

fn delivery(d: WebhookDelivery) -> pb::WebhookDelivery {
    let state = match d.state {
        DeliveryState::Pending => pb::WebhookDeliveryState::Pending,
        DeliveryState::Delivered => pb::WebhookDeliveryState::Delivered,
        DeliveryState::Dead => pb::WebhookDeliveryState::Dead,
    };
    pb::WebhookDelivery {
        id: d.id.to_string(),
        webhook_id: d.endpoint_id.to_string(),
        event_id: d.event_seq,
        event_type: d.event.name(),
        transaction_id: match d.event {
            EventType::Transaction(_) => d.subject_id.to_string(),
            EventType::Deposit(_) | EventType::PayoutCompleted | EventType::KeyFrozen => {
                String::new()
            }
        },
        deposit_id: matches!(d.event, EventType::Deposit(_)).then(|| d.subject_id.to_string()),
        payout_id: matches!(d.event, EventType::PayoutCompleted).then(|| d.subject_id.to_string()),
        key_id: matches!(d.event, EventType::KeyFrozen).then(|| d.subject_id.to_string()),
        state: state.into(),
        attempts: d.attempts,
        next_attempt_at: (d.state == DeliveryState::Pending).then(|| timestamp(d.next_attempt_at)),
        last_status: d.last_status.map(u32::from),
        last_error: d.last_error,
        last_attempt_at: d.last_attempt_at.map(timestamp),
        delivered_at: d.delivered_at.map(timestamp),
        created_at: Some(timestamp(d.created_at)),
    }
}

#[tonic::async_trait]
impl WebhookService for WebhookApi {
    async fn create_webhook(
        &self,
        request: Request<pb::CreateWebhookRequest>,
    ) -> Result<Response<pb::CreateWebhookResponse>, Status> {
        let caller = super::admission::caller(&request)?;
        let new = NewWebhook::parse(request.get_ref())?;
        let (endpoint, secret) = self.webhooks.create(&caller, new).await?;
        tracing::info!(webhook = %endpoint.id, "webhook registered");
        let keys = self.keys(caller.user_id).await?;
        Ok(Response::new(pb::CreateWebhookResponse {
            webhook: Some(webhook(endpoint, &keys)),
            secret: secret.expose().to_owned(),
        }))
    }

    async fn list_webhooks(
        &self,
        request: Request<pb::ListWebhooksRequest>,
    ) -> Result<Response<pb::ListWebhooksResponse>, Status> {
        let caller = super::admission::caller(&request)?;
        let endpoints = self.webhooks.list(caller.user_id).await?;
        let keys = self.keys(caller.user_id).await?;
        Ok(Response::new(pb::ListWebhooksResponse {
            webhooks: endpoints.into_iter().map(|e| webhook(e, &keys)).collect(),
        }))
    }

    async fn delete_webhook(
        &self,
        request: Request<pb::DeleteWebhookRequest>,
    ) -> Result<Response<pb::DeleteWebhookResponse>, Status> {
        let caller = super::admission::caller(&request)?;
        let id = webhook_id(&request.get_ref().id, "id")?;
        self.webhooks.may_change(&caller, id).await?;
        let endpoint = self.webhooks.delete(caller.user_id, id).await?;
        tracing::info!(webhook = %endpoint.id, "webhook deleted");
        let keys = self.keys(caller.user_id).await?;
        Ok(Response::new(pb::DeleteWebhookResponse {
            webhook: Some(webhook(endpoint, &keys)),
        }))
    }

    async fn rotate_webhook_secret(
        &self,
        request: Request<pb::RotateWebhookSecretRequest>,
    ) -> Result<Response<pb::RotateWebhookSecretResponse>, Status> {
        let caller = super::admission::caller(&request)?;
        let id = webhook_id(&request.get_ref().id, "id")?;
        self.webhooks.may_change(&caller, id).await?;
        let (endpoint, secret) = self.webhooks.rotate_secret(caller.user_id, id).await?;
        tracing::info!(webhook = %endpoint.id, "webhook secret rotated");
        let keys = self.keys(caller.user_id).await?;
        Ok(Response::new(pb::RotateWebhookSecretResponse {
            webhook: Some(webhook(endpoint, &keys)),
            secret: secret.expose().to_owned(),
        }))
    }

    async fn list_webhook_deliveries(
        &self,
        request: Request<pb::ListWebhookDeliveriesRequest>,
    ) -> Result<Response<pb::ListWebhookDeliveriesResponse>, Status> {
        let caller = super::admission::caller(&request)?;
        let req = DeliveriesRequest::parse(request.get_ref())?;
        let deliveries = self.webhooks.deliveries(caller.user_id, &req).await?;
        Ok(Response::new(pb::ListWebhookDeliveriesResponse {
            deliveries: deliveries.into_iter().map(delivery).collect(),
        }))
    }

    async fn replay_webhook_deliveries(
        &self,
        request: Request<pb::ReplayWebhookDeliveriesRequest>,
    ) -> Result<Response<pb::ReplayWebhookDeliveriesResponse>, Status> {
        let caller = super::admission::caller(&request)?;
        let req = ReplayRequest::parse(request.get_ref())?;
        let replayed = self.webhooks.replay(caller.user_id, &req).await?;
        tracing::info!(webhook = %req.webhook_id, replayed, "webhook deliveries replayed");
        Ok(Response::new(pb::ReplayWebhookDeliveriesResponse {
            replayed: u32::try_from(replayed).unwrap_or(u32::MAX),
        }))
    }

    async fn enable_webhook(
        &self,
        request: Request<pb::EnableWebhookRequest>,
    ) -> Result<Response<pb::EnableWebhookResponse>, Status> {
        let caller = super::admission::caller(&request)?;
        let id = webhook_id(&request.get_ref().id, "id")?;
        let endpoint = self.webhooks.enable(&caller, id).await?;
        tracing::info!(webhook = %endpoint.id, "webhook enabled");
        let keys = self.keys(caller.user_id).await?;
        Ok(Response::new(pb::EnableWebhookResponse {
            webhook: Some(webhook(endpoint, &keys)),
        }))
    }
}
