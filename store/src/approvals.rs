//! Writes held for approval. Every change of state is one conditional UPDATE on the state it
//! leaves (a decision on `pending` before its deadline, the run of an `approved` write under
//! a lease), so two people, two cores or a person and the deadline never both win.

use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveValue::Set,
    ColumnTrait, Condition, EntityTrait, QueryFilter, QueryOrder, QuerySelect,
    sea_query::{Expr, OnConflict},
};
use uuid::Uuid;

use super::{Store, entities::approvals, spend::amount_of};
use crate::error::{Result, StoreError};
use crate::lease::{Lease, Own};
use walletops_domain::{Approval, ApprovalState, Decision, HeldWrite};

/// Who is recorded as deciding an approval that ran out of time.
pub const EXPIRY: &str = "expiry";

fn approval_of(m: approvals::Model) -> Result<Approval> {
    Ok(Approval {
        state: ApprovalState::parse(&m.state).ok_or_else(|| {
            StoreError::Corrupt(anyhow::anyhow!(
                "approval {} has an unknown state {}",
                m.id,
                m.state
            ))
        })?,
        amount: amount_of(&m.amount)?,
        threshold: amount_of(&m.threshold)?,
        id: m.id,
        user_id: m.user_id,
        key_id: m.key_id,
        idempotency_key: m.idempotency_key,
        path: m.path,
        chain: m.chain,
        asset: m.asset,
        summary: m.summary,
        created_at: m.created_at,
        expires_at: m.expires_at,
        decided_by: m.decided_by,
        decided_at: m.decided_at,
        reason: m.reason,
        transaction_id: m.transaction_id,
        error: m.error,
        wallet: m.wallet,
    })
}

/// An approved write a core leased to make: the approval and its request as stored.
#[derive(Debug)]
pub struct LeasedApproval {
    /// The approval.
    pub approval: Approval,
    /// The request's canonical protobuf encoding.
    pub request: Vec<u8>,
    /// The hash its idempotency key stands for.
    pub request_hash: String,
}

impl Store {
    /// Holds `write`, unless its user already holds a write under the same idempotency key:
    /// either way, the approval that key stands for and its request hash.
    pub async fn hold_write(&self, write: &HeldWrite) -> Result<(Approval, String)> {
        approvals::Entity::insert(approvals::ActiveModel {
            id: Set(Uuid::now_v7()),
            user_id: Set(write.user_id),
            key_id: Set(write.key_id),
            idempotency_key: Set(write.idempotency_key),
            path: Set(write.path.clone()),
            request: Set(write.request.clone()),
            request_hash: Set(write.request_hash.clone()),
            chain: Set(write.chain.clone()),
            asset: Set(write.asset.clone()),
            amount: Set(write.amount.to_string()),
            threshold: Set(write.threshold.to_string()),
            summary: Set(write.summary.clone()),
            state: Set(ApprovalState::Pending.as_str().to_owned()),
            created_at: Set(Utc::now()),
            expires_at: Set(write.expires_at),
            decided_by: Set(None),
            decided_at: Set(None),
            reason: Set(None),
            transaction_id: Set(None),
            error: Set(None),
            lease_until: Set(None),
            wallet: Set(Some(write.wallet.clone())),
        })
        .on_conflict(
            OnConflict::columns([approvals::Column::UserId, approvals::Column::IdempotencyKey])
                .do_nothing()
                .to_owned(),
        )
        .exec_without_returning(self.sea())
        .await?;
        self.held_write(write.user_id, write.idempotency_key)
            .await?
            .ok_or_else(|| StoreError::Corrupt(anyhow::anyhow!("a held write vanished")))
    }

    /// The write `user` holds under `idempotency_key`, with its request hash.
    pub async fn held_write(
        &self,
        user: Uuid,
        idempotency_key: Uuid,
    ) -> Result<Option<(Approval, String)>> {
        approvals::Entity::find()
            .filter(approvals::Column::UserId.eq(user))
            .filter(approvals::Column::IdempotencyKey.eq(idempotency_key))
            .one(self.sea())
            .await?
            .map(|m| {
                let hash = m.request_hash.clone();
                approval_of(m).map(|a| (a, hash))
            })
            .transpose()
    }

    /// Approval `id` of `user`.
    pub async fn approval(&self, user: Uuid, id: Uuid) -> Result<Option<Approval>> {
        approvals::Entity::find_by_id(id)
            .filter(approvals::Column::UserId.eq(user))
            .one(self.sea())
            .await?
            .map(approval_of)
            .transpose()
    }

