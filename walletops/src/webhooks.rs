//! `webhooks`: a user's endpoints and their deliveries, on the configured database.

use walletops_core::{
    Config, Core,
    requests::{DeliveriesRequest, NewWebhook, ReplayRequest, webhook_id},
};
use walletops_domain::{WebhookDelivery, WebhookEndpoint};
use walletops_proto::v1 as pb;

use crate::cli::WebhooksCommand;

fn print_endpoint(e: &WebhookEndpoint) {
    let types: Vec<String> = e.event_types.iter().map(|t| t.name()).collect();
    let state = match e.disabled {
        None => "enabled".to_owned(),
        Some(d) => format!("disabled ({}) {}", d.reason.as_str(), d.at.to_rfc3339()),
    };
    println!(
        "{}  {}  {}  registered {}  {state}",
        e.id,
        e.url,
        types.join(","),
        e.created_at.to_rfc3339()
    );
}

fn print_delivery(d: &WebhookDelivery) {
    let last = match (d.last_status, &d.last_error) {
        (_, Some(error)) => format!("  last: {error}"),
        (Some(status), None) => format!("  last: HTTP {status}"),
        (None, None) => String::new(),
    };
    println!(
        "{}  event {}  {:<24} {}  {:<9} attempts {}{last}",
        d.id,
        d.event_seq,
        d.event.name(),
        d.subject_id,
        d.state.as_str(),
        d.attempts
    );
}

fn print_secret(secret: &walletops_domain::secret::Secret) {
    println!("Signing secret: {}", secret.expose());
    println!("(The secret is shown only this once: store it now.)");
}

/// `webhooks create|list|delete|rotate-secret|deliveries|replay`.
pub(crate) async fn webhooks(config: Config, command: WebhooksCommand) -> anyhow::Result<()> {
    let core = Core::open(config).await?;
    match command {
        WebhooksCommand::Create { user, url, events } => {
            let user = core.users().find(&user).await?;
            let new = NewWebhook::parse(&pb::CreateWebhookRequest {
                url,
                event_types: events,
            })?;
            let (endpoint, secret) = core.webhooks.create_for_owner(user.id, new).await?;
            print_endpoint(&endpoint);
            print_secret(&secret);
        }
        WebhooksCommand::List { user } => {
            let user = core.users().find(&user).await?;
            for endpoint in core.webhooks.list(user.id).await? {
                print_endpoint(&endpoint);
            }
        }
        WebhooksCommand::Delete { user, id } => {
            let user = core.users().find(&user).await?;
            let endpoint = core
                .webhooks
                .delete(user.id, webhook_id(&id, "id")?)
                .await?;
            print_endpoint(&endpoint);
            println!("Deleted, with every delivery to it.");
        }
        WebhooksCommand::Enable { user, id } => {
            let user = core.users().find(&user).await?;
            let endpoint = core
                .webhooks
                .enable_for_owner(user.id, webhook_id(&id, "id")?)
                .await?;
            print_endpoint(&endpoint);
            println!("Enabled: its pending deliveries are sent, and new events delivered.");
        }
        WebhooksCommand::RotateSecret { user, id } => {
            let user = core.users().find(&user).await?;
            let (endpoint, secret) = core
                .webhooks
                .rotate_secret(user.id, webhook_id(&id, "id")?)
                .await?;
            print_endpoint(&endpoint);
            print_secret(&secret);
        }
        WebhooksCommand::Deliveries {
            user,
            id,
            state,
            limit,
        } => {
            let user = core.users().find(&user).await?;
            let state = match state.as_deref() {
                Some("pending") => pb::WebhookDeliveryState::Pending,
                Some("delivered") => pb::WebhookDeliveryState::Delivered,
                Some("dead") => pb::WebhookDeliveryState::Dead,
                _ => pb::WebhookDeliveryState::Unspecified,
            };
            let req = DeliveriesRequest::parse(&pb::ListWebhookDeliveriesRequest {
                webhook_id: id,
                state: state.into(),
                limit: Some(limit),
            })?;
            for delivery in core.webhooks.deliveries(user.id, &req).await? {
                print_delivery(&delivery);
            }
        }
        WebhooksCommand::Replay {
            user,
            id,
            deliveries,
        } => {
            let user = core.users().find(&user).await?;
            let req = ReplayRequest::parse(&pb::ReplayWebhookDeliveriesRequest {
                webhook_id: id,
                delivery_ids: deliveries,
            })?;
            let replayed = core.webhooks.replay(user.id, &req).await?;
            println!("{replayed} dead deliveries are pending again.");
        }
    }
    Ok(())
}
