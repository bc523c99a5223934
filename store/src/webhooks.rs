//! Webhook endpoints and their deliveries. Deliveries are made by the event sequencer in the
//! transaction that numbers their events (`create_deliveries`), so an event committed is
//! delivered and one rolled back never is; the cores' workers then lease them like monitor
//! records, one core per delivery, an earlier delivery of a transaction to an endpoint
//! holding its later ones back.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveValue::Set,
    ColumnTrait, Condition, ConnectionTrait, DatabaseBackend, EntityTrait, PaginatorTrait,
    QueryFilter, QueryOrder, QuerySelect, Statement,
    sea_query::{Expr, ExprTrait as _},
};
use uuid::Uuid;

use super::{
    Store,
    entities::{transaction_events as events, webhook_deliveries as deliveries, webhook_endpoints},
};
use crate::error::{Result, StoreError};
use walletops_domain::{DeliveryState, SealedKey, TxStatus, WebhookDelivery, WebhookEndpoint};

/// An endpoint to register.
#[derive(Debug)]
pub struct NewEndpoint {
    /// The endpoint; its `created_at` is kept.
    pub endpoint: WebhookEndpoint,
    /// Its secret, sealed.
    pub sealed: SealedKey,
}

/// How a failed attempt is noted.
#[derive(Debug)]
pub struct FailedAttempt {
    /// The endpoint's HTTP status; none: it did not answer.
    pub status: Option<u16>,
    /// What went wrong, for the owner to read.
    pub error: String,
    /// When to try again; past the delivery's retry window, it is dead-lettered instead.
    pub next_attempt_at: DateTime<Utc>,
}

fn endpoint_of(m: webhook_endpoints::Model) -> Result<WebhookEndpoint> {
    Ok(WebhookEndpoint {
        id: m.id,
        user_id: m.user_id,
        url: url::Url::parse(&m.url).map_err(|e| {
            StoreError::Corrupt(anyhow::anyhow!("webhook {} has a bad URL: {e}", m.id))
        })?,
        event_types: m
            .event_types
            .split(',')
            .filter_map(TxStatus::from_event_type)
            .collect(),
        created_at: m.created_at,
    })
}

fn delivery_of(m: deliveries::Model) -> Result<WebhookDelivery> {
    let bad = |what: &str| {
        StoreError::Corrupt(anyhow::anyhow!(
            "webhook delivery {} has a bad {what}",
            m.id
        ))
    };
    Ok(WebhookDelivery {
        id: m.id,
        endpoint_id: m.endpoint_id,
        user_id: m.user_id,
        event_seq: u64::try_from(m.event_seq).map_err(|_| bad("event number"))?,
        transaction_id: m.transaction_id,
        status: TxStatus::from_event_type(&m.event_type).ok_or_else(|| bad("event type"))?,
        state: DeliveryState::parse(&m.state).ok_or_else(|| bad("state"))?,
        attempts: u32::try_from(m.attempts).unwrap_or_default(),
        next_attempt_at: m.next_attempt_at,
        retry_until: m.retry_until,
        last_status: m.last_status.and_then(|s| u16::try_from(s).ok()),
        last_error: m.last_error,
        last_attempt_at: m.last_attempt_at,
        delivered_at: m.delivered_at,
        created_at: m.created_at,
    })
}

fn event_types_text(types: &[TxStatus]) -> String {
    types
        .iter()
        .map(|t| t.event_type())
        .collect::<Vec<_>>()
        .join(",")
}

/// The stored form of an error, cut to its column.
fn clipped(error: &str) -> String {
    error.chars().take(500).collect()
}

impl Store {
    /// Registers `new`, refused `Full` once its owner has `max`, and (as for a wallet,
    /// see `insert_wallet`) when `ours` says the database's keystore check does not open
    /// under the key that sealed its secret.
    pub async fn insert_endpoint(
        &self,
        new: NewEndpoint,
        max: u64,
        ours: impl Fn(&SealedKey) -> bool,
    ) -> Result<WebhookEndpoint> {
        let e = &new.endpoint;
        let txn = self.begin_sea().await?;
        super::rotation::refuse_rotated_away(&txn, ours).await?;
        let held = webhook_endpoints::Entity::find()
            .filter(webhook_endpoints::Column::UserId.eq(e.user_id))
            .count(&txn)
            .await?;
        if held >= max {
            return Err(StoreError::Full(max));
        }
        webhook_endpoints::Entity::insert(webhook_endpoints::ActiveModel {
            id: Set(e.id),
            user_id: Set(e.user_id),
            url: Set(e.url.to_string()),
            event_types: Set(event_types_text(&e.event_types)),
            secret_nonce: Set(new.sealed.nonce),
            secret_ciphertext: Set(new.sealed.ciphertext),
            created_at: Set(e.created_at),
        })
        .exec_without_returning(&txn)
        .await?;
        txn.commit().await?;
        Ok(new.endpoint)
    }

