//! The delivery worker every core runs: it leases due deliveries (one core per delivery),
//! POSTs each, signed, to its endpoint, and notes the answer: a 2xx delivers it; anything
//! else (another status, no answer within `webhooks.timeout_secs`, a refused address) is
//! retried after a growing wait until its retry window closes, then dead-lettered. An
//! endpoint that has failed without a break for `webhooks.disable_after_secs` is disabled.
//!
//! Delivery is fair: leases go round-robin across endpoints, at most
//! `webhooks.max_in_flight_per_endpoint` in flight at each (over every core), and a slot is
//! filled again as soon as its attempt ends, so an endpoint that never answers holds its own
//! few slots and nobody waits for its slowest delivery.
//!
//! A core that dies mid-attempt leaves its lease to run out; another core then sends the
//! delivery again, with the same `webhook-id`: receivers deduplicate by it (at least once).

use std::{future::Future, sync::Arc, time::Duration};

use backon::BackoffBuilder as _;
use uuid::Uuid;

use super::{WebhooksConfig, signing, targets};
use crate::{
    balances::Units,
    error::WalletOpsError,
    events::body::{Event, Subject, webhook_body},
    runner::{self, Pace},
    signer::Keystore,
};
use walletops_domain::{EventType, WebhookDelivery};
use walletops_store::{FailedAttempt, Store};

/// How often due deliveries are looked for when no attempt has ended meanwhile.
const POLL_EVERY: Duration = Duration::from_millis(200);

/// Attempts in flight at once per core. Each is leased as its slot frees, so one lease
/// covers one attempt's time.
const IN_FLIGHT: usize = 32;

/// A lease outlives an attempt by this much.
const LEASE_MARGIN: Duration = Duration::from_secs(10);

/// Sends the deliveries of every core's events.
pub struct Deliverer {
    store: Store,
    keystore: Arc<Keystore>,
    config: WebhooksConfig,
    units: Units,
    client: reqwest::Client,
    owner: Uuid,
}

impl std::fmt::Debug for Deliverer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deliverer")
            .field("owner", &self.owner)
            .finish_non_exhaustive()
    }
}

/// Why an attempt did not deliver.
enum Failure {
    /// The endpoint's fault (or its address's): counts against the retry window.
    Endpoint { status: Option<u16>, error: String },
    /// Ours (the database, the keystore): the lease runs out and the delivery is tried
    /// again then, its attempts untouched.
    Internal(WalletOpsError),
    /// The endpoint was deleted since the lease, and its deliveries with it: nothing to do.
    Gone,
    /// The endpoint was disabled since the lease: the delivery waits, pending.
    Disabled,
}

impl Deliverer {
    /// A worker over `store`, opening secrets with `keystore`, naming amounts in bodies with `units`.
    pub fn new(
        store: Store,
        keystore: Arc<Keystore>,
        config: WebhooksConfig,
        units: Units,
    ) -> anyhow::Result<Self> {
        let mut client = reqwest::Client::builder()
            .timeout(config.timeout())
            .connect_timeout(config.timeout())
            // A redirect could lead anywhere, inside the network too: never followed.
            .redirect(reqwest::redirect::Policy::none())
            // A proxy from the environment would make the request for us, to wherever it
            // resolves the name: the target checks would guard nothing.
            .no_proxy()
            .user_agent(concat!("WalletOps-Webhooks/", env!("CARGO_PKG_VERSION")));
        if !config.allow_private_targets {
            client = client.dns_resolver(Arc::new(targets::PublicOnly));
        }
        Ok(Self {
            store,
            keystore,
            config,
            units,
            client: client.build()?,
            owner: Uuid::new_v4(),
        })
    }

    /// Sends due deliveries until `stop` completes, then gives up this core's leases.
    pub async fn run(self, stop: impl Future<Output = ()>) {
        let this = Arc::new(self);
        // Each attempt is a task of its own: polled beside the runner, not by it, so that an
        // attempt holding the database's write lock (SQLite's one writer) finishes while the
        // round waits for that lock to lease more. A round fills the free slots; an attempt
        // that ends wakes the next round at once, to fill its slot.
        let running = tokio::sync::Mutex::new(tokio::task::JoinSet::new());
        let round = || async {
            let free = IN_FLIGHT.saturating_sub(running.lock().await.len());
            if free > 0 {
                let leased = this.lease(free).await;
                let mut running = running.lock().await;
                for delivery in leased {
                    let worker = Arc::clone(&this);
                    running.spawn(async move { worker.attempt(delivery).await });
                }
            }
            Ok::<_, WalletOpsError>(())
        };
        let an_attempt_ends = || async {
            let mut running = running.lock().await;
            if running.join_next().await.is_none() {
                // Nothing in flight: only the pace or the stop ends the pause.
                std::future::pending::<()>().await;
            }
        };
        runner::run(
            "webhook delivery",
            Pace::After(POLL_EVERY),
            stop,
            round,
            an_attempt_ends,
        )
        .await;
        // Attempts cut short are sent again under the same `webhook-id`, by whichever core
        // leases them next.
        running.lock().await.shutdown().await;
        if let Err(e) = this.store.release_delivery_leases(this.owner).await {
            tracing::warn!(error = %e, "giving up webhook delivery leases failed");
        }
    }

