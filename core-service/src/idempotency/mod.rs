//! Idempotent writes: a caller-supplied key makes a retried write return the first answer
//! instead of acting twice. The protocol, for every write (EVM and Solana alike):
//!
//! 1. The request is authenticated and drawn from its caller's write budget. A request
//!    refused there (401, 429) reads no key.
//! 2. Its `Idempotency-Key` (a UUID) is looked up, before any field is read: a key that
//!    already has an answer gives it, even if the wallet, its delegation or the chain
//!    configuration changed since. The key stands for the request's path and canonical
//!    protobuf encoding (`canonical`); the same key with another request is
//!    IDEMPOTENT_BODY_MISMATCH, a key whose request failed is IDEMPOTENT_REPLAY.
//! 3. The fields are parsed and the wallet resolved; a request refused there (400, 403, 404)
//!    claims nothing, so the caller can fix it and retry under the same key. A key's write
//!    above its approval threshold is held there (`approvals`), not signed: its key answers
//!    from the approval until a person's approval has it made, at step 4, under this key.
//! 4. The write is simulated (a swap is first built by its aggregator and checked by the swap
//!    guard). A refusal now records the key as failed (`Idempotency::fail`): nothing reached
//!    the chain, but the key is spent. Only a refusal from outside the request (QUOTE_FAILED
//!    from the aggregator, SERVICE_UNAVAILABLE for a part not configured) leaves it free, as
//!    the same request may succeed later.
//! 5. The key is claimed inside the database transaction that allocates the nonce, signs and
//!    stores the signed bytes (`claim`), with the submission as its stored response: one
//!    INSERT on the unique `(user, key)` row, so of two concurrent twins exactly one commits.
//!    The other rolls back (nonce included) and answers with the winner's submission.
//! 6. Only then is the transaction broadcast. A claim is never given back: once signed,
//!    nobody can prove nothing reached the chain. A record that fails later fails its key in
//!    the same database transaction, and one found mined after all answers from it again.
//! 7. A retry of a request that died after step 5 replays the stored response while the
//!    monitor takes the stored transaction to the chain.

mod canonical;
mod claims;
mod frame;

use std::str::FromStr;

use uuid::Uuid;

pub use canonical::{Canonical, absent_if_empty, request_hash};
pub use claims::{Idempotency, Ticket};
pub use frame::{Answer, Keyed};
pub(crate) use frame::{claimed_elsewhere, note_claimed};

use crate::error::WalletOpsError;

/// A validated `Idempotency-Key`: a UUID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdempotencyKey(Uuid);

impl IdempotencyKey {
    /// The header's name in errors.
    const FIELD: &'static str = "Idempotency-Key";

    /// Parses the header's value, which every write requires.
    pub fn parse(raw: Option<&str>) -> Result<Self, WalletOpsError> {
        let raw = raw.ok_or_else(|| {
            WalletOpsError::invalid(Self::FIELD, "required on writes: send a UUID")
        })?;
        Uuid::from_str(raw.trim())
            .map(Self)
            .map_err(|_| WalletOpsError::invalid(Self::FIELD, "must be a UUID"))
    }

    /// The key of a write: its `Idempotency-Key`, or for an agent's tool call that names
    /// none, one derived from the call (`TOOL_CALL_HEADER`): the same call sent again gets
    /// the same key, so it is carried out once.
    pub fn of(metadata: &tonic::metadata::MetadataMap) -> Result<Self, WalletOpsError> {
        // A value that is not ASCII is there, and no UUID.
        let text = |name| metadata.get(name).map(|v| v.to_str().unwrap_or(""));
        match (
            text(walletops_proto::IDEMPOTENCY_KEY_HEADER),
            text(walletops_proto::TOOL_CALL_HEADER),
        ) {
            (None, Some(call)) => Ok(Self::of_tool_call(call)),
            (given, _) => Self::parse(given),
        }
    }

    /// The key derived from tool call `call`.
    fn of_tool_call(call: &str) -> Self {
        let name = format!("walletops/mcp/{call}");
        Self(Uuid::new_v5(&Uuid::NAMESPACE_URL, name.as_bytes()))
    }

    /// The key.
    pub fn uuid(self) -> Uuid {
        self.0
    }
}

impl From<Uuid> for IdempotencyKey {
    fn from(key: Uuid) -> Self {
        Self(key)
    }
}

/// The refusal of a request under an Idempotency-Key `key` that stands for another request.
pub(crate) fn body_mismatch(key: Uuid) -> WalletOpsError {
    WalletOpsError::IdempotentBodyMismatch(format!(
        "Idempotency-Key {key} was used with a different request; use a new key"
    ))
}

/// What a failed claim records of the `error` its request answered with.
pub(crate) fn failure_detail(error: &WalletOpsError) -> String {
    format!("{}: {error}", error.code())
}