    /// `user_id`'s endpoints, oldest first.
    pub async fn endpoints(&self, user_id: Uuid) -> Result<Vec<WebhookEndpoint>> {
        webhook_endpoints::Entity::find()
            .filter(webhook_endpoints::Column::UserId.eq(user_id))
            .order_by_asc(webhook_endpoints::Column::CreatedAt)
            .all(self.sea())
            .await?
            .into_iter()
            .map(endpoint_of)
            .collect()
    }

    /// `user_id`'s endpoint `id`.
    pub async fn endpoint(&self, user_id: Uuid, id: Uuid) -> Result<WebhookEndpoint> {
        let m = webhook_endpoints::Entity::find_by_id(id)
            .filter(webhook_endpoints::Column::UserId.eq(user_id))
            .one(self.sea())
            .await?
            .ok_or(StoreError::NoSuchWebhook(id))?;
        endpoint_of(m)
    }

    /// Endpoint `id` and its sealed secret, whoever owns it: for a delivery to it.
    pub async fn endpoint_for_delivery(
        &self,
        id: Uuid,
    ) -> Result<Option<(WebhookEndpoint, SealedKey)>> {
        let Some(m) = webhook_endpoints::Entity::find_by_id(id)
            .one(self.sea())
            .await?
        else {
            return Ok(None);
        };
        let sealed = SealedKey {
            nonce: m.secret_nonce.clone(),
            ciphertext: m.secret_ciphertext.clone(),
        };
        Ok(Some((endpoint_of(m)?, sealed)))
    }

    /// Deletes `user_id`'s endpoint `id` with its deliveries, pending ones too: nothing more
    /// is sent to it.
    pub async fn delete_endpoint(&self, user_id: Uuid, id: Uuid) -> Result<WebhookEndpoint> {
        let endpoint = self.endpoint(user_id, id).await?;
        let txn = self.begin_sea().await?;
        deliveries::Entity::delete_many()
            .filter(deliveries::Column::EndpointId.eq(id))
            .exec(&txn)
            .await?;
        webhook_endpoints::Entity::delete_by_id(id)
            .exec(&txn)
            .await?;
        txn.commit().await?;
        Ok(endpoint)
    }

    /// Replaces the sealed secret of `user_id`'s endpoint `id`: deliveries from now on,
    /// retries included, are signed with the new one. Refused as `insert_endpoint` is.
    pub async fn reseal_endpoint(
        &self,
        user_id: Uuid,
        id: Uuid,
        sealed: SealedKey,
        ours: impl Fn(&SealedKey) -> bool,
    ) -> Result<WebhookEndpoint> {
        let endpoint = self.endpoint(user_id, id).await?;
        let txn = self.begin_sea().await?;
        super::rotation::refuse_rotated_away(&txn, ours).await?;
        webhook_endpoints::Entity::update_many()
            .col_expr(
                webhook_endpoints::Column::SecretNonce,
                Expr::value(sealed.nonce),
            )
            .col_expr(
                webhook_endpoints::Column::SecretCiphertext,
                Expr::value(sealed.ciphertext),
            )
            .filter(webhook_endpoints::Column::Id.eq(id))
            .exec(&txn)
            .await?;
        txn.commit().await?;
        Ok(endpoint)
    }

