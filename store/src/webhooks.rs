//! Webhook endpoints and their deliveries. Deliveries are made by the event sequencer in the
//! transaction that numbers their events (`create_deliveries`), so an event committed is
//! delivered and one rolled back never is; the cores' workers then lease them like monitor
//! records, one core per delivery, an earlier delivery of a transaction to an endpoint
//! holding its later ones back.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveValue::Set,
    ColumnTrait, Condition, ConnectionTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder,
    QuerySelect,
    sea_query::{Expr, Query},
};
use uuid::Uuid;

use super::{
    Store,
    entities::{
        api_keys, transaction_events as events, webhook_deliveries as deliveries, webhook_endpoints,
    },
};
use crate::error::{Result, StoreError};
use walletops_domain::{
    DeliveryState, Disabled, DisabledReason, EndpointMaker, EventType, SealedKey, WebhookDelivery,
    WebhookEndpoint,
};

/// An endpoint to register.
#[derive(Debug)]
pub struct NewEndpoint {
    /// The endpoint; its `created_at` is kept.
    pub endpoint: WebhookEndpoint,
    /// Its secret, sealed.
    pub sealed: SealedKey,
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
            .filter_map(EventType::parse)
            .collect(),
        created_at: m.created_at,
        created_by: match (m.created_by_key, m.created_by_session) {
            (Some(key), _) => EndpointMaker::Key(key),
            (None, Some(session)) => EndpointMaker::Session(session),
            (None, None) => EndpointMaker::Owner,
        },
        disabled: match (m.disabled_at, m.disabled_reason.as_deref()) {
            (Some(at), reason) => Some(Disabled {
                at,
                // An unreadable reason still disables: the endpoint was turned off.
                reason: reason
                    .and_then(DisabledReason::parse)
                    .unwrap_or(DisabledReason::Failing),
            }),
            (None, _) => None,
        },
    })
}

