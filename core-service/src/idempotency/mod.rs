//! Idempotent writes: a caller-supplied key makes a retried write return the first answer
//! instead of acting twice.
//!
//! The key is claimed by the same database transaction that allocates the nonce and stores
//! the signed transaction: one INSERT on the unique `(user, key)` row, so of two concurrent
//! requests exactly one commits, and the other rolls back (nonce included) and answers with
//! the winner's transaction. The claim carries the response already: the submission result
//! (id, hash, explorer link) is known once the transaction is signed, so the usual write
//! costs no second database write after its broadcast. Nothing is claimed before that point,
//! so a request that dies before it signed leaves no claim behind and its retry simply runs;
//! one that dies after it signed left its transaction and its response, which the retry
//! replays while the monitor takes the transaction to the chain. A claim is never given
//! back: a stored success is replayed, a request refused before signing (a revert, a
//! shortfall) or by the node is recorded as failed, and a failed key answers
//! IDEMPOTENT_REPLAY, so the caller retries with a new key.

use std::time::Duration;

use chrono::Utc;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::{
    app::IdempotencyKey,
    error::{Result, WalletOpsError},
    store::{NewClaim, Store},
};

/// What a key already stands for.
#[derive(Debug)]
pub enum Prior {
    /// The same request succeeded: answer with this stored response.
    Replay(serde_json::Value),
    /// The same request stored its signed transaction and has no stored response yet (it is
    /// still broadcasting, or it died): answer from that transaction.
    Recover(Uuid),
}

/// Checks, claims and settles idempotency keys.
#[derive(Debug, Clone)]
pub struct Idempotency {
    store: Store,
    retention: Duration,
}

/// The hash that identifies a request: its endpoint path and its canonical encoding (the
/// protobuf message as received, whose encoding is the same for the same fields whatever the
/// JSON key order was).
pub fn request_hash(path: &str, canonical: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(path.as_bytes());
    h.update([0]);
    h.update(canonical);
    hex::encode(h.finalize())
}

/// What a failed claim records of the `error` its request answered with.
pub(crate) fn failure_detail(error: &WalletOpsError) -> String {
    format!("{}: {error}", error.code())
}

/// A write's claim on its key, claimed inside the signing transaction.
#[derive(Debug)]
pub struct Ticket {
    pub(crate) claim: NewClaim,
    /// The transaction the claim was committed with, and the response stored with it.
    claimed: std::sync::OnceLock<(Uuid, serde_json::Value)>,
}

impl Ticket {
    /// A ticket for `claim`, not yet claimed.
    pub(crate) fn new(claim: NewClaim) -> Self {
        Self {
            claim,
            claimed: std::sync::OnceLock::new(),
        }
    }

    /// Notes that the claim was committed with transaction `id` and `response`.
    pub(crate) fn claimed_with(&self, id: Uuid, response: serde_json::Value) {
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

    /// The ticket of a request of `user` with `key` at `path`, hashing to `hash`.
    pub fn ticket(&self, user: Uuid, key: IdempotencyKey, path: &str, hash: String) -> Ticket {
        let now = Utc::now();
        let keep = self.keep();
        Ticket::new(NewClaim {
            user,
            key: key.uuid(),
            path: path.to_owned(),
            request_hash: hash,
            created_at: now,
            expires_at: now + keep,
        })
    }

    /// What the ticket's key already stands for: `None` when it is free. A different request
    /// under the key is IDEMPOTENT_BODY_MISMATCH; a failed one is IDEMPOTENT_REPLAY.
    pub async fn prior(&self, ticket: &Ticket) -> Result<Option<Prior>> {
        let claim = &ticket.claim;
        let Some(stored) = self
            .store
            .find_idempotency_key(claim.user, claim.key, Utc::now(), self.keep())
            .await?
        else {
            return Ok(None);
        };
        if stored.request_hash != claim.request_hash {
            return Err(WalletOpsError::IdempotentBodyMismatch(format!(
                "Idempotency-Key {} was used with a different request; use a new key",
                claim.key
            )));
        }
        match (
            stored.state.as_str(),
            stored.response,
            stored.transaction_id,
        ) {
            ("succeeded", Some(response), _) => Ok(Some(Prior::Replay(response))),
            ("failed", _, _) => Err(WalletOpsError::IdempotentReplay(format!(
                "the request with Idempotency-Key {} failed and is not retried under the same key ({}); send it again with a new key",
                claim.key,
                stored.error.unwrap_or_else(|| "no detail".to_owned())
            ))),
            (_, _, Some(id)) => Ok(Some(Prior::Recover(id))),
            _ => Err(WalletOpsError::IdempotentReplay(format!(
                "the request with Idempotency-Key {} has no stored result",
                claim.key
            ))),
        }
    }

    /// Stores the success `response` of the request that holds the ticket, unless the claim
    /// was committed with that very response (the usual case: only a transaction re-signed
    /// before its first broadcast answers with another hash).
    pub async fn succeed(&self, ticket: &Ticket, response: serde_json::Value) -> Result<()> {
        let (id, stored) = ticket.claimed.get().ok_or_else(|| {
            WalletOpsError::Internal(anyhow::anyhow!("a write succeeded without its claim"))
        })?;
        if *stored == response {
            return Ok(());
        }
        self.store
            .replace_claim_response(&ticket.claim, *id, response)
            .await
            .map(drop)
    }

    /// Records that the request failed with `error` before it claimed its key (before
    /// signing): a failed claim is inserted. False when a concurrent twin holds the key
    /// already: the key stands for the twin's outcome. A claim committed with a record is
    /// left alone: it follows its record, failed in the transaction that fails the record
    /// and un-failed in the one that finds it mined after all. Failing it here, apart, could
    /// undo such a correction and have the caller pay again under a new key, or fail the
    /// key of a record that is still open and will be sent.
    pub async fn fail(&self, ticket: &Ticket, error: &WalletOpsError) -> Result<bool> {
        if ticket.claimed.get().is_some() {
            return Ok(true);
        }
        // Nothing can have reached the chain; the key is still recorded as used, unless a
        // concurrent twin holds it already.
        self.store
            .insert_idempotency_key(
                self.store.db(),
                &ticket.claim,
                "failed",
                None,
                None,
                Some(failure_detail(error)),
            )
            .await
    }

    /// Deletes claims past their retention.
    pub async fn purge(&self) -> Result<u64> {
        self.store
            .purge_idempotency_keys(Utc::now(), self.keep())
            .await
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn hashes_bind_path_and_body() {
        let a = super::request_hash("/send", b"abc");
        assert_eq!(a, super::request_hash("/send", b"abc"));
        assert_ne!(a, super::request_hash("/token/approve", b"abc"));
        assert_ne!(a, super::request_hash("/send", b"abd"));
    }
}
