//! Writes, exactly once: the idempotent frame every write runs in, and the chain pipelines
//! that sign, store and broadcast.
//!
//! The order is fixed (see the README's write path): the RPC has already authenticated,
//! rate-limited, parsed every field and resolved a delegated wallet; `Writes::run` then claims
//! the idempotency key and runs the pipeline, which simulates, allocates a nonce, signs and
//! stores the signed bytes in one database transaction, and only then broadcasts.

pub mod calldata;
pub mod evm;

use std::future::Future;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::{
    app::IdempotencyKey,
    chains::Registry,
    error::{Result, WalletOpsError},
    idempotency::{Claim, Idempotency, request_hash},
    store::Store,
};

/// The submission result of a write, as the contract gives it (its `status` is always
/// `SUBMITTED`). Stored under the idempotency key and replayed as is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Submission {
    /// Service transaction id.
    pub id: Uuid,
    /// Hash or signature, once signed.
    pub hash: Option<String>,
    /// Explorer link, once a hash exists.
    pub explorer_url: Option<String>,
    /// Display name of the chain.
    pub chain_name: String,
}

/// Runs writes inside their idempotency claim.
#[derive(Debug, Clone)]
pub struct Writes {
    idempotency: Idempotency,
    store: Store,
}

impl Writes {
    /// Writes over `store`, with claims kept by `idempotency`.
    pub fn new(store: Store, idempotency: Idempotency) -> Self {
        Self { idempotency, store }
    }

    /// Claims `key` for the request (`path` and its canonical bytes), then runs `act` and
    /// stores its outcome under the key. A replay returns the stored submission; a request
    /// that died after storing its transaction is answered from that transaction.
    pub async fn run<F, Fut>(
        &self,
        user: Uuid,
        key: IdempotencyKey,
        path: &str,
        canonical: &[u8],
        chains: &Registry,
        act: F,
    ) -> Result<Submission>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Submission>>,
    {
        let hash = request_hash(path, canonical);
        match self.idempotency.claim(user, key, path, &hash).await? {
            Claim::Replay(stored) => serde_json::from_value(stored).map_err(|e| {
                WalletOpsError::Internal(anyhow::anyhow!("stored response unreadable: {e}"))
            }),
            Claim::Recover(id) => {
                let tx = self
                    .store
                    .find_transaction(user, id)
                    .await?
                    .ok_or_else(|| {
                        WalletOpsError::Internal(anyhow::anyhow!(
                            "claimed transaction {id} missing"
                        ))
                    })?;
                let chain = chains.resolve(&tx.chain)?;
                Ok(Submission {
                    id,
                    explorer_url: tx.hash.as_deref().and_then(|h| chain.explorer_url(h)),
                    hash: tx.hash,
                    chain_name: chain.name().to_owned(),
                })
            }
            Claim::Won => match act().await {
                Ok(submission) => {
                    let stored = serde_json::to_value(&submission).map_err(|e| {
                        WalletOpsError::Internal(anyhow::anyhow!("response unstorable: {e}"))
                    })?;
                    self.idempotency.succeed(user, key, stored).await?;
                    Ok(submission)
                }
                Err(err) => {
                    if let Err(e) = self.idempotency.fail(user, key, &err).await {
                        tracing::error!(error = ?e, "recording a failed write");
                    }
                    Err(err)
                }
            },
        }
    }
}