    /// Leases up to `free` due deliveries, fairly across endpoints.
    async fn lease(&self, free: usize) -> Vec<WebhookDelivery> {
        let now = crate::clock::now();
        let lease = chrono::TimeDelta::from_std(self.config.timeout() + LEASE_MARGIN)
            .unwrap_or(chrono::TimeDelta::MAX);
        self.store
            .lease_deliveries(
                self.owner,
                now,
                now + lease,
                free as u64,
                self.config.max_in_flight_per_endpoint,
            )
            .await
            .inspect_err(|e| tracing::warn!(error = %e, "leasing webhook deliveries failed"))
            .unwrap_or_default()
    }

    /// One attempt at `delivery`, and its outcome noted.
    async fn attempt(&self, delivery: WebhookDelivery) {
        let started = std::time::Instant::now();
        let event_type = delivery.event.name();
        let outcome = match self.send(&delivery).await {
            Ok(status) => self
                .store
                .delivered(self.owner, delivery.id, delivery.endpoint_id, status)
                .await
                .map(|()| "delivered")
                .map_err(WalletOpsError::from),
            Err(Failure::Endpoint { status, error }) => {
                let wait = retry_wait(&self.config, delivery.attempts);
                let now = crate::clock::now();
                let next_attempt_at =
                    now + chrono::TimeDelta::from_std(wait).unwrap_or(chrono::TimeDelta::MAX);
                let disable_if_failing_since = now
                    - chrono::TimeDelta::from_std(self.config.disable_after())
                        .unwrap_or(chrono::TimeDelta::MAX);
                tracing::info!(
                    delivery = %delivery.id, endpoint = %delivery.endpoint_id, %error,
                    "webhook delivery failed",
                );
                self.store
                    .attempt_failed(
                        self.owner,
                        &delivery,
                        FailedAttempt {
                            status,
                            error,
                            next_attempt_at,
                            disable_if_failing_since,
                        },
                    )
                    .await
                    .map(|noted| {
                        if noted.endpoint_disabled {
                            tracing::warn!(
                                endpoint = %delivery.endpoint_id,
                                failing_for_secs = self.config.disable_after_secs,
                                "webhook endpoint disabled: every attempt failed for webhooks.disable_after_secs",
                            );
                        }
                        if noted.dead { "dead_lettered" } else { "retried" }
                    })
                    .map_err(WalletOpsError::from)
            }
            Err(Failure::Internal(e)) => Err(e),
            Err(Failure::Gone) => return,
            Err(Failure::Disabled) => {
                if let Err(e) = self
                    .store
                    .release_delivery_lease(self.owner, delivery.id)
                    .await
                {
                    tracing::warn!(delivery = %delivery.id, error = %e, "giving up a webhook delivery lease failed");
                }
                return;
            }
        };
        match outcome {
            Ok(outcome) => crate::metrics::webhook_attempt(event_type, outcome, started.elapsed()),
            Err(e) => tracing::warn!(
                delivery = %delivery.id, error = %e,
                "a webhook delivery could not be attempted; it is tried again when its lease runs out",
            ),
        }
    }