    /// Makes, in the sequencer's transaction `conn`, the deliveries of the events numbered
    /// `(after, upto]` to every endpoint of their owners that wants their type; they may be
    /// retried until `retry_until`.
    pub(super) async fn create_deliveries<C: ConnectionTrait>(
        &self,
        conn: &C,
        (after, upto): (i64, i64),
        retry_until: DateTime<Utc>,
    ) -> Result<()> {
        let numbered = events::Entity::find()
            .filter(events::Column::Seq.gt(after))
            .filter(events::Column::Seq.lte(upto))
            .order_by_asc(events::Column::Seq)
            .all(conn)
            .await?;
        let users: HashSet<Uuid> = numbered.iter().map(|e| e.user_id).collect();
        if users.is_empty() {
            return Ok(());
        }
        let mut endpoints: HashMap<Uuid, Vec<WebhookEndpoint>> = HashMap::new();
        for m in webhook_endpoints::Entity::find()
            .filter(webhook_endpoints::Column::UserId.is_in(users))
            .all(conn)
            .await?
        {
            let endpoint = endpoint_of(m)?;
            endpoints
                .entry(endpoint.user_id)
                .or_default()
                .push(endpoint);
        }
        if endpoints.is_empty() {
            return Ok(());
        }
        let now = Utc::now();
        let mut rows = Vec::new();
        for event in numbered {
            let Some(seq) = event.seq else { continue };
            let Some(status) = TxStatus::ALL
                .into_iter()
                .find(|s| s.as_str() == event.status)
            else {
                continue;
            };
            for endpoint in endpoints.get(&event.user_id).into_iter().flatten() {
                if !endpoint.event_types.contains(&status) {
                    continue;
                }
                rows.push(deliveries::ActiveModel {
                    id: Set(Uuid::now_v7()),
                    endpoint_id: Set(endpoint.id),
                    user_id: Set(event.user_id),
                    event_seq: Set(seq),
                    transaction_id: Set(event.transaction_id),
                    event_type: Set(status.event_type()),
                    state: Set(DeliveryState::Pending.as_str().to_owned()),
                    attempts: Set(0),
                    next_attempt_at: Set(now),
                    retry_until: Set(retry_until),
                    lease_owner: Set(None),
                    lease_until: Set(None),
                    last_status: Set(None),
                    last_error: Set(None),
                    last_attempt_at: Set(None),
                    delivered_at: Set(None),
                    created_at: Set(now),
                });
            }
        }
        for run in super::in_cached_shapes(rows) {
            deliveries::Entity::insert_many(run)
                .exec_without_returning(conn)
                .await?;
        }
        Ok(())
    }

    /// Leases to `owner` until `until` up to `limit` pending deliveries due at `now` whose
    /// lease is free, none held back by an earlier pending delivery of its transaction to
    /// its endpoint; the ones won, oldest event first. As with records, the lease is one
    /// conditional UPDATE, so of several cores exactly one wins each delivery.
    pub async fn lease_deliveries(
        &self,
        owner: Uuid,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: u64,
    ) -> Result<Vec<WebhookDelivery>> {
        let backend = self.sea().get_database_backend();
        let (now_at, limit_at) = match backend {
            DatabaseBackend::Postgres => ("$1", "$2"),
            _ => ("?1", "?2"),
        };
        let candidates: Vec<Uuid> = self
            .sea()
            .query_all_raw(Statement::from_sql_and_values(
                backend,
                format!(
                    "SELECT d.id FROM webhook_deliveries d \
                     WHERE d.state = 'pending' AND d.next_attempt_at <= {now_at} \
                       AND (d.lease_until IS NULL OR d.lease_until < {now_at}) \
                       AND NOT EXISTS (SELECT 1 FROM webhook_deliveries e \
                           WHERE e.endpoint_id = d.endpoint_id \
                             AND e.transaction_id = d.transaction_id \
                             AND e.state = 'pending' AND e.event_seq < d.event_seq) \
                     ORDER BY d.event_seq LIMIT {limit_at}"
                ),
                [now.into(), i64::try_from(limit).unwrap_or(i64::MAX).into()],
            ))
            .await?
            .iter()
            .map(|row| row.try_get::<Uuid>("", "id"))
            .collect::<std::result::Result<_, _>>()?;
        if candidates.is_empty() {
            return Ok(Vec::new());
        }
        let mut leased = deliveries::Entity::update_many()
            .col_expr(deliveries::Column::LeaseOwner, Expr::value(owner))
            .col_expr(deliveries::Column::LeaseUntil, Expr::value(until))
            .filter(deliveries::Column::Id.is_in(candidates))
            .filter(deliveries::Column::State.eq(DeliveryState::Pending.as_str()))
            .filter(
                Condition::any()
                    .add(deliveries::Column::LeaseUntil.is_null())
                    .add(deliveries::Column::LeaseUntil.lt(now)),
            )
            .exec_with_returning(self.sea())
            .await?;
        leased.sort_by_key(|m| m.event_seq);
        leased.into_iter().map(delivery_of).collect()
    }

    /// Notes that `owner`'s delivery `id` was taken with HTTP `status`.
    pub async fn delivered(&self, owner: Uuid, id: Uuid, status: u16) -> Result<()> {
        let now = Utc::now();
        deliveries::Entity::update_many()
            .col_expr(
                deliveries::Column::State,
                Expr::value(DeliveryState::Delivered.as_str()),
            )
            .col_expr(
                deliveries::Column::Attempts,
                Expr::col(deliveries::Column::Attempts).add(1),
            )
            .col_expr(
                deliveries::Column::LastStatus,
                Expr::value(i32::from(status)),
            )
            .col_expr(
                deliveries::Column::LastError,
                Expr::value(Option::<String>::None),
            )
            .col_expr(deliveries::Column::LastAttemptAt, Expr::value(now))
            .col_expr(deliveries::Column::DeliveredAt, Expr::value(now))
            .col_expr(
                deliveries::Column::LeaseUntil,
                Expr::value(Option::<DateTime<Utc>>::None),
            )
            .filter(deliveries::Column::Id.eq(id))
            .filter(deliveries::Column::LeaseOwner.eq(owner))
            .exec(self.sea())
            .await?;
        Ok(())
    }

