//! `/webhooks`: endpoints, their secrets (shown once) and their deliveries.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use walletops_proto::v1 as pb;

use super::{iso, iso_or_empty, short_name};

/// Body of `POST /webhooks`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct CreateWebhookBody {
    /// An http or https URL; one resolving to a loopback, private or link-local address is
    /// refused unless the operator allows private targets.
    pub(crate) url: String,
    /// Event types to receive: `transaction.submitted`, `transaction.confirmed`,
    /// `transaction.reverted`, `transaction.failed`, `transaction.dropped`,
    /// `transaction.fee_capped`; absent or empty: all six.
    pub(crate) event_types: Vec<String>,
}

impl From<CreateWebhookBody> for pb::CreateWebhookRequest {
    fn from(b: CreateWebhookBody) -> Self {
        Self {
            url: b.url,
            event_types: b.event_types,
        }
    }
}

/// A webhook endpoint (never its secret).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WebhookJson {
    /// Endpoint id.
    pub(crate) id: String,
    /// Where deliveries are POSTed.
    pub(crate) url: String,
    /// The event types it receives.
    pub(crate) event_types: Vec<String>,
    /// Registered at, ISO 8601 UTC.
    pub(crate) created_at: String,
    /// Who registered it: `apiKey` (see `createdByKey`), `dashboard` or `owner` (the CLI).
    pub(crate) created_by: &'static str,
    /// The prefix of the API key that registered it; revoking that key disables it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) created_by_key: Option<String>,
    /// `enabled` or `disabled`.
    pub(crate) state: &'static str,
    /// Why it is disabled: `keyRevoked` or `failing`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) disabled_reason: Option<&'static str>,
    /// Disabled at, ISO 8601 UTC.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) disabled_at: Option<String>,
}

impl From<pb::Webhook> for WebhookJson {
    fn from(w: pb::Webhook) -> Self {
        let created_by = match pb::WebhookCreator::try_from(w.created_by) {
            Ok(pb::WebhookCreator::ApiKey) => "apiKey",
            Ok(pb::WebhookCreator::Dashboard) => "dashboard",
            Ok(pb::WebhookCreator::Owner | pb::WebhookCreator::Unspecified) | Err(_) => "owner",
        };
        let state = match pb::WebhookState::try_from(w.state) {
            Ok(pb::WebhookState::Disabled) => "disabled",
            _ => "enabled",
        };
        let disabled_reason = match pb::WebhookDisabledReason::try_from(w.disabled_reason) {
            Ok(pb::WebhookDisabledReason::KeyRevoked) => Some("keyRevoked"),
            Ok(pb::WebhookDisabledReason::Failing) => Some("failing"),
            _ => None,
        };
        Self {
            id: w.id,
            url: w.url,
            event_types: w.event_types,
            created_at: iso_or_empty(w.created_at),
            created_by,
            created_by_key: w.created_by_key_prefix,
            state,
            disabled_reason,
            disabled_at: iso(w.disabled_at),
        }
    }
}

impl From<Option<pb::Webhook>> for WebhookJson {
    fn from(w: Option<pb::Webhook>) -> Self {
        w.unwrap_or_default().into()
    }
}

/// An endpoint with its signing secret, shown this once.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WebhookSecretJson {
    /// The endpoint.
    #[serde(flatten)]
    pub(crate) webhook: WebhookJson,
    /// The signing secret, `whsec_<base64>`: verify each delivery's `webhook-signature`
    /// with it. Shown only here: store it now.
    pub(crate) secret: String,
}

impl From<pb::CreateWebhookResponse> for WebhookSecretJson {
    fn from(r: pb::CreateWebhookResponse) -> Self {
        Self {
            webhook: r.webhook.into(),
            secret: r.secret,
        }
    }
}

impl From<pb::RotateWebhookSecretResponse> for WebhookSecretJson {
    fn from(r: pb::RotateWebhookSecretResponse) -> Self {
        Self {
            webhook: r.webhook.into(),
            secret: r.secret,
        }
    }
}

/// Response of `GET /webhooks`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct WebhooksJson {
    /// The caller's endpoints, oldest first.
    pub(crate) webhooks: Vec<WebhookJson>,
}

impl From<pb::ListWebhooksResponse> for WebhooksJson {
    fn from(r: pb::ListWebhooksResponse) -> Self {
        Self {
            webhooks: r.webhooks.into_iter().map(Into::into).collect(),
        }
    }
}

