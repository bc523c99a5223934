//! The runner every core runs for writes held for approval: it expires those nobody decided
//! in time and makes those a person approved, one core per write (a lease), each under the
//! write's own idempotency key. A core that dies while making one leaves its lease to run
//! out; the next core's run then finds the key claimed and answers from it, so the write is
//! signed at most once.

use std::{future::Future, time::Duration};

use uuid::Uuid;

use super::{Gate, Write, Written};
use crate::{
    Core,
    auth::{Caller, Credential, KeyState},
    error::{Result, WalletOpsError},
    idempotency::IdempotencyKey,
    runner::{self, Pace},
};
use walletops_domain::{Approval, Scopes};
use walletops_store::LeasedApproval;

/// How often approvals are looked at (a decision made through this core wakes it sooner).
const POLL_EVERY: Duration = Duration::from_millis(500);

/// Approved writes leased at once.
const BATCH: u64 = 8;

/// How long a core holds an approved write it is making.
const LEASE: chrono::Duration = chrono::Duration::seconds(120);

/// How long after its approval a write refused for a passing reason (an aggregator or node
/// that did not answer, a part not configured) is tried again, every `RETRY_EVERY`.
const RETRY_FOR: chrono::Duration = chrono::Duration::minutes(15);
const RETRY_EVERY: chrono::Duration = chrono::Duration::seconds(10);

impl Core {
    /// Runs the approvals runner until `stop` resolves.
    pub async fn run_approvals(&self, stop: impl Future<Output = ()>) {
        runner::run(
            "approvals",
            Pace::After(POLL_EVERY),
            stop,
            || self.approvals_round(),
            || self.approvals.approved_here(),
        )
        .await;
    }

    /// One round: expire what is past its deadline, make what is approved.
    pub async fn approvals_round(&self) -> Result<()> {
        self.approvals.expire_due().await?;
        let now = crate::clock::now();
        for leased in self.store.lease_approved(now, now + LEASE, BATCH).await? {
            let id = leased.approval.id;
            if let Err(e) = self.make_approved(leased).await {
                tracing::error!(approval = %id, error = %e, "making an approved write");
            }
        }
        Ok(())
    }

    /// Makes the approved write `leased` as its key would have, and notes how it ended.
    async fn make_approved(&self, leased: LeasedApproval) -> Result<()> {
        let approval = &leased.approval;
        let outcome = match self.approved_caller(approval).await? {
            Err(refusal) => Err(refusal),
            // A request this version cannot read (held by an older one) ends the approval
            // failed, below, rather than leave it leased again for ever.
            Ok(caller) => match Write::decode(&approval.path, &leased.request) {
                Ok(write) => {
                    self.write_as(
                        &caller,
                        IdempotencyKey::from(approval.idempotency_key),
                        write,
                        Gate::Approved(approval),
                    )
                    .await
                }
                Err(unreadable) => Err(unreadable),
            },
        };
        let ended = match outcome {
            Ok(Written::Submitted(submission)) => Ok(submission.id),
            Ok(Written::Held(_)) => Err("held again, which an approved write never is".to_owned()),
            // A refusal of the moment is tried again for a while; any other (the key's
            // limits included) is final for a write a person approved.
            Err(e) if e.is_transient() && passing(approval) => {
                tracing::warn!(approval = %approval.id, error = %e, "approved write refused for now; trying again");
                return Ok(self
                    .store
                    .approval_retry_at(
                        approval.id,
                        crate::clock::now() + RETRY_EVERY,
                        &e.to_string(),
                    )
                    .await?);
            }
            Err(e) => Err(crate::idempotency::failure_detail(&e)),
        };
        crate::metrics::approval(if ended.is_ok() { "submitted" } else { "failed" });
        Ok(self.store.approval_done(approval.id, ended).await?)
    }

    /// The caller an approved write is made for: the key that asked for it, if that key is
    /// still in force; else the refusal.
    async fn approved_caller(
        &self,
        approval: &Approval,
    ) -> Result<std::result::Result<Caller, WalletOpsError>> {
        self.standing_key(
            approval.user_id,
            approval.key_id,
            Some(Scopes::ALL),
            "the API key that asked for the write was revoked or expired before it was made",
        )
        .await
    }

    /// `user_id`'s key `key_id` as the caller of a write made later on its behalf, if the
    /// key is still in force (with `scopes`, or the key's own); else `Forbidden(refusal)`.
    pub(super) async fn standing_key(
        &self,
        user_id: Uuid,
        key_id: Uuid,
        scopes: Option<Scopes>,
        refusal: &str,
    ) -> Result<std::result::Result<Caller, WalletOpsError>> {
        let now = crate::clock::now();
        let key = self
            .keys
            .list(user_id)
            .await?
            .into_iter()
            .find(|k| k.id == key_id);
        Ok(match key {
            Some(key) if matches!(key.state(now), KeyState::Active | KeyState::ExpiringSoon) => {
                Ok(Caller {
                    user_id,
                    scopes: scopes.unwrap_or(key.scopes),
                    credential: Credential::Key {
                        id: key.id,
                        prefix: key.prefix,
                        expires_at: key.expires_at,
                        limited: key.limited,
                        line: key.lineage_id,
                    },
                })
            }
            _ => Err(WalletOpsError::Forbidden(refusal.to_owned())),
        })
    }
}

/// Whether a refusal for a passing reason is still worth another try.
fn passing(approval: &Approval) -> bool {
    approval
        .decided_at
        .is_some_and(|at| crate::clock::now() < at + RETRY_FOR)
}
