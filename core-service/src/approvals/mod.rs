//! Writes held for a person's approval. A key's spend limit on an asset may carry an
//! approval threshold (`approval_above`): a write of the key that moves more than it is
//! stored as a pending approval instead of being signed, and answered as such (202 over
//! REST, `PENDING_APPROVAL` over gRPC, `pending_approval` to an agent). A person approves
//! or rejects it in the dashboard or with the CLI, never with an API key; unless decided
//! within `approvals.expire_after_secs` it expires. An approved write is made by a core's
//! runner (`writes::approved`) under the write's own idempotency key, with the key's spend
//! limits held as for any write; a rejected or expired one is never signed.
//!
//! A retry under the same idempotency key answers from the approval: pending or approved,
//! the approval again; made, the submission; rejected or expired, IDEMPOTENT_REPLAY.

mod config;

use std::sync::Arc;

use alloy::primitives::U256;
use tokio::sync::Notify;
use uuid::Uuid;

pub use config::ApprovalsConfig;

use crate::{
    auth::{Caller, Credential},
    error::{Result, WalletOpsError},
    idempotency::body_mismatch,
};
use walletops_domain::{Approval, ApprovalState, Decision, HeldWrite, Spend};
use walletops_store::{NewClaim, Store};

/// The most approvals one list gives.
pub const LIST_LIMIT: u64 = 200;

/// Holds, lists and decides writes waiting for approval.
#[derive(Debug, Clone)]
pub struct Approvals {
    store: Store,
    config: ApprovalsConfig,
    /// Wakes this core's runner when a write is approved here.
    decided: Arc<Notify>,
}

/// What a held write is, for `Approvals::hold`.
#[derive(Debug)]
pub(crate) struct ToHold<'a> {
    /// The write's claim on its idempotency key.
    pub(crate) claim: &'a NewClaim,
    /// What it moves of the asset whose threshold it passes, and for which key.
    pub spend: &'a Spend,
    /// The threshold it passes.
    pub threshold: U256,
    /// Its request's canonical encoding.
    pub request: Vec<u8>,
    /// What it does, in a sentence.
    pub summary: String,
    /// The wallet it resolved to send from: approved, it is made from that one.
    pub wallet: String,
}

impl Approvals {
    /// Approvals over `store`.
    pub fn new(store: Store, config: ApprovalsConfig) -> Self {
        Self {
            store,
            config,
            decided: Arc::new(Notify::new()),
        }
    }

    /// Resolves when a write is approved through this core.
    pub async fn approved_here(&self) {
        self.decided.notified().await;
    }

    /// The approval a write's idempotency key already stands for, if it was held: pending
    /// or approved, the approval to answer with; rejected, expired or failed, the refusal.
    /// A different request under the key is IDEMPOTENT_BODY_MISMATCH.
    pub(crate) async fn held(&self, claim: &NewClaim) -> Result<Option<Approval>> {
        let Some((approval, hash)) = self.store.held_write(claim.user, claim.key).await? else {
            return Ok(None);
        };
        if hash != claim.request_hash {
            return Err(body_mismatch(claim.key));
        }
        match approval.state {
            ApprovalState::Pending | ApprovalState::Approved => Ok(Some(approval)),
            _ => Err(ended(&approval)),
        }
    }

    /// Holds the write `what`, whose effects pass its key's threshold on an asset
    /// (`policy`), for approval.
    pub(crate) async fn hold(&self, what: ToHold<'_>) -> Result<Approval> {
        let threshold = what.threshold;
        let held = HeldWrite {
            user_id: what.claim.user,
            key_id: what.spend.key_id,
            idempotency_key: what.claim.key,
            path: what.claim.path.clone(),
            request: what.request,
            request_hash: what.claim.request_hash.clone(),
            chain: what.spend.chain.clone(),
            asset: what.spend.asset.clone(),
            amount: what.spend.amount,
            threshold,
            summary: what.summary,
            wallet: what.wallet,
            expires_at: crate::clock::now() + self.config.expire_after(),
        };
        let (approval, hash) = self.store.hold_write(&held).await?;
        if hash != held.request_hash {
            return Err(body_mismatch(held.idempotency_key));
        }
        crate::metrics::approval("held");
        tracing::info!(approval = %approval.id, chain = %approval.chain, asset = %approval.asset, "write held for approval");
        Ok(approval)
    }

    /// The caller's approvals, newest first, only those in `state` when given: a key sees
    /// the writes it asked for, a session every write of its user.
    pub async fn list(
        &self,
        caller: &Caller,
        state: Option<ApprovalState>,
    ) -> Result<Vec<Approval>> {
        self.list_of(caller.user_id, key_of(caller), state).await
    }

    /// `user`'s approvals, newest first: only key `key`'s when given, only those in
    /// `state` when given.
    pub async fn list_of(
        &self,
        user: Uuid,
        key: Option<Uuid>,
        state: Option<ApprovalState>,
    ) -> Result<Vec<Approval>> {
        self.expire_due().await?;
        Ok(self.store.approvals(user, key, state, LIST_LIMIT).await?)
    }

    /// The caller's approval `id` (a key's own only).
    pub async fn get(&self, caller: &Caller, id: Uuid) -> Result<Approval> {
        self.expire_due().await?;
        self.store
            .approval(caller.user_id, id)
            .await?
            .filter(|a| key_of(caller).is_none_or(|key| a.key_id == key))
            .ok_or_else(|| WalletOpsError::NotFound("no such approval".to_owned()))
    }

