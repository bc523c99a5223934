//! Webhooks: signed deliveries of transaction events to the endpoints users register,
//! following the Standard Webhooks convention. Endpoints are managed here (their secrets
//! sealed under the master key), deliveries are made by the event sequencer
//! (`Store::sequence_events`) and sent by every core's worker (`delivery`); how a delivery
//! is signed is `signing`, which URLs may receive one is `targets`.

pub mod config;
pub mod delivery;
pub mod signing;
pub mod targets;

use std::sync::Arc;

use uuid::Uuid;

pub use config::WebhooksConfig;

use crate::{
    auth::{Caller, Credential},
    error::{Result, WalletOpsError},
    signer::Keystore,
};
use walletops_domain::secret::Secret;
use walletops_domain::{DeliveryState, EndpointMaker, EventType, WebhookDelivery, WebhookEndpoint};
use walletops_store::{NewEndpoint, ReplayCap, Store, StoreError};

/// The most endpoints one user may register.
pub const MAX_ENDPOINTS: u64 = 20;

/// Users' webhook endpoints.
#[derive(Debug, Clone)]
pub struct Webhooks {
    store: Store,
    keystore: Arc<Keystore>,
    config: WebhooksConfig,
}

impl Webhooks {
    /// Endpoints in `store`, their secrets sealed by `keystore`.
    pub fn new(store: Store, keystore: Arc<Keystore>, config: WebhooksConfig) -> Self {
        Self {
            store,
            keystore,
            config,
        }
    }

    /// Registers `new` for `caller`, as made by the key or session it called with: its URL
    /// must reach a public address (unless private targets are allowed). The endpoint and its
    /// secret, shown this once.
    pub async fn create(
        &self,
        caller: &Caller,
        new: NewWebhook,
    ) -> Result<(WebhookEndpoint, Secret)> {
        let maker = match caller.credential {
            Credential::Key { id, .. } => EndpointMaker::Key(id),
            Credential::Session { id } => EndpointMaker::Session(id),
        };
        self.register(caller.user_id, maker, new).await
    }

    /// Registers `new` for `user_id` as its owner (the command line): no key's revocation
    /// disables it.
    pub async fn create_for_owner(
        &self,
        user_id: Uuid,
        new: NewWebhook,
    ) -> Result<(WebhookEndpoint, Secret)> {
        self.register(user_id, EndpointMaker::Owner, new).await
    }

    async fn register(
        &self,
        user_id: Uuid,
        created_by: EndpointMaker,
        new: NewWebhook,
    ) -> Result<(WebhookEndpoint, Secret)> {
        let url = targets::check(new.url.as_str(), self.config.allow_private_targets)
            .await
            .map_err(|e| WalletOpsError::invalid("url", e.to_string()))?;
        let endpoint = WebhookEndpoint {
            id: Uuid::new_v4(),
            user_id,
            url,
            event_types: new.event_types,
            created_at: crate::clock::now(),
            created_by,
            disabled: None,
        };
        let (secret, sealed) = self.new_secret(endpoint.id).await?;
        let endpoint = self
            .store
            .insert_endpoint(NewEndpoint { endpoint, sealed }, MAX_ENDPOINTS, |check| {
                self.keystore.opens_check(check)
            })
            .await
            .map_err(|e| match e {
                StoreError::Full(max) => WalletOpsError::invalid(
                    "url",
                    format!("a user may register at most {max} webhooks: delete one first"),
                ),
                StoreError::MakerInactive => {
                    WalletOpsError::Unauthorized("key revoked while registering a webhook")
                }
                e => e.into(),
            })?;
        Ok((endpoint, secret))
    }

    /// `user_id`'s endpoints, oldest first.
    pub async fn list(&self, user_id: Uuid) -> Result<Vec<WebhookEndpoint>> {
        Ok(self.store.endpoints(user_id).await?)
    }

    /// Refuses (`FORBIDDEN`) to let `caller` delete endpoint `id` or see a new secret of it
    /// unless it is the owner (a dashboard session) or a key of the line that registered it:
    /// a key could otherwise take over the owner's endpoint, learn its secret and forge
    /// deliveries to the owner's receiver after the key is revoked.
    pub async fn may_change(&self, caller: &Caller, id: Uuid) -> Result<()> {
        let Credential::Key { line, .. } = &caller.credential else {
            return Ok(());
        };
        let endpoint = self.store.endpoint(caller.user_id, id).await?;
        let made_by_line = match endpoint.created_by {
            EndpointMaker::Key(maker) => self
                .store
                .api_key(maker)
                .await?
                .is_some_and(|k| k.lineage_id == *line),
            _ => false,
        };
        if made_by_line {
            return Ok(());
        }
        Err(WalletOpsError::Forbidden(
            "this webhook was registered by the owner or by another key: only the owner (the \
             dashboard or the CLI) or a key of the line that registered it may delete it or \
             rotate its secret"
                .to_owned(),
        ))
    }