    /// `user`'s approvals, newest first: only key `key`'s when given, only those in `state`
    /// when given; at most `limit`.
    pub async fn approvals(
        &self,
        user: Uuid,
        key: Option<Uuid>,
        state: Option<ApprovalState>,
        limit: u64,
    ) -> Result<Vec<Approval>> {
        let mut query = approvals::Entity::find().filter(approvals::Column::UserId.eq(user));
        if let Some(key) = key {
            query = query.filter(approvals::Column::KeyId.eq(key));
        }
        if let Some(state) = state {
            query = query.filter(approvals::Column::State.eq(state.as_str()));
        }
        query
            .order_by_desc(approvals::Column::CreatedAt)
            .order_by_desc(approvals::Column::Id)
            .limit(limit)
            .all(self.sea())
            .await?
            .into_iter()
            .map(approval_of)
            .collect()
    }

    /// Records `decision` on `user`'s approval `id` by `by`, if it is still pending and its
    /// deadline (`now`) has not passed: whether it was.
    pub async fn decide_approval(
        &self,
        user: Uuid,
        id: Uuid,
        decision: &Decision,
        by: &str,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        let (state, reason) = match decision {
            Decision::Approve => (ApprovalState::Approved, None),
            Decision::Reject(reason) => (ApprovalState::Rejected, reason.clone()),
        };
        Ok(approvals::Entity::update_many()
            .col_expr(approvals::Column::State, Expr::value(state.as_str()))
            .col_expr(approvals::Column::DecidedBy, Expr::value(by))
            .col_expr(approvals::Column::DecidedAt, Expr::value(now))
            .col_expr(approvals::Column::Reason, Expr::value(reason))
            .filter(approvals::Column::Id.eq(id))
            .filter(approvals::Column::UserId.eq(user))
            .filter(approvals::Column::State.eq(ApprovalState::Pending.as_str()))
            .filter(approvals::Column::ExpiresAt.gt(now))
            .exec(self.sea())
            .await?
            .rows_affected
            == 1)
    }

    /// Expires the pending approvals whose deadline is past `now`: how many.
    pub async fn expire_approvals(&self, now: DateTime<Utc>) -> Result<u64> {
        Ok(approvals::Entity::update_many()
            .col_expr(
                approvals::Column::State,
                Expr::value(ApprovalState::Expired.as_str()),
            )
            .col_expr(approvals::Column::DecidedBy, Expr::value(EXPIRY))
            .col_expr(approvals::Column::DecidedAt, Expr::value(now))
            .filter(approvals::Column::State.eq(ApprovalState::Pending.as_str()))
            .filter(approvals::Column::ExpiresAt.lte(now))
            .exec(self.sea())
            .await?
            .rows_affected)
    }

    /// Leases up to `limit` approved writes no core is making (or whose core's lease ran out
    /// by `now`) until `until`.
    pub async fn lease_approved(
        &self,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: u64,
    ) -> Result<Vec<LeasedApproval>> {
        // An approved write is made once per lease: no core takes it again while it is
        // held, its own included.
        let lease = Lease {
            owner: Uuid::nil(),
            now,
            until,
            own: Own::InFlight,
        };
        let approved = || approvals::Column::State.eq(ApprovalState::Approved.as_str());
        let candidates: Vec<Uuid> = approvals::Entity::find()
            .select_only()
            .column(approvals::Column::Id)
            .filter(approved())
            .filter(lease.free::<approvals::Entity>())
            .order_by_asc(approvals::Column::DecidedAt)
            .limit(limit)
            .into_tuple()
            .all(self.sea())
            .await?;
        if candidates.is_empty() {
            return Ok(Vec::new());
        }
        lease
            .take::<approvals::Entity>(
                Condition::all()
                    .add(approvals::Column::Id.is_in(candidates))
                    .add(approved()),
            )
            .exec_with_returning(self.sea())
            .await?
            .into_iter()
            .map(|m| {
                let (request, request_hash) = (m.request.clone(), m.request_hash.clone());
                approval_of(m).map(|approval| LeasedApproval {
                    approval,
                    request,
                    request_hash,
                })
            })
            .collect()
    }

    /// Notes how approved write `id` ended: made as record `transaction_id`, or refused
    /// with `error`.
    pub async fn approval_done(
        &self,
        id: Uuid,
        outcome: std::result::Result<Uuid, String>,
    ) -> Result<()> {
        let (state, transaction_id, error) = match outcome {
            Ok(tx) => (ApprovalState::Submitted, Some(tx), None),
            Err(e) => (ApprovalState::Failed, None, Some(e)),
        };
        approvals::Entity::update_many()
            .col_expr(approvals::Column::State, Expr::value(state.as_str()))
            .col_expr(
                approvals::Column::TransactionId,
                Expr::value(transaction_id),
            )
            .col_expr(approvals::Column::Error, Expr::value(error))
            .col_expr(
                approvals::Column::LeaseUntil,
                Expr::value(Option::<DateTime<Utc>>::None),
            )
            .filter(approvals::Column::Id.eq(id))
            .filter(approvals::Column::State.eq(ApprovalState::Approved.as_str()))
            .exec(self.sea())
            .await?;
        Ok(())
    }