    /// POSTs `delivery` to its endpoint, signed; the endpoint's 2xx status.
    async fn send(&self, delivery: &WebhookDelivery) -> Result<u16, Failure> {
        let Some((endpoint, sealed)) = self
            .store
            .endpoint_for_delivery(delivery.endpoint_id)
            .await
            .map_err(|e| Failure::Internal(e.into()))?
        else {
            return Err(Failure::Gone);
        };
        // Revoked with its key (or failing too long) since the lease: not one more request.
        if endpoint.disabled.is_some() {
            return Err(Failure::Disabled);
        }
        let endpoint_error = |error: String| Failure::Endpoint {
            status: None,
            error,
        };
        if !self.config.allow_private_targets {
            targets::literal_allowed(&endpoint.url).map_err(|e| endpoint_error(e.to_string()))?;
        }
        let secret = self
            .keystore
            .open_webhook_secret(endpoint.id, &sealed)
            .map_err(|e| Failure::Internal(WalletOpsError::Internal(e)))?;
        let body = webhook_body(self.event_of(delivery).await?, &self.units);
        let id = delivery.id.to_string();
        let timestamp = crate::clock::now().timestamp();
        let signature = signing::signature(&secret, &id, timestamp, &body).ok_or_else(|| {
            Failure::Internal(WalletOpsError::Internal(anyhow::anyhow!(
                "the secret of webhook {} is malformed",
                endpoint.id
            )))
        })?;
        let answer = self
            .client
            .post(endpoint.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header("webhook-id", id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature)
            .body(body)
            .send()
            .await
            .map_err(|e| endpoint_error(describe(&e)))?;
        let status = answer.status();
        if status.is_success() {
            Ok(status.as_u16())
        } else {
            Err(Failure::Endpoint {
                status: Some(status.as_u16()),
                error: format!("the endpoint answered {status}"),
            })
        }
    }

    /// The event `delivery` tells, its subject read as it is now but in the state the
    /// event is about: a receiver reads `transaction.submitted` as SUBMITTED even when it
    /// arrives after the confirmation.
    async fn event_of(&self, delivery: &WebhookDelivery) -> Result<Event, Failure> {
        let missing = |what: String| Failure::Internal(WalletOpsError::NotFound(what));
        let subject = match delivery.event {
            EventType::Transaction(status) => {
                let mut record = self
                    .store
                    .find_transaction(delivery.user_id, delivery.subject_id)
                    .await
                    .map_err(|e| Failure::Internal(e.into()))?
                    .ok_or_else(|| missing(format!("transaction {}", delivery.subject_id)))?;
                record.status = status;
                Subject::Transaction(Box::new(record))
            }
            EventType::Deposit(state) => {
                let mut deposit = self
                    .store
                    .get_deposit(delivery.user_id, delivery.subject_id)
                    .await
                    .map_err(|e| Failure::Internal(e.into()))?
                    .ok_or_else(|| missing(format!("deposit {}", delivery.subject_id)))?;
                deposit.state = state;
                Subject::Deposit(Box::new(deposit))
            }
            EventType::KeyFrozen => {
                let frozen = self
                    .store
                    .frozen_line(delivery.subject_id)
                    .await
                    .map_err(|e| Failure::Internal(e.into()))?
                    // Unfrozen before its event went out: told as it was.
                    .unwrap_or_else(|| walletops_domain::FrozenLine {
                        line_id: delivery.subject_id,
                        user_id: delivery.user_id,
                        frozen_at: delivery.created_at,
                        reason: "unfrozen since".to_owned(),
                        transaction_id: uuid::Uuid::nil(),
                    });
                Subject::Key(Box::new(frozen))
            }
            EventType::PayoutCompleted => {
                let payout = self
                    .store
                    .get_payout(delivery.user_id, delivery.subject_id)
                    .await
                    .map_err(|e| Failure::Internal(e.into()))?
                    .ok_or_else(|| missing(format!("payout {}", delivery.subject_id)))?;
                let standings = self
                    .store
                    .payout_standings(std::slice::from_ref(&payout))
                    .await
                    .map_err(|e| Failure::Internal(e.into()))?;
                Subject::Payout(Box::new((
                    payout,
                    standings.into_iter().flatten().collect(),
                )))
            }
        };
        // The change's own time; a delivery made without its event (none is ever purged)
        // falls back on when it was made, a sequencer tick later.
        let at = self
            .store
            .event_at(delivery.event_seq)
            .await
            .map_err(|e| Failure::Internal(e.into()))?
            .unwrap_or(delivery.created_at);
        Ok(Event {
            event_type: delivery.event.name(),
            at,
            subject,
        })
    }
}

/// What went wrong with a request, with its causes (reqwest's own message is terse).
fn describe(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        return "no answer in time".to_owned();
    }
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The wait after a delivery's `attempts`-th failure (0: its first): exponential from
/// `first_retry_ms`, with jitter, at most `max_retry_interval_secs`.
fn retry_wait(config: &WebhooksConfig, attempts: u32) -> Duration {
    backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(config.first_retry_ms))
        .with_max_delay(Duration::from_secs(config.max_retry_interval_secs))
        .with_factor(2.0)
        .with_jitter()
        .without_max_times()
        .build()
        .nth(usize::try_from(attempts).unwrap_or(usize::MAX))
        .unwrap_or(Duration::from_secs(config.max_retry_interval_secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_wait_longer_each_time_up_to_the_cap() {
        let config = WebhooksConfig {
            first_retry_ms: 1000,
            max_retry_interval_secs: 60,
            ..WebhooksConfig::default()
        };
        let waits: Vec<Duration> = (0..12).map(|n| retry_wait(&config, n)).collect();
        // Jitter adds up to one more wait: the floor doubles until the cap.
        assert!(waits[0] >= Duration::from_secs(1) && waits[0] < Duration::from_secs(3));
        assert!(waits[3] >= Duration::from_secs(8), "{waits:?}");
        assert!(
            waits.iter().all(|w| *w <= Duration::from_secs(120)),
            "{waits:?}"
        );
        assert!(waits[11] >= Duration::from_secs(60), "{waits:?}");
    }
}