    /// Deletes `user_id`'s endpoint `id` and its deliveries.
    pub async fn delete(&self, user_id: Uuid, id: Uuid) -> Result<WebhookEndpoint> {
        Ok(self.store.delete_endpoint(user_id, id).await?)
    }

    /// Gives `user_id`'s endpoint `id` a new secret, shown this once.
    pub async fn rotate_secret(
        &self,
        user_id: Uuid,
        id: Uuid,
    ) -> Result<(WebhookEndpoint, Secret)> {
        self.store.endpoint(user_id, id).await?;
        let (secret, sealed) = self.new_secret(id).await?;
        let endpoint = self
            .store
            .reseal_endpoint(user_id, id, sealed, |check| {
                self.keystore.opens_check(check)
            })
            .await?;
        Ok((endpoint, secret))
    }

    /// The deliveries `req` asks for, of one of `user_id`'s endpoints.
    pub async fn deliveries(
        &self,
        user_id: Uuid,
        req: &DeliveriesRequest,
    ) -> Result<Vec<WebhookDelivery>> {
        Ok(self
            .store
            .deliveries(user_id, req.webhook_id, req.state, req.limit)
            .await?)
    }

    /// Puts the dead deliveries `req` names back in line with a new retry window; how many.
    /// Naming more than `webhooks.replay_max_per_call` is refused, naming none replays that
    /// many at most (the oldest), and past `webhooks.replay_max_per_hour` the user's replays
    /// wait: each sends every delivery again, to a receiver that may not want them all.
    pub async fn replay(&self, user_id: Uuid, req: &ReplayRequest) -> Result<u64> {
        let per_call = self.config.replay_max_per_call;
        if req.delivery_ids.len() as u64 > per_call {
            return Err(WalletOpsError::invalid(
                "delivery_ids",
                format!("at most {per_call} deliveries per replay (webhooks.replay_max_per_call)"),
            ));
        }
        let now = crate::clock::now();
        let retry_until = now
            + chrono::TimeDelta::from_std(self.config.retry_for())
                .unwrap_or(chrono::TimeDelta::MAX);
        let cap = ReplayCap {
            per_call,
            per_hour: self.config.replay_max_per_hour,
            now,
        };
        Ok(self
            .store
            .replay_deliveries(user_id, req.webhook_id, &req.delivery_ids, retry_until, cap)
            .await?)
    }

    /// Enables `caller`'s endpoint `id` again. Only the owner may, signed in to the
    /// dashboard: an API key is refused, so a key revoked for a leak (whose endpoints were
    /// disabled with it) cannot be followed by another key of its line turning them back on.
    pub async fn enable(&self, caller: &Caller, id: Uuid) -> Result<WebhookEndpoint> {
        match caller.credential {
            Credential::Key { .. } => Err(WalletOpsError::Forbidden(
                "only the owner may enable a webhook again, from the dashboard or the CLI; an API key may not"
                    .to_owned(),
            )),
            Credential::Session { .. } => self.enable_for_owner(caller.user_id, id).await,
        }
    }

    /// Enables `user_id`'s endpoint `id` again, for its owner (the command line).
    pub async fn enable_for_owner(&self, user_id: Uuid, id: Uuid) -> Result<WebhookEndpoint> {
        Ok(self.store.enable_endpoint(user_id, id).await?)
    }

    /// The delivery worker of this core, naming amounts in bodies with `units`.
    pub fn deliverer(&self, units: crate::balances::Units) -> anyhow::Result<delivery::Deliverer> {
        delivery::Deliverer::new(
            self.store.clone(),
            self.keystore.clone(),
            self.config.clone(),
            units,
        )
    }

    /// A new secret for endpoint `id`, and it sealed. The database is first bound to this
    /// core's master key, as for a new wallet key.
    async fn new_secret(&self, id: Uuid) -> Result<(Secret, walletops_domain::SealedKey)> {
        self.keystore
            .bind_to(&self.store)
            .await
            .map_err(WalletOpsError::Internal)?;
        let secret = signing::new_secret();
        let sealed = self
            .keystore
            .seal_webhook_secret(id, &secret)
            .map_err(WalletOpsError::Internal)?;
        Ok((secret, sealed))
    }
}
/// `CreateWebhook`: an endpoint to register (its address not yet checked: that needs DNS).
#[derive(Debug, Clone)]
pub struct NewWebhook {
    /// Where to POST.
    pub url: url::Url,
    /// What to send it.
    pub event_types: Vec<EventType>,
}

/// `ListWebhookDeliveries`.
#[derive(Debug, Clone)]
pub struct DeliveriesRequest {
    /// The endpoint.
    pub webhook_id: Uuid,
    /// Only this state's.
    pub state: Option<DeliveryState>,
    /// At most this many.
    pub limit: u64,
}

/// `ReplayWebhookDeliveries`.
#[derive(Debug, Clone)]
pub struct ReplayRequest {
    /// The endpoint.
    pub webhook_id: Uuid,
    /// The deliveries; empty: every dead one.
    pub delivery_ids: Vec<Uuid>,
}
