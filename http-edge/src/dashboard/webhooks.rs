//! The Webhooks page: the user's endpoints with their state and the key that registered
//! each, a notice for every disabled one (its key revoked, or failing too long), and
//! deleting, rotating a secret, enabling again; an endpoint's recent deliveries, and
//! replaying its dead ones. The core's `WebhookService` decides all of it, as for an API
//! caller; enabling again is the one call it takes from a session only.

use askama::Template;
use axum::{
    extract::{Path, Query, State},
    http::StatusCode,
};
use axum_extra::extract::Form;
use serde::Deserialize;
use walletops_proto::v1 as pb;

use super::{
    Dashboard, Page, Signed, Visit,
    auth::CsrfForm,
    flash::{self, Flash},
    form_refusal, format,
};

/// One row of the endpoints table.
pub(crate) struct EndpointRow {
    pub(crate) id: String,
    pub(crate) url: String,
    pub(crate) events: String,
    pub(crate) created: String,
    /// `API key abcd`, `dashboard` or `owner (CLI)`.
    pub(crate) created_by: String,
    pub(crate) label: &'static str,
    pub(crate) badge: &'static str,
    pub(crate) enabled: bool,
    /// Why it is disabled, as the notice says it.
    pub(crate) why_disabled: Option<String>,
}

impl From<pb::Webhook> for EndpointRow {
    fn from(w: pb::Webhook) -> Self {
        let created_by = match pb::WebhookCreator::try_from(w.created_by) {
            Ok(pb::WebhookCreator::ApiKey) => format!(
                "API key {}",
                w.created_by_key_prefix.as_deref().unwrap_or("(gone)")
            ),
            Ok(pb::WebhookCreator::Dashboard) => "dashboard".to_owned(),
            _ => "owner (CLI)".to_owned(),
        };
        let enabled = pb::WebhookState::try_from(w.state) != Ok(pb::WebhookState::Disabled);
        let since = format::time(w.disabled_at);
        let why_disabled = (!enabled).then(|| {
            match pb::WebhookDisabledReason::try_from(w.disabled_reason) {
                Ok(pb::WebhookDisabledReason::KeyRevoked) => format!(
                    "disabled {since}: the API key that registered it was revoked"
                ),
                Ok(pb::WebhookDisabledReason::Failing) => format!(
                    "disabled {since}: every delivery failed for too long (webhooks.disable_after_secs)"
                ),
                _ => format!("disabled {since}"),
            }
        });
        let (label, badge) = if enabled {
            ("Enabled", "ok")
        } else {
            ("Disabled", "bad")
        };
        Self {
            id: w.id,
            url: w.url,
            events: w.event_types.join(", "),
            created: format::time(w.created_at),
            created_by,
            label,
            badge,
            enabled,
            why_disabled,
        }
    }
}