    /// `decide` for `caller`, who must be a person (a dashboard session), never an API key;
    /// the decision is signed `dashboard:NAME`, by the user's name.
    pub async fn decide_as(
        &self,
        caller: &Caller,
        id: Uuid,
        decision: Decision,
    ) -> Result<Approval> {
        // The key an agent holds must never approve its own writes: a person decides.
        if let Credential::Key { .. } = caller.credential {
            return Err(WalletOpsError::Forbidden(
                "approvals are decided in the dashboard or with the CLI, never with an API key"
                    .to_owned(),
            ));
        }
        let user = self
            .store
            .find_user(&caller.user_id.to_string())
            .await?
            .ok_or_else(|| WalletOpsError::NotFound("no such user".to_owned()))?;
        let by = format!("dashboard:{}", user.name);
        self.decide(caller.user_id, id, decision, &by).await
    }

    /// Records `decision` on `user`'s pending approval `id`, made by `by` (`dashboard:NAME`,
    /// `cli:NAME`): the approval as it now stands. One that is no longer pending (decided,
    /// or past its deadline) is refused with what became of it.
    pub async fn decide(
        &self,
        user: Uuid,
        id: Uuid,
        decision: Decision,
        by: &str,
    ) -> Result<Approval> {
        self.expire_due().await?;
        let decided = self
            .store
            .decide_approval(user, id, &decision, by, crate::clock::now())
            .await?;
        let approval = self
            .store
            .approval(user, id)
            .await?
            .ok_or_else(|| WalletOpsError::NotFound("no such approval".to_owned()))?;
        if !decided {
            return Err(WalletOpsError::invalid(
                "id",
                format!("the write is no longer pending: {}", ended_how(&approval)),
            ));
        }
        crate::metrics::approval(approval.state.as_str());
        tracing::info!(approval = %id, state = approval.state.as_str(), by, "write decided");
        if decision == Decision::Approve {
            self.decided.notify_waiters();
        }
        Ok(approval)
    }

    /// Expires the pending approvals past their deadline.
    pub(crate) async fn expire_due(&self) -> Result<()> {
        let expired = self.store.expire_approvals(crate::clock::now()).await?;
        for _ in 0..expired {
            crate::metrics::approval("expired");
        }
        Ok(())
    }
}

/// The key whose approvals a caller sees; `None`: a session, which sees all its user's.
fn key_of(caller: &Caller) -> Option<Uuid> {
    match &caller.credential {
        Credential::Key { id, .. } => Some(*id),
        Credential::Session { .. } => None,
    }
}

/// What became of an approval that is no longer pending, in words.
fn ended_how(a: &Approval) -> String {
    let by = a.decided_by.as_deref().unwrap_or("nobody");
    let at = a
        .decided_at
        .map(|t| t.to_rfc3339())
        .unwrap_or_else(|| "-".to_owned());
    match a.state {
        ApprovalState::Pending => "it is pending".to_owned(),
        ApprovalState::Approved => format!("approved by {by} at {at}, being made"),
        ApprovalState::Rejected => match &a.reason {
            Some(reason) => format!("rejected by {by} at {at} ({reason})"),
            None => format!("rejected by {by} at {at}"),
        },
        ApprovalState::Expired => format!("expired unapproved at {at}"),
        ApprovalState::Submitted => format!("approved by {by} at {at} and submitted"),
        ApprovalState::Failed => format!(
            "approved by {by} at {at}, then refused: {}",
            a.error.as_deref().unwrap_or("no detail")
        ),
    }
}

/// The answer to a retry of a held write that ended without being made.
fn ended(a: &Approval) -> WalletOpsError {
    WalletOpsError::IdempotentReplay(format!(
        "the write with Idempotency-Key {} was held for approval and not made: {}; send it again with a new key",
        a.idempotency_key,
        ended_how(a)
    ))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use walletops_store::testing::{insert_key, temp_sqlite};

    use super::*;

    /// Moves tokio's time, and with it the core's clock, on by `by`.
    async fn later(by: Duration) {
        tokio::time::pause();
        tokio::time::advance(by).await;
        tokio::time::resume();
    }

    /// A held write expires once its hour has passed on the core's clock (`clock.rs`),
    /// and not a second before: an hour of tokio's time, which takes none of the wall's.
    #[tokio::test]
    async fn a_held_write_expires_when_its_hour_is_up() {
        let (_dir, store) = temp_sqlite().await;
        let user = store.insert_user("holder").await.expect("a user");
        let key = insert_key(&store, user.id, "wops_hold", None).await;
        let approvals = Approvals::new(store.clone(), ApprovalsConfig::default());
        let now = crate::clock::now();
        let claim = NewClaim {
            user: user.id,
            key: Uuid::new_v4(),
            path: "/send".to_owned(),
            request_hash: "hash".to_owned(),
            created_at: now,
            expires_at: now + chrono::Duration::days(1),
            spends: Vec::new(),
        };
        let spend = Spend {
            key_id: key,
            chain: "anvil".to_owned(),
            asset: "native".to_owned(),
            amount: U256::from(10),
        };
        let held = approvals
            .hold(ToHold {
                claim: &claim,
                spend: &spend,
                threshold: U256::from(5),
                request: vec![1, 2, 3],
                summary: "send 10".to_owned(),
                wallet: "0x0101010101010101010101010101010101010101".to_owned(),
            })
            .await
            .expect("held");
        let state = || async {
            let approval = store.approval(user.id, held.id).await.expect("read");
            approval.expect("stored").state
        };
        later(Duration::from_secs(3590)).await;
        approvals.expire_due().await.expect("expiry");
        assert_eq!(state().await, ApprovalState::Pending);
        later(Duration::from_secs(11)).await;
        approvals.expire_due().await.expect("expiry");
        assert_eq!(state().await, ApprovalState::Expired);
    }
}
