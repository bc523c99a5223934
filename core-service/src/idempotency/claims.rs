//! Keys as stored: the ticket a write runs under, what a key already stands for, and the
//! claim's settling (success, failure, purge).

use std::{sync::OnceLock, time::Duration};

use uuid::Uuid;

use super::IdempotencyKey;
use crate::error::{Result, WalletOpsError};
use walletops_domain::{ClaimState, Submission};
use walletops_store::{NewClaim, Store};

/// What a key already stands for.
#[derive(Debug)]
pub(super) enum Prior {
    /// The same request succeeded: answer with this stored response.
    Replay(Submission),
    /// The same request stored its signed transaction and has no stored response yet (it is
    /// still broadcasting, or it died): answer from that transaction.
    Recover(Uuid),
}

/// Checks, claims and settles idempotency keys, and runs writes under them (`frame`).
#[derive(Debug, Clone)]
pub struct Idempotency {
    pub(super) store: Store,
    retention: Duration,
}

/// A write's claim on its key, claimed inside the signing transaction.
#[derive(Debug)]
pub struct Ticket {
    pub(crate) claim: NewClaim,
    /// The transaction the claim was committed with, and the response stored with it.
    claimed: OnceLock<(Uuid, Submission)>,
}

impl Ticket {
    /// Notes what the ticket's write moves, per asset, to be held against its key's limits
    /// when the claim is made.
    pub fn set_spends(&mut self, spends: Vec<walletops_domain::Spend>) {
        self.claim.spends = spends;
    }

    /// A ticket for `claim`, not yet claimed.
    #[cfg(test)]
    pub(crate) fn new(claim: NewClaim) -> Self {
        Self {
            claim,
            claimed: OnceLock::new(),
        }
    }

    /// Whether the claim was committed.
    pub(crate) fn is_claimed(&self) -> bool {
        self.claimed.get().is_some()
    }

    /// Notes that the claim was committed with transaction `id` and `response`.
    pub(crate) fn claimed_with(&self, id: Uuid, response: Submission) {
        let _ = self.claimed.set((id, response));
    }
}

impl Idempotency {
    /// Keys over `store`, kept for `retention` after their claim.
    pub fn new(store: Store, retention: Duration) -> Self {
        Self { store, retention }
    }

    /// The retention, as a `chrono` duration.
    fn keep(&self) -> chrono::Duration {
        chrono::Duration::from_std(self.retention).unwrap_or_else(|_| chrono::Duration::days(1))
    }

    /// The record a claim of `user`'s `key` stands for, whatever request it was made for.
    /// Only for keys the service derives itself (a payout's items): a caller's key is held
    /// to its request.
    pub(crate) async fn record_of_derived_key(
        &self,
        user: Uuid,
        key: IdempotencyKey,
    ) -> Result<Option<Uuid>> {
        Ok(self
            .store
            .find_idempotency_key(user, key.uuid(), crate::clock::now(), self.keep())
            .await?
            .and_then(|claim| claim.transaction_id))
    }

    /// The ticket of a request of `user` with `key` at `path`, hashing to `hash`.
    pub fn ticket(&self, user: Uuid, key: IdempotencyKey, path: &str, hash: String) -> Ticket {
        let now = crate::clock::now();
        Ticket {
            claim: NewClaim {
                user,
                key: key.uuid(),
                path: path.to_owned(),
                request_hash: hash,
                created_at: now,
                expires_at: now + self.keep(),
                spends: Vec::new(),
            },
            claimed: OnceLock::new(),
        }
    }

    /// What the ticket's key already stands for: `None` when it is free. A different request
    /// under the key is IDEMPOTENT_BODY_MISMATCH; a failed one is IDEMPOTENT_REPLAY.
    pub(super) async fn prior(&self, ticket: &Ticket) -> Result<Option<Prior>> {
        let claim = &ticket.claim;
        let Some(stored) = self
            .store
            .find_idempotency_key(claim.user, claim.key, crate::clock::now(), self.keep())
            .await?
        else {
            return Ok(None);
        };
        if stored.request_hash != claim.request_hash {
            return Err(super::body_mismatch(claim.key));
        }
        match (stored.state, stored.response, stored.transaction_id) {
            (ClaimState::Succeeded, Some(response), _) => Ok(Some(Prior::Replay(response))),
            (ClaimState::Failed, _, _) => Err(WalletOpsError::IdempotentReplay(format!(
                "the request with Idempotency-Key {} failed and is not retried under the same key ({}); send it again with a new key",
                claim.key,
                stored.error.unwrap_or_else(|| "no detail".to_owned())
            ))),
            (ClaimState::Succeeded, None, Some(id)) => Ok(Some(Prior::Recover(id))),
            (ClaimState::Succeeded, None, None) => Err(WalletOpsError::IdempotentReplay(format!(
                "the request with Idempotency-Key {} has no stored result",
                claim.key
            ))),
        }
    }

    /// Stores the success `response` of the request that holds the ticket, unless the claim
    /// was committed with that very response (the usual case: only a transaction re-signed
    /// before its first broadcast answers with another hash).
    pub(crate) async fn succeed(&self, ticket: &Ticket, response: &Submission) -> Result<()> {
        let (id, stored) = ticket.claimed.get().ok_or_else(|| {
            WalletOpsError::Internal(anyhow::anyhow!("a write succeeded without its claim"))
        })?;
        if stored == response {
            return Ok(());
        }
        self.store
            .replace_claim_response(&ticket.claim, *id, response)
            .await?;
        Ok(())
    }

    /// Records that the request failed with `error` before it claimed its key (before
    /// signing): a failed claim is inserted. False when a concurrent twin holds the key
    /// already: the key stands for the twin's outcome. A claim committed with a record is
    /// left alone: it follows its record, failed in the transaction that fails the record
    /// and un-failed in the one that finds it mined after all. Failing it here, apart, could
    /// undo such a correction and have the caller pay again under a new key, or fail the
    /// key of a record that is still open and will be sent.
    pub(crate) async fn fail(&self, ticket: &Ticket, error: &WalletOpsError) -> Result<bool> {
        if ticket.is_claimed() {
            return Ok(true);
        }
        // Nothing can have reached the chain; the key is still recorded as used, unless a
        // concurrent twin holds it already.
        Ok(self
            .store
            .insert_idempotency_key(
                self.store.db(),
                &ticket.claim,
                ClaimState::Failed,
                None,
                None,
                Some(super::failure_detail(error)),
            )
            .await?)
    }

    /// Deletes claims past their retention.
    pub async fn purge(&self) -> Result<u64> {
        Ok(self
            .store
            .purge_idempotency_keys(crate::clock::now(), self.keep())
            .await?)
    }
}