pub(super) fn delivery_of(m: deliveries::Model) -> Result<WebhookDelivery> {
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
        subject_id: m.transaction_id,
        event: EventType::parse(&m.event_type).ok_or_else(|| bad("event type"))?,
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

fn event_types_text(types: &[EventType]) -> String {
    types.iter().map(|t| t.name()).collect::<Vec<_>>().join(",")
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
        // Under the user's lock, which revoking a key takes too: a key revoked while its
        // request was under way (a slow name to resolve) cannot leave an endpoint enabled.
        super::users::lock_user(&txn, e.user_id).await?;
        if let EndpointMaker::Key(key) = e.created_by
            && !super::api_keys::key_active(&txn, key, Utc::now()).await?
        {
            txn.rollback().await?;
            return Err(StoreError::MakerInactive);
        }
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
            created_by_key: Set(match e.created_by {
                EndpointMaker::Key(key) => Some(key),
                _ => None,
            }),
            created_by_session: Set(match e.created_by {
                EndpointMaker::Session(session) => Some(session),
                _ => None,
            }),
            disabled_at: Set(None),
            disabled_reason: Set(None),
            failing_since: Set(None),
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
        // A disabled endpoint gets no new deliveries: were it enabled later, it would not be
        // flooded with what happened meanwhile (to a receiver a leaked key pointed there).
        // Nor does one whose key expired: an expired key acts no more, through its
        // endpoints neither.
        let live_keys = Query::select()
            .column(api_keys::Column::Id)
            .from(api_keys::Entity)
            .cond_where(
                Condition::any()
                    .add(api_keys::Column::ExpiresAt.is_null())
                    .add(api_keys::Column::ExpiresAt.gt(Utc::now())),
            )
            .to_owned();
        for m in webhook_endpoints::Entity::find()
            .filter(webhook_endpoints::Column::UserId.is_in(users))
            .filter(webhook_endpoints::Column::DisabledAt.is_null())
            .filter(
                Condition::any()
                    .add(webhook_endpoints::Column::CreatedByKey.is_null())
                    .add(webhook_endpoints::Column::CreatedByKey.in_subquery(live_keys)),
            )
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
            let Some(kind) = EventType::of_row(&event.subject, &event.status) else {
                continue;
            };
            for endpoint in endpoints.get(&event.user_id).into_iter().flatten() {
                if !endpoint.event_types.contains(&kind) {
                    continue;
                }
                rows.push(deliveries::ActiveModel {
                    id: Set(Uuid::now_v7()),
                    endpoint_id: Set(endpoint.id),
                    user_id: Set(event.user_id),
                    event_seq: Set(seq),
                    transaction_id: Set(event.transaction_id),
                    event_type: Set(kind.name()),
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
                    replayed_at: Set(None),
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
    /// retried until `retry_until` (`ids`, or the oldest dead ones when empty), at most
    /// `cap.per_call` of them, and refused `ReplayCapped` when that would take the user's
    /// replays of the hour before `cap.now` past `cap.per_hour`; how many. A delivery not
    /// dead is left as it is. The count and the update run under the user's lock, so
    /// concurrent replays cannot both slip under the cap.
    pub async fn replay_deliveries(
        &self,
        user_id: Uuid,
        endpoint_id: Uuid,
        ids: &[Uuid],
        retry_until: DateTime<Utc>,
        cap: ReplayCap,
    ) -> Result<u64> {
        self.endpoint(user_id, endpoint_id).await?;
        let txn = self.begin_sea().await?;
        super::users::lock_user(&txn, user_id).await?;
        let hour_ago = cap.now - chrono::TimeDelta::hours(1);
        let recent: Vec<DateTime<Utc>> = deliveries::Entity::find()
            .select_only()
            .column(deliveries::Column::ReplayedAt)
            .filter(deliveries::Column::UserId.eq(user_id))
            .filter(deliveries::Column::ReplayedAt.gt(hour_ago))
            .order_by_asc(deliveries::Column::ReplayedAt)
            .into_tuple::<DateTime<Utc>>()
            .all(&txn)
            .await?;
        let left = cap.per_hour.saturating_sub(recent.len() as u64);
        let mut dead = deliveries::Entity::find()
            .select_only()
            .column(deliveries::Column::Id)
            .filter(deliveries::Column::EndpointId.eq(endpoint_id))
            .filter(deliveries::Column::UserId.eq(user_id))
            .filter(deliveries::Column::State.eq(DeliveryState::Dead.as_str()));
        if !ids.is_empty() {
            dead = dead.filter(deliveries::Column::Id.is_in(ids.iter().copied()));
        }
        let chosen: Vec<Uuid> = dead
            .order_by_asc(deliveries::Column::EventSeq)
            .limit(cap.per_call)
            .into_tuple::<Uuid>()
            .all(&txn)
            .await?;
        if chosen.is_empty() {
            // Ended now: on SQLite the transaction holds the write lock until it ends.
            txn.rollback().await?;
            return Ok(0);
        }
        if chosen.len() as u64 > left {
            // A place frees when the replay that took it is an hour old: the one that frees
            // enough places for this call.
            let needed = chosen.len() as u64 - left;
            let frees = recent
                .get(usize::try_from(needed - 1).unwrap_or(usize::MAX))
                .copied()
                .unwrap_or(cap.now);
            let retry_after = (frees + chrono::TimeDelta::hours(1) - cap.now)
                .to_std()
                .unwrap_or(std::time::Duration::from_secs(1));
            txn.rollback().await?;
            return Err(StoreError::ReplayCapped {
                limit: cap.per_hour,
                retry_after,
            });
        }
        let replayed = deliveries::Entity::update_many()
            .col_expr(
                deliveries::Column::State,
                Expr::value(DeliveryState::Pending.as_str()),
            )
            .col_expr(deliveries::Column::NextAttemptAt, Expr::value(cap.now))
            .col_expr(deliveries::Column::RetryUntil, Expr::value(retry_until))
            .col_expr(deliveries::Column::ReplayedAt, Expr::value(cap.now))
            .col_expr(
                deliveries::Column::LeaseUntil,
                Expr::value(Option::<DateTime<Utc>>::None),
            )
            .filter(deliveries::Column::Id.is_in(chosen))
            .filter(deliveries::Column::State.eq(DeliveryState::Dead.as_str()))
            .exec(&txn)
            .await?
            .rows_affected;
        txn.commit().await?;
        Ok(replayed)
    }

    /// Enables `user_id`'s endpoint `id` again, its failing streak forgotten: its pending
    /// deliveries are sent, and new events delivered, from now on.
    pub async fn enable_endpoint(&self, user_id: Uuid, id: Uuid) -> Result<WebhookEndpoint> {
        self.endpoint(user_id, id).await?;
        webhook_endpoints::Entity::update_many()
            .col_expr(
                webhook_endpoints::Column::DisabledAt,
                Expr::value(Option::<DateTime<Utc>>::None),
            )
            .col_expr(
                webhook_endpoints::Column::DisabledReason,
                Expr::value(Option::<String>::None),
            )
            .col_expr(
                webhook_endpoints::Column::FailingSince,
                Expr::value(Option::<DateTime<Utc>>::None),
            )
            .filter(webhook_endpoints::Column::Id.eq(id))
            .filter(webhook_endpoints::Column::UserId.eq(user_id))
            .exec(self.sea())
            .await?;
        self.endpoint(user_id, id).await
    }
}

/// How many replays a call may make: the service's caps, and the time it counts from.
#[derive(Debug, Clone, Copy)]
pub struct ReplayCap {
    /// At most this many deliveries per call.
    pub per_call: u64,
    /// At most this many per user in any hour.
    pub per_hour: u64,
    /// Now.
    pub now: DateTime<Utc>,
}

/// Disables, in `conn`'s transaction, every enabled endpoint registered by one of `keys`
/// (being revoked in that transaction): nothing more is made for or sent to them, and their
/// pending deliveries stay, for the owner to read. How many.
pub(super) async fn disable_endpoints_of_keys<C: ConnectionTrait>(
    conn: &C,
    keys: &[Uuid],
    now: DateTime<Utc>,
) -> Result<u64> {
    Ok(webhook_endpoints::Entity::update_many()
        .col_expr(webhook_endpoints::Column::DisabledAt, Expr::value(now))
        .col_expr(
            webhook_endpoints::Column::DisabledReason,
            Expr::value(DisabledReason::KeyRevoked.as_str()),
        )
        .filter(webhook_endpoints::Column::CreatedByKey.is_in(keys.iter().copied()))
        .filter(webhook_endpoints::Column::DisabledAt.is_null())
        .exec(conn)
        .await?
        .rows_affected)
}