/// A delivery state.
#[derive(ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)]
pub(crate) enum DeliveryStateJson {
    Pending,
    Delivered,
    Dead,
}

/// Query of `GET /webhooks/{id}/deliveries`.
#[derive(Debug, IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // Documents the query; the handler reads it through `QueryParams`.
pub(crate) struct DeliveriesQuery {
    /// Only deliveries in this state (`dead`: the dead letters).
    #[param(value_type = Option<DeliveryStateJson>, inline)]
    state: Option<String>,
    /// At most this many, 1 to 500 (default 100).
    #[param(minimum = 1, maximum = 500)]
    limit: Option<u32>,
}

/// The state a query names, as the core reads it.
pub(crate) fn delivery_state(raw: Option<&str>) -> Result<pb::WebhookDeliveryState, String> {
    match raw.map(str::trim) {
        None | Some("") => Ok(pb::WebhookDeliveryState::Unspecified),
        Some("pending") => Ok(pb::WebhookDeliveryState::Pending),
        Some("delivered") => Ok(pb::WebhookDeliveryState::Delivered),
        Some("dead") => Ok(pb::WebhookDeliveryState::Dead),
        Some(other) => Err(format!("must be pending, delivered or dead, got {other:?}")),
    }
}

/// One event for one endpoint.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DeliveryJson {
    /// Delivery id: the `webhook-id` header, the same on every attempt.
    pub(crate) id: String,
    /// The endpoint.
    pub(crate) webhook_id: String,
    /// The event's id, as `GET /tx/events` gives it.
    pub(crate) event_id: u64,
    /// `transaction.confirmed`, ...
    pub(crate) event_type: String,
    /// The transaction it is about (`transaction.*` events; empty for others).
    pub(crate) transaction_id: String,
    /// The deposit it is about (`deposit.*` events).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) deposit_id: Option<String>,
    /// The payout it is about (`payout.completed`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) payout_id: Option<String>,
    /// The key line it is about (`key.frozen`): its first key's id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) key_id: Option<String>,
    /// `pending`, `delivered` or `dead`.
    pub(crate) state: String,
    /// Attempts made.
    pub(crate) attempts: u32,
    /// When it is due next (pending only).
    pub(crate) next_attempt_at: Option<String>,
    /// The last attempt's HTTP status; absent: no attempt, or no answer.
    pub(crate) last_status: Option<u32>,
    /// What went wrong on the last attempt.
    pub(crate) last_error: Option<String>,
    /// When the last attempt was made.
    pub(crate) last_attempt_at: Option<String>,
    /// When the endpoint took it.
    pub(crate) delivered_at: Option<String>,
    /// When it was made.
    pub(crate) created_at: String,
}

/// Response of `GET /webhooks/{id}/deliveries`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct DeliveriesJson {
    /// Newest event first.
    pub(crate) deliveries: Vec<DeliveryJson>,
}

impl From<pb::ListWebhookDeliveriesResponse> for DeliveriesJson {
    fn from(r: pb::ListWebhookDeliveriesResponse) -> Self {
        Self {
            deliveries: r
                .deliveries
                .into_iter()
                .map(|d| {
                    let state =
                        pb::WebhookDeliveryState::try_from(d.state).map(|s| s.as_str_name());
                    DeliveryJson {
                        id: d.id,
                        webhook_id: d.webhook_id,
                        event_id: d.event_id,
                        event_type: d.event_type,
                        transaction_id: d.transaction_id,
                        deposit_id: d.deposit_id,
                        payout_id: d.payout_id,
                        key_id: d.key_id,
                        state: short_name(state, "WEBHOOK_DELIVERY_STATE_").to_ascii_lowercase(),
                        attempts: d.attempts,
                        next_attempt_at: iso(d.next_attempt_at),
                        last_status: d.last_status,
                        last_error: d.last_error,
                        last_attempt_at: iso(d.last_attempt_at),
                        delivered_at: iso(d.delivered_at),
                        created_at: iso_or_empty(d.created_at),
                    }
                })
                .collect(),
        }
    }
}

/// Body of `POST /webhooks/{id}/deliveries/replay`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct ReplayBody {
    /// The dead deliveries to send again; absent or empty: every dead delivery of the
    /// endpoint.
    pub(crate) delivery_ids: Vec<String>,
}

/// Response of `POST /webhooks/{id}/deliveries/replay`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ReplayJson {
    /// Dead deliveries now pending again.
    pub(crate) replayed: u32,
}