    /// Leaves approved write `id` for another try at `at` (its write was refused for a
    /// reason that may pass: an aggregator or node that did not answer), noting `error`.
    pub async fn approval_retry_at(&self, id: Uuid, at: DateTime<Utc>, error: &str) -> Result<()> {
        approvals::Entity::update_many()
            .col_expr(approvals::Column::LeaseUntil, Expr::value(at))
            .col_expr(approvals::Column::Error, Expr::value(error))
            .filter(approvals::Column::Id.eq(id))
            .filter(approvals::Column::State.eq(ApprovalState::Approved.as_str()))
            .exec(self.sea())
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use alloy::primitives::U256;
    use chrono::{Duration, Utc};

    use super::*;
    use crate::on_both_backends;

    fn held(user: Uuid, expires_in: Duration) -> HeldWrite {
        HeldWrite {
            user_id: user,
            key_id: Uuid::new_v4(),
            idempotency_key: Uuid::new_v4(),
            path: "/send".to_owned(),
            request: vec![1, 2, 3],
            request_hash: "h".repeat(64),
            chain: "anvil".to_owned(),
            asset: "native".to_owned(),
            amount: U256::from(5000u64),
            threshold: U256::from(1000u64),
            summary: "send 5000 native".to_owned(),
            wallet: "0x1111111111111111111111111111111111111111".to_owned(),
            expires_at: Utc::now() + expires_in,
        }
    }

    /// One write per idempotency key; the first decision wins and a second changes
    /// nothing; a deadline past expires the write and no decision reaches it after; an
    /// approved write is leased to one core until its lease runs out.
    async fn decisions_expiry_and_leases_change_a_write_once(store: Store) {
        let user = Uuid::new_v4();
        let write = held(user, Duration::hours(1));
        let (first, _) = store.hold_write(&write).await.expect("held");
        let (again, hash) = store.hold_write(&write).await.expect("held again");
        assert_eq!(first.id, again.id, "one write per idempotency key");
        assert_eq!(hash, write.request_hash);
        let now = Utc::now();
        let rejected = Decision::Reject(Some("no".to_owned()));
        assert!(
            store
                .decide_approval(user, first.id, &Decision::Approve, "cli:a", now)
                .await
                .expect("decide")
        );
        assert!(
            !store
                .decide_approval(user, first.id, &rejected, "cli:b", now)
                .await
                .expect("decide")
        );
        let decided = store
            .approval(user, first.id)
            .await
            .expect("read")
            .expect("there");
        assert_eq!(decided.state, ApprovalState::Approved);
        assert_eq!(decided.decided_by.as_deref(), Some("cli:a"));
        assert!(
            !store
                .decide_approval(Uuid::new_v4(), first.id, &rejected, "cli:c", now)
                .await
                .expect("decide"),
            "another user's"
        );
        // Leased once; again only after the lease ran out.
        let leased = store
            .lease_approved(now, now + Duration::seconds(60), 8)
            .await
            .expect("lease");
        assert_eq!(leased.len(), 1);
        assert_eq!(leased[0].request, vec![1, 2, 3]);
        assert!(
            store
                .lease_approved(now, now + Duration::seconds(60), 8)
                .await
                .expect("lease")
                .is_empty()
        );
        let later = now + Duration::seconds(61);
        assert_eq!(
            store
                .lease_approved(later, later + Duration::seconds(60), 8)
                .await
                .expect("lease")
                .len(),
            1
        );
        let tx = Uuid::new_v4();
        store.approval_done(first.id, Ok(tx)).await.expect("done");
        let done = store
            .approval(user, first.id)
            .await
            .expect("read")
            .expect("there");
        assert_eq!(
            (done.state, done.transaction_id),
            (ApprovalState::Submitted, Some(tx))
        );
        // A write past its deadline expires, and no decision reaches it.
        let late = held(user, Duration::seconds(-1));
        let (late, _) = store.hold_write(&late).await.expect("held");
        assert!(
            !store
                .decide_approval(user, late.id, &Decision::Approve, "cli:a", Utc::now())
                .await
                .expect("decide")
        );
        assert_eq!(store.expire_approvals(Utc::now()).await.expect("expire"), 1);
        let expired = store
            .approval(user, late.id)
            .await
            .expect("read")
            .expect("there");
        assert_eq!(
            (expired.state, expired.decided_by.as_deref()),
            (ApprovalState::Expired, Some(EXPIRY))
        );
        let pending = store
            .approvals(user, None, Some(ApprovalState::Pending), 10)
            .await
            .expect("list");
        assert!(pending.is_empty());
        assert_eq!(
            store
                .approvals(user, None, None, 10)
                .await
                .expect("list")
                .len(),
            2
        );
    }

    on_both_backends!(decisions_expiry_and_leases_change_a_write_once);
}