    /// Notes a failed attempt at `owner`'s delivery `delivery`: due again at
    /// `failed.next_attempt_at`, or dead-lettered when that is past its retry window.
    /// Whether it was dead-lettered.
    pub async fn attempt_failed(
        &self,
        owner: Uuid,
        delivery: &WebhookDelivery,
        failed: FailedAttempt,
    ) -> Result<bool> {
        let dead = failed.next_attempt_at > delivery.retry_until;
        let state = if dead {
            DeliveryState::Dead
        } else {
            DeliveryState::Pending
        };
        deliveries::Entity::update_many()
            .col_expr(deliveries::Column::State, Expr::value(state.as_str()))
            .col_expr(
                deliveries::Column::Attempts,
                Expr::col(deliveries::Column::Attempts).add(1),
            )
            .col_expr(
                deliveries::Column::LastStatus,
                Expr::value(failed.status.map(i32::from)),
            )
            .col_expr(
                deliveries::Column::LastError,
                Expr::value(clipped(&failed.error)),
            )
            .col_expr(deliveries::Column::LastAttemptAt, Expr::value(Utc::now()))
            .col_expr(
                deliveries::Column::NextAttemptAt,
                Expr::value(failed.next_attempt_at),
            )
            .col_expr(
                deliveries::Column::LeaseUntil,
                Expr::value(Option::<DateTime<Utc>>::None),
            )
            .filter(deliveries::Column::Id.eq(delivery.id))
            .filter(deliveries::Column::LeaseOwner.eq(owner))
            .exec(self.sea())
            .await?;
        Ok(dead)
    }

    /// Gives up every delivery lease `owner` holds: a core stopping.
    pub async fn release_delivery_leases(&self, owner: Uuid) -> Result<u64> {
        Ok(deliveries::Entity::update_many()
            .col_expr(
                deliveries::Column::LeaseUntil,
                Expr::value(Option::<DateTime<Utc>>::None),
            )
            .filter(deliveries::Column::LeaseOwner.eq(owner))
            .filter(deliveries::Column::State.eq(DeliveryState::Pending.as_str()))
            .exec(self.sea())
            .await?
            .rows_affected)
    }

    /// The deliveries to `user_id`'s endpoint `endpoint_id`, newest event first, at most
    /// `limit`, optionally in one state.
    pub async fn deliveries(
        &self,
        user_id: Uuid,
        endpoint_id: Uuid,
        state: Option<DeliveryState>,
        limit: u64,
    ) -> Result<Vec<WebhookDelivery>> {
        self.endpoint(user_id, endpoint_id).await?;
        let mut query = deliveries::Entity::find()
            .filter(deliveries::Column::EndpointId.eq(endpoint_id))
            .filter(deliveries::Column::UserId.eq(user_id));
        if let Some(state) = state {
            query = query.filter(deliveries::Column::State.eq(state.as_str()));
        }
        query
            .order_by_desc(deliveries::Column::EventSeq)
            .limit(limit)
            .all(self.sea())
            .await?
            .into_iter()
            .map(delivery_of)
            .collect()
    }

    /// Puts dead deliveries of `user_id`'s endpoint `endpoint_id` back in line, due now and
    /// retried until `retry_until` (`ids`, or every dead one when empty); how many. A
    /// delivery not dead is left as it is.
    pub async fn replay_deliveries(
        &self,
        user_id: Uuid,
        endpoint_id: Uuid,
        ids: &[Uuid],
        retry_until: DateTime<Utc>,
    ) -> Result<u64> {
        self.endpoint(user_id, endpoint_id).await?;
        let mut update = deliveries::Entity::update_many()
            .col_expr(
                deliveries::Column::State,
                Expr::value(DeliveryState::Pending.as_str()),
            )
            .col_expr(deliveries::Column::NextAttemptAt, Expr::value(Utc::now()))
            .col_expr(deliveries::Column::RetryUntil, Expr::value(retry_until))
            .col_expr(
                deliveries::Column::LeaseUntil,
                Expr::value(Option::<DateTime<Utc>>::None),
            )
            .filter(deliveries::Column::EndpointId.eq(endpoint_id))
            .filter(deliveries::Column::UserId.eq(user_id))
            .filter(deliveries::Column::State.eq(DeliveryState::Dead.as_str()));
        if !ids.is_empty() {
            update = update.filter(deliveries::Column::Id.is_in(ids.iter().copied()));
        }
        Ok(update.exec(self.sea()).await?.rows_affected)
    }
}
