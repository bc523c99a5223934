//! Sending webhook deliveries: the cores' workers lease due deliveries fairly (round-robin
//! across endpoints, at most so many in flight at each, counted over every core), note each
//! attempt's outcome, and disable an endpoint that has failed for too long.
//!
//! Fairness lives in the lease: a delivery leased and not yet answered is in flight, so one
//! endpoint that never answers holds only its own few leases, never the others' turn.

use chrono::{DateTime, Utc};
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DatabaseBackend, EntityTrait, QueryFilter, Statement,
    sea_query::{Expr, ExprTrait as _},
};
use uuid::Uuid;

use super::{
    Store,
    entities::{webhook_deliveries as deliveries, webhook_endpoints},
    webhooks::delivery_of,
};
use crate::error::Result;
use crate::lease::{Lease, Own, give_up};
use walletops_domain::{DeliveryState, DisabledReason, WebhookDelivery};

/// The PostgreSQL advisory lock the workers of every core take in turn to lease: the count
/// of an endpoint's deliveries in flight and the leases it allows are one step. (SQLite's
/// writer lock, taken at BEGIN, does the same there.)
const LEASE_LOCK: i64 = 0x5741_4c4c_4845_4f4b;

/// How a failed attempt is noted.
#[derive(Debug)]
pub struct FailedAttempt {
    /// The endpoint's HTTP status; none: it did not answer.
    pub status: Option<u16>,
    /// What went wrong, for the owner to read.
    pub error: String,
    /// When to try again; past the delivery's retry window, it is dead-lettered instead.
    pub next_attempt_at: DateTime<Utc>,
    /// An endpoint failing since this time or before, with no delivery taken since, is
    /// disabled.
    pub disable_if_failing_since: DateTime<Utc>,
}

/// What a failed attempt led to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttemptNoted {
    /// The delivery's retry window closed: it is dead-lettered.
    pub dead: bool,
    /// The endpoint had failed for long enough: it is disabled now.
    pub endpoint_disabled: bool,
}

/// The stored form of an error, cut to its column.
fn clipped(error: &str) -> String {
    error.chars().take(500).collect()
}

impl Store {
    /// Leases to `owner` until `until` up to `limit` pending deliveries due at `now` whose
    /// lease is free, of enabled endpoints (whose key, if a key made them, has not expired), none held back by an earlier pending delivery of
    /// its transaction to its endpoint, and none that would put more than `per_endpoint` of
    /// an endpoint's deliveries in flight (leased by any core, lease not run out). Taken
    /// round-robin: every endpoint's oldest due delivery, then every endpoint's second, and so
    /// on, oldest event first within a round. The ones won.
    pub async fn lease_deliveries(
        &self,
        owner: Uuid,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: u64,
        per_endpoint: u64,
    ) -> Result<Vec<WebhookDelivery>> {
        let backend = self.sea().get_database_backend();
        let (now_at, per_at, limit_at) = match backend {
            DatabaseBackend::Postgres => ("$1", "$2", "$3"),
            _ => ("?1", "?2", "?3"),
        };
        let as_i64 = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        let due = || {
            Statement::from_sql_and_values(
                backend,
                format!(
                    "WITH busy AS (SELECT endpoint_id, COUNT(*) AS n FROM webhook_deliveries \
                             WHERE state = 'pending' AND lease_until >= {now_at} \
                             GROUP BY endpoint_id), \
                         due AS (SELECT d.id, d.endpoint_id, d.event_seq, \
                             ROW_NUMBER() OVER (PARTITION BY d.endpoint_id ORDER BY d.event_seq) AS turn \
                           FROM webhook_deliveries d \
                           JOIN webhook_endpoints w ON w.id = d.endpoint_id AND w.disabled_at IS NULL \
                           LEFT JOIN api_keys k ON k.id = w.created_by_key \
                           WHERE d.state = 'pending' AND d.next_attempt_at <= {now_at} \
                             AND (k.expires_at IS NULL OR k.expires_at > {now_at}) \
                             AND (d.lease_until IS NULL OR d.lease_until < {now_at}) \
                             AND NOT EXISTS (SELECT 1 FROM webhook_deliveries e \
                                 WHERE e.endpoint_id = d.endpoint_id \
                                   AND e.transaction_id = d.transaction_id \
                                   AND e.state = 'pending' AND e.event_seq < d.event_seq)) \
                         SELECT due.id FROM due LEFT JOIN busy ON busy.endpoint_id = due.endpoint_id \
                         WHERE due.turn + COALESCE(busy.n, 0) <= {per_at} \
                         ORDER BY due.turn, due.event_seq LIMIT {limit_at}"
                ),
                [
                    now.into(),
                    as_i64(per_endpoint).into(),
                    as_i64(limit).into(),
                ],
            )
        };
        let read = |rows: Vec<sea_orm::QueryResult>| {
            rows.iter()
                .map(|row| row.try_get::<Uuid>("", "id"))
                .collect::<std::result::Result<Vec<Uuid>, _>>()
        };
        // A look without the lock first: most looks find nothing, and on SQLite the lock is
        // the one writer's, which every other write would wait for.
        if read(self.sea().query_all_raw(due()).await?)?.is_empty() {
            return Ok(Vec::new());
        }
        let txn = self.begin_sea().await?;
        if backend == DatabaseBackend::Postgres {
            txn.execute_raw(Statement::from_sql_and_values(
                backend,
                "SELECT pg_advisory_xact_lock($1)",
                [LEASE_LOCK.into()],
            ))
            .await?;
        }
        let candidates = read(txn.query_all_raw(due()).await?)?;
        if candidates.is_empty() {
            // Ended now, not when the pool next uses the connection: on SQLite it holds
            // the write lock until then.
            txn.rollback().await?;
            return Ok(Vec::new());
        }
        // A delivery is sent once per lease: not taken again while held, by its own core
        // either (the SQL above says the same).
        let lease = Lease {
            owner,
            now,
            until,
            own: Own::InFlight,
        };
        let mut leased = lease
            .take::<deliveries::Entity>(
                Condition::all()
                    .add(deliveries::Column::Id.is_in(candidates))
                    .add(deliveries::Column::State.eq(DeliveryState::Pending.as_str())),
            )
            .exec_with_returning(&txn)
            .await?;
        txn.commit().await?;
        leased.sort_by_key(|m| m.event_seq);
        leased.into_iter().map(delivery_of).collect()
    }

