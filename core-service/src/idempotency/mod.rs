//! Idempotent writes: a caller-supplied key makes a retried write return the first answer
//! instead of acting twice.
//!
//! A key is claimed with one INSERT on the unique `(user, key)` row, so of two concurrent
//! requests exactly one wins. Claiming happens only after authentication, validation and the
//! wallet checks, so a request the caller can fix burns no key. A claim is never given back:
//! once signing may have begun nobody can prove that nothing reached the chain, so a stored
//! success is replayed, and anything else answers IDEMPOTENT_REPLAY (the caller retries a
//! failed write with a new key). One exception makes crashes safe: when the request died after
//! its transaction was signed and stored, the retry answers from that transaction record,
//! which the monitor takes to the chain.

use std::time::Duration;

use chrono::Utc;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::{
    app::IdempotencyKey,
    error::{Result, WalletOpsError},
    store::{ClaimRow, Store},
};

/// What claiming a key decided.
#[derive(Debug)]
pub enum Claim {
    /// The key is this request's: do the work, then `succeed` or `fail`.
    Won,
    /// The same request succeeded before: answer with this stored response.
    Replay(serde_json::Value),
    /// The same request died after storing its signed transaction: answer from it.
    Recover(Uuid),
}

/// Claims, replays and settles idempotency keys.
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

impl Idempotency {
    /// Keys over `store`, kept for `retention` after their claim.
    pub fn new(store: Store, retention: Duration) -> Self {
        Self { store, retention }
    }

    /// Claims `key` of `user` for the request at `path` hashing to `hash`.
    pub async fn claim(
        &self,
        user: Uuid,
        key: IdempotencyKey,
        path: &str,
        hash: &str,
    ) -> Result<Claim> {
        let now = Utc::now();
        let expires = now
            + chrono::Duration::from_std(self.retention)
                .unwrap_or_else(|_| chrono::Duration::days(1));
        match self
            .store
            .claim_idempotency_key(user, key.uuid(), path, hash, now, expires)
            .await?
        {
            ClaimRow::Won => Ok(Claim::Won),
            ClaimRow::Taken(stored) if stored.request_hash != hash => {
                Err(WalletOpsError::IdempotentBodyMismatch(format!(
                    "Idempotency-Key {} was used with a different request; use a new key",
                    key.uuid()
                )))
            }
            ClaimRow::Taken(stored) => match (stored.state.as_str(), stored.response) {
                ("succeeded", Some(response)) => Ok(Claim::Replay(response)),
                ("failed", _) => Err(WalletOpsError::IdempotentReplay(format!(
                    "the request with Idempotency-Key {} failed and is not retried under the same key ({}); send it again with a new key",
                    key.uuid(),
                    stored.error.unwrap_or_else(|| "no detail".to_owned())
                ))),
                _ => match stored.transaction_id {
                    Some(id) => Ok(Claim::Recover(id)),
                    None => Err(WalletOpsError::IdempotentReplay(format!(
                        "the request with Idempotency-Key {} is still in progress and has no stored result",
                        key.uuid()
                    ))),
                },
            },
        }
    }

    /// Stores the success `response` of the request that claimed `key`.
    pub async fn succeed(
        &self,
        user: Uuid,
        key: IdempotencyKey,
        response: serde_json::Value,
    ) -> Result<()> {
        self.store
            .finish_idempotency_key(user, key.uuid(), "succeeded", Some(response), None)
            .await
    }

    /// Records that the request that claimed `key` failed with `error`.
    pub async fn fail(
        &self,
        user: Uuid,
        key: IdempotencyKey,
        error: &WalletOpsError,
    ) -> Result<()> {
        self.store
            .finish_idempotency_key(
                user,
                key.uuid(),
                "failed",
                None,
                Some(format!("{}: {error}", error.code())),
            )
            .await
    }

    /// Deletes claims past their retention.
    pub async fn purge(&self) -> Result<u64> {
        self.store.purge_idempotency_keys(Utc::now()).await
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
