//! `WebhookService` requests.

use std::str::FromStr;

use uuid::Uuid;
use walletops_proto::v1 as pb;

use crate::{
    error::{Result, Violations, WalletOpsError},
    webhooks::{DeliveriesRequest, NewWebhook, ReplayRequest},
};
use walletops_domain::{DeliveryState, EventType};

/// The longest URL an endpoint may have.
const MAX_URL_LEN: usize = 2048;

/// Deliveries listed at once by default, and at most.
const DEFAULT_LIMIT: u64 = 100;
const MAX_LIMIT: u64 = 500;

fn url(raw: &str) -> Result<url::Url, String> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Err("required: an http or https URL".to_owned());
    }
    if raw.len() > MAX_URL_LEN {
        return Err(format!("at most {MAX_URL_LEN} characters"));
    }
    let url = url::Url::parse(raw).map_err(|e| format!("not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none_or(str::is_empty) {
        return Err("must be an http or https URL with a host".to_owned());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("must not carry a user name or password".to_owned());
    }
    Ok(url)
}

fn event_types(names: &[String]) -> Result<Vec<EventType>, String> {
    if names.is_empty() {
        return Ok(EventType::ALL.to_vec());
    }
    let mut types = Vec::new();
    for name in names {
        let kind = EventType::parse(name.trim()).ok_or_else(|| {
            format!(
                "unknown event type {name:?}: one of {}",
                EventType::ALL.map(EventType::name).join(", ")
            )
        })?;
        if !types.contains(&kind) {
            types.push(kind);
        }
    }
    Ok(types)
}

impl NewWebhook {
    /// Parses `req`, every bad field in one `INVALID_INPUT`.
    pub fn parse(req: &pb::CreateWebhookRequest) -> Result<Self> {
        let mut v = Violations::default();
        let url = v.check("url", url(&req.url));
        let event_types = v.check("event_types", event_types(&req.event_types));
        v.finish()?;
        match (url, event_types) {
            (Some(url), Some(event_types)) => Ok(Self { url, event_types }),
            _ => Err(WalletOpsError::invalid("url", "unreadable")),
        }
    }
}

/// An endpoint id in field `field`.
pub fn webhook_id(raw: &str, field: &str) -> Result<Uuid> {
    id_text(raw).map_err(|e| WalletOpsError::invalid(field, e))
}

fn id_text(raw: &str) -> Result<Uuid, String> {
    Uuid::from_str(raw.trim()).map_err(|_| "must be a webhook id (a UUID)".to_owned())
}

impl DeliveriesRequest {
    /// Parses `req`, every bad field in one `INVALID_INPUT`.
    pub fn parse(req: &pb::ListWebhookDeliveriesRequest) -> Result<Self> {
        let mut v = Violations::default();
        let webhook_id = v.check("webhook_id", id_text(&req.webhook_id));
        let state = v.check(
            "state",
            match pb::WebhookDeliveryState::try_from(req.state) {
                Ok(pb::WebhookDeliveryState::Unspecified) => Ok(None),
                Ok(pb::WebhookDeliveryState::Pending) => Ok(Some(DeliveryState::Pending)),
                Ok(pb::WebhookDeliveryState::Delivered) => Ok(Some(DeliveryState::Delivered)),
                Ok(pb::WebhookDeliveryState::Dead) => Ok(Some(DeliveryState::Dead)),
                Err(_) => Err("unknown state".to_owned()),
            },
        );
        let limit = v.check(
            "limit",
            match req.limit.map(u64::from) {
                None => Ok(DEFAULT_LIMIT),
                Some(n) if (1..=MAX_LIMIT).contains(&n) => Ok(n),
                Some(_) => Err(format!("must be 1 to {MAX_LIMIT}")),
            },
        );
        v.finish()?;
        match (webhook_id, state, limit) {
            (Some(webhook_id), Some(state), Some(limit)) => Ok(Self {
                webhook_id,
                state,
                limit,
            }),
            _ => Err(WalletOpsError::invalid("webhook_id", "unreadable")),
        }
    }
}

impl ReplayRequest {
    /// Parses `req`, every bad field in one `INVALID_INPUT`.
    pub fn parse(req: &pb::ReplayWebhookDeliveriesRequest) -> Result<Self> {
        let mut v = Violations::default();
        let webhook_id = v.check("webhook_id", id_text(&req.webhook_id));
        let delivery_ids = v.check(
            "delivery_ids",
            req.delivery_ids
                .iter()
                .map(|id| {
                    Uuid::from_str(id.trim())
                        .map_err(|_| format!("{id:?} is not a delivery id (a UUID)"))
                })
                .collect::<Result<Vec<_>, _>>(),
        );
        v.finish()?;
        match (webhook_id, delivery_ids) {
            (Some(webhook_id), Some(delivery_ids)) => Ok(Self {
                webhook_id,
                delivery_ids,
            }),
            _ => Err(WalletOpsError::invalid("webhook_id", "unreadable")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use walletops_domain::TxStatus;

    #[test]
    fn a_new_webhook_names_every_bad_field() {
        let err = NewWebhook::parse(&pb::CreateWebhookRequest {
            url: "ftp://example.com".to_owned(),
            event_types: vec!["transaction.mined".to_owned()],
        })
        .expect_err("refused")
        .to_string();
        assert!(err.contains("url") && err.contains("event_types"), "{err}");
    }

    #[test]
    fn no_event_types_means_all_and_duplicates_collapse() {
        let all = NewWebhook::parse(&pb::CreateWebhookRequest {
            url: "https://example.com/hook".to_owned(),
            event_types: vec![],
        })
        .expect("parsed");
        assert_eq!(all.event_types, EventType::ALL);
        let one = NewWebhook::parse(&pb::CreateWebhookRequest {
            url: "https://example.com/hook".to_owned(),
            event_types: vec![
                "transaction.confirmed".to_owned(),
                "transaction.confirmed".to_owned(),
            ],
        })
        .expect("parsed");
        assert_eq!(
            one.event_types,
            [EventType::Transaction(TxStatus::Confirmed)]
        );
    }

    #[test]
    fn credentials_in_the_url_are_refused() {
        assert!(url("https://user:pw@example.com/hook").is_err());
    }
}