#[derive(Template)]
#[template(path = "dashboard/webhooks.html")]
struct WebhooksView {
    title: &'static str,
    signed: Option<Signed>,
    current: &'static str,
    endpoints: Vec<EndpointRow>,
    /// What was just done.
    notice: Option<String>,
    /// A secret just made: the endpoint's URL and the secret, shown this once.
    secret: Option<(String, String)>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct DoneQuery {
    done: Option<String>,
}

fn done_notice(done: Option<&str>) -> Option<String> {
    match done? {
        "deleted" => Some("The webhook is deleted, with every delivery to it.".to_owned()),
        "enabled" => Some(
            "The webhook is enabled again: its pending deliveries are sent, and new events delivered."
                .to_owned(),
        ),
        _ => None,
    }
}

/// `GET /dashboard/webhooks`.
pub(crate) async fn list(
    State(mut dashboard): State<Dashboard>,
    visit: Visit,
    Query(q): Query<DoneQuery>,
) -> Page {
    let signed = match dashboard.signed(&visit).await {
        Ok(s) => s,
        Err(page) => return page,
    };
    let notice = done_notice(q.done.as_deref());
    let (flash, jar) = flash::take(&visit, dashboard.secure_cookies);
    let secret = match flash {
        Some(Flash::NewSecret { url, secret }) => Some((url, secret)),
        _ => None,
    };
    let shown = page(&mut dashboard, &visit, signed, notice, secret).await;
    flash::with_jar(jar, shown)
}

async fn page(
    dashboard: &mut Dashboard,
    visit: &Visit,
    signed: Signed,
    notice: Option<String>,
    secret: Option<(String, String)>,
) -> Page {
    let endpoints = match dashboard
        .webhooks
        .list_webhooks(visit.call(pb::ListWebhooksRequest {}, None))
        .await
    {
        Ok(answer) => answer.into_inner().webhooks,
        Err(status) => return Page::from(status),
    };
    let view = WebhooksView {
        title: "Webhooks",
        signed: Some(signed),
        current: "webhooks",
        endpoints: endpoints.into_iter().map(EndpointRow::from).collect(),
        notice,
        secret,
    };
    Page::render(StatusCode::OK, &view)
}

/// `POST /dashboard/webhooks/{id}/delete`.
pub(crate) async fn delete(
    State(mut dashboard): State<Dashboard>,
    visit: Visit,
    Path(id): Path<String>,
    Form(form): Form<CsrfForm>,
) -> Page {
    let req = pb::DeleteWebhookRequest { id };
    match dashboard
        .webhooks
        .delete_webhook(visit.call(req, Some(&form.csrf)))
        .await
    {
        Ok(_) => Page::SeeOther("/dashboard/webhooks?done=deleted".to_owned()),
        Err(status) => Page::from(status),
    }
}

/// `POST /dashboard/webhooks/{id}/enable`: the owner turns a disabled endpoint back on.
pub(crate) async fn enable(
    State(mut dashboard): State<Dashboard>,
    visit: Visit,
    Path(id): Path<String>,
    Form(form): Form<CsrfForm>,
) -> Page {
    let req = pb::EnableWebhookRequest { id };
    match dashboard
        .webhooks
        .enable_webhook(visit.call(req, Some(&form.csrf)))
        .await
    {
        Ok(_) => Page::SeeOther("/dashboard/webhooks?done=enabled".to_owned()),
        Err(status) => Page::from(status),
    }
}

/// `POST /dashboard/webhooks/{id}/rotate`: 303 to the Webhooks page, the new secret in the
/// one-time flash (shown once).
pub(crate) async fn rotate(
    State(mut dashboard): State<Dashboard>,
    visit: Visit,
    Path(id): Path<String>,
    Form(form): Form<CsrfForm>,
) -> Page {
    let req = pb::RotateWebhookSecretRequest { id };
    match dashboard
        .webhooks
        .rotate_webhook_secret(visit.call(req, Some(&form.csrf)))
        .await
    {
        Ok(answer) => {
            let answer = answer.into_inner();
            let secret = Flash::NewSecret {
                url: answer.webhook.map(|w| w.url).unwrap_or_default(),
                secret: answer.secret,
            };
            let to = "/dashboard/webhooks".to_owned();
            flash::redirect_with(&visit, dashboard.secure_cookies, to, &secret)
        }
        Err(status) => Page::from(status),
    }
}

/// One row of an endpoint's deliveries.
pub(crate) struct DeliveryRow {
    pub(crate) id: String,
    pub(crate) event: String,
    pub(crate) transaction: String,
    pub(crate) state: &'static str,
    pub(crate) attempts: u32,
    pub(crate) last: String,
    pub(crate) created: String,
}

impl From<pb::WebhookDelivery> for DeliveryRow {
    fn from(d: pb::WebhookDelivery) -> Self {
        let state = match pb::WebhookDeliveryState::try_from(d.state) {
            Ok(pb::WebhookDeliveryState::Pending) => "pending",
            Ok(pb::WebhookDeliveryState::Delivered) => "delivered",
            Ok(pb::WebhookDeliveryState::Dead) => "dead",
            _ => "unknown",
        };
        let last = match (d.last_error, d.last_status) {
            (Some(error), _) => error,
            (None, Some(status)) => format!("HTTP {status}"),
            (None, None) => String::new(),
        };
        Self {
            id: d.id,
            event: d.event_type,
            transaction: d.transaction_id,
            state,
            attempts: d.attempts,
            last,
            created: format::time(d.created_at),
        }
    }
}

#[derive(Template)]
#[template(path = "dashboard/deliveries.html")]
struct DeliveriesView {
    title: &'static str,
    signed: Option<Signed>,
    current: &'static str,
    id: String,
    deliveries: Vec<DeliveryRow>,
    any_dead: bool,
    notice: Option<String>,
    error: Option<String>,
}

/// Deliveries a page lists.
const RECENT: u32 = 50;

#[derive(Debug, Deserialize)]
pub(crate) struct ReplayedQuery {
    replayed: Option<u32>,
}

/// `GET /dashboard/webhooks/{id}`: the endpoint's recent deliveries.
pub(crate) async fn deliveries(
    State(mut dashboard): State<Dashboard>,
    visit: Visit,
    Path(id): Path<String>,
    Query(q): Query<ReplayedQuery>,
) -> Page {
    let signed = match dashboard.signed(&visit).await {
        Ok(s) => s,
        Err(page) => return page,
    };
    let notice = q
        .replayed
        .map(|n| format!("{n} dead deliveries are pending again."));
    deliveries_page(&mut dashboard, &visit, signed, id, notice, None).await
}

async fn deliveries_page(
    dashboard: &mut Dashboard,
    visit: &Visit,
    signed: Signed,
    id: String,
    notice: Option<String>,
    error: Option<(StatusCode, String)>,
) -> Page {
    let req = pb::ListWebhookDeliveriesRequest {
        webhook_id: id.clone(),
        state: pb::WebhookDeliveryState::Unspecified.into(),
        limit: Some(RECENT),
    };
    let deliveries: Vec<DeliveryRow> = match dashboard
        .webhooks
        .list_webhook_deliveries(visit.call(req, None))
        .await
    {
        Ok(answer) => answer
            .into_inner()
            .deliveries
            .into_iter()
            .map(DeliveryRow::from)
            .collect(),
        Err(status) => return Page::from(status),
    };
    let (status, error) = match error {
        Some((status, message)) => (status, Some(message)),
        None => (StatusCode::OK, None),
    };
    let view = DeliveriesView {
        title: "Webhook deliveries",
        signed: Some(signed),
        current: "webhooks",
        any_dead: deliveries.iter().any(|d| d.state == "dead"),
        id,
        deliveries,
        notice,
        error,
    };
    Page::render(status, &view)
}

/// `POST /dashboard/webhooks/{id}/replay`: the endpoint's dead deliveries, pending again
/// (as many as one replay may take).
pub(crate) async fn replay(
    State(mut dashboard): State<Dashboard>,
    visit: Visit,
    Path(id): Path<String>,
    Form(form): Form<CsrfForm>,
) -> Page {
    let signed = match dashboard.signed(&visit).await {
        Ok(s) => s,
        Err(page) => return page,
    };
    let req = pb::ReplayWebhookDeliveriesRequest {
        webhook_id: id.clone(),
        delivery_ids: Vec::new(),
    };
    match dashboard
        .webhooks
        .replay_webhook_deliveries(visit.call(req, Some(&form.csrf)))
        .await
    {
        Ok(answer) => Page::SeeOther(format!(
            "/dashboard/webhooks/{id}?replayed={}",
            answer.into_inner().replayed
        )),
        Err(status) => match form_refusal(status) {
            Ok(refused) => {
                deliveries_page(&mut dashboard, &visit, signed, id, None, Some(refused)).await
            }
            Err(page) => page,
        },
    }
}