    /// Notes that `owner`'s delivery `id` to endpoint `endpoint_id` was taken with HTTP
    /// `status`: the endpoint's failing streak, if any, ends.
    pub async fn delivered(
        &self,
        owner: Uuid,
        id: Uuid,
        endpoint_id: Uuid,
        status: u16,
    ) -> Result<()> {
        let now = Utc::now();
        let txn = self.begin_sea().await?;
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
            .exec(&txn)
            .await?;
        webhook_endpoints::Entity::update_many()
            .col_expr(
                webhook_endpoints::Column::FailingSince,
                Expr::value(Option::<DateTime<Utc>>::None),
            )
            .filter(webhook_endpoints::Column::Id.eq(endpoint_id))
            .filter(webhook_endpoints::Column::FailingSince.is_not_null())
            .exec(&txn)
            .await?;
        txn.commit().await?;
        Ok(())
    }

    /// Notes a failed attempt at `owner`'s delivery `delivery`: due again at
    /// `failed.next_attempt_at`, or dead-lettered when that is past its retry window; its
    /// endpoint's failing streak starts, or, begun at `failed.disable_if_failing_since` or
    /// before, disables it.
    pub async fn attempt_failed(
        &self,
        owner: Uuid,
        delivery: &WebhookDelivery,
        failed: FailedAttempt,
    ) -> Result<AttemptNoted> {
        let now = Utc::now();
        let dead = failed.next_attempt_at > delivery.retry_until;
        let state = if dead {
            DeliveryState::Dead
        } else {
            DeliveryState::Pending
        };
        let txn = self.begin_sea().await?;
        let noted = deliveries::Entity::update_many()
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
            .col_expr(deliveries::Column::LastAttemptAt, Expr::value(now))
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
            .exec(&txn)
            .await?
            .rows_affected;
        let endpoint = delivery.endpoint_id;
        let mut endpoint_disabled = false;
        // Only an attempt still ours counts: a lease that ran out was retried elsewhere.
        if noted > 0 {
            webhook_endpoints::Entity::update_many()
                .col_expr(webhook_endpoints::Column::FailingSince, Expr::value(now))
                .filter(webhook_endpoints::Column::Id.eq(endpoint))
                .filter(webhook_endpoints::Column::FailingSince.is_null())
                .exec(&txn)
                .await?;
            endpoint_disabled = webhook_endpoints::Entity::update_many()
                .col_expr(webhook_endpoints::Column::DisabledAt, Expr::value(now))
                .col_expr(
                    webhook_endpoints::Column::DisabledReason,
                    Expr::value(DisabledReason::Failing.as_str()),
                )
                .filter(webhook_endpoints::Column::Id.eq(endpoint))
                .filter(webhook_endpoints::Column::DisabledAt.is_null())
                .filter(
                    webhook_endpoints::Column::FailingSince.lte(failed.disable_if_failing_since),
                )
                .exec(&txn)
                .await?
                .rows_affected
                > 0;
        }
        txn.commit().await?;
        Ok(AttemptNoted {
            dead,
            endpoint_disabled,
        })
    }

    /// Gives up `owner`'s lease of delivery `id` without an attempt (its endpoint was
    /// disabled since the lease): it waits, pending, for the endpoint to be enabled.
    pub async fn release_delivery_lease(&self, owner: Uuid, id: Uuid) -> Result<()> {
        give_up::<deliveries::Entity>(owner, Condition::all().add(deliveries::Column::Id.eq(id)))
            .exec(self.sea())
            .await?;
        Ok(())
    }

    /// Gives up every delivery lease `owner` holds: a core stopping.
    pub async fn release_delivery_leases(&self, owner: Uuid) -> Result<u64> {
        Ok(give_up::<deliveries::Entity>(
            owner,
            Condition::all().add(deliveries::Column::State.eq(DeliveryState::Pending.as_str())),
        )
        .exec(self.sea())
        .await?
        .rows_affected)
    }
}
