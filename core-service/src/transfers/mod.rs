//! Writes, exactly once: the idempotent frame every write runs in, and the chain pipelines
//! that sign, store and broadcast.
//!
//! The order is fixed (see the README's write path): the RPC authenticates and rate-limits,
//! `Writes::open` looks up the idempotency key (a key that already has an answer gives it
//! without the request being looked at again), the RPC parses every field and resolves a
//! delegated wallet, and `Writes::run` runs the pipeline, which simulates, then claims the
//! key, allocates a nonce, signs and stores the signed bytes in one database transaction, and
//! only then broadcasts.

pub mod calldata;
pub mod evm;
pub mod solana;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::{
    app::IdempotencyKey,
    chains::Registry,
    error::{Result, WalletOpsError},
    idempotency::{Idempotency, Prior, Ticket, request_hash},
    store::{ClaimRow, NewClaim, Store},
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

impl Submission {
    /// The submission result of the stored transaction `open` on `chain`.
    pub(crate) fn of(
        chain: &crate::chains::Chain,
        open: &crate::transactions::OpenTransaction,
    ) -> Self {
        let hash = open.hashes.last().cloned();
        Self {
            id: open.id,
            explorer_url: hash.as_deref().and_then(|h| chain.explorer_url(h)),
            hash,
            chain_name: chain.name().to_owned(),
        }
    }
}

/// The answer for stored record `open` when following up its first broadcast failed with
/// `err`: the submission, the record left to the monitor.
pub(crate) fn handed_over(
    chain: &crate::chains::Chain,
    open: &crate::transactions::OpenTransaction,
    err: &WalletOpsError,
) -> Submission {
    tracing::warn!(id = %open.id, error = %err, "following up a broadcast failed; the monitor takes over");
    Submission::of(chain, open)
}

/// Inserts `ticket`'s claim for record `id` with its `submission` as the stored response,
/// inside `conn`'s signing transaction. A claim lost to a concurrent twin is
/// IDEMPOTENT_REPLAY: the caller rolls back (record and nonce), and `Writes::run` turns that
/// into the twin's answer.
pub(crate) async fn claim_in<C: sea_orm::ConnectionTrait>(
    store: &Store,
    conn: &C,
    ticket: &NewClaim,
    id: Uuid,
    submission: &Submission,
) -> Result<()> {
    let row = succeeded_claim(ticket, id, submission)?;
    if store
        .insert_idempotency_keys(conn, vec![row])
        .await?
        .is_empty()
    {
        Err(claimed_elsewhere(ticket))
    } else {
        Ok(())
    }
}

/// The claim row of `claim` for record `id`: succeeded, with `submission` as its response.
pub(crate) fn succeeded_claim<'a>(
    claim: &'a NewClaim,
    id: Uuid,
    submission: &Submission,
) -> Result<ClaimRow<'a>> {
    Ok(ClaimRow {
        claim,
        state: "succeeded",
        transaction_id: Some(id),
        response: Some(stored_response(submission)?),
        error: None,
    })
}

/// The refusal of a send whose key a concurrent twin claimed first; `Writes::run` turns it
/// into the twin's answer.
pub(crate) fn claimed_elsewhere(claim: &NewClaim) -> WalletOpsError {
    WalletOpsError::IdempotentReplay(format!(
        "Idempotency-Key {} was claimed by a concurrent request",
        claim.key
    ))
}

/// The response stored under an idempotency key for `submission`.
pub(crate) fn stored_response(submission: &Submission) -> Result<serde_json::Value> {
    serde_json::to_value(submission)
        .map_err(|e| WalletOpsError::Internal(anyhow::anyhow!("response unstorable: {e}")))
}

/// Notes on `ticket` that its claim committed with record `id` and `submission`.
pub(crate) fn note_claimed(
    ticket: Option<&Ticket>,
    id: Uuid,
    submission: &Submission,
) -> Result<()> {
    if let Some(ticket) = ticket {
        ticket.claimed_with(id, stored_response(submission)?);
    }
    Ok(())
}

/// Commits the signing transaction `txn` of record `id` together with `ticket`'s claim: the
/// claim commits with the signed transaction or not at all.
pub(crate) async fn commit_with_claim(
    store: &Store,
    txn: sea_orm::DatabaseTransaction,
    ticket: Option<&Ticket>,
    id: Uuid,
    submission: &Submission,
) -> Result<()> {
    if let Some(ticket) = ticket
        && let Err(e) = claim_in(store, &txn, &ticket.claim, id, submission).await
    {
        txn.rollback().await?;
        return Err(e);
    }
    txn.commit().await?;
    note_claimed(ticket, id, submission)
}

/// The lease owner of a record its request still holds: no core's monitor follows it until
/// the request has handled its first send (or the hold runs out: the request died). Were the
/// monitor to send it meanwhile, a refusal the request meets could fail a payment that the
/// monitor's send made, or the caller be told SUBMITTED of a record the monitor ended.
pub(crate) const REQUEST_HOLD: Uuid = Uuid::nil();

/// How long after its request's deadline a record's hold lasts: for cores whose clocks
/// differ a little, and a commit in flight at the deadline.
const HOLD_MARGIN: chrono::Duration = chrono::Duration::seconds(10);

/// The times transactions were broadcast, written behind in batches, and the hand-over of
/// records from their requests to the monitor. A request answers as soon as the node
/// accepted its transaction, without waiting for a write: the note releases the request's
/// hold and tells the monitor that the record was sent and since when. One lost in a crash
/// makes the monitor (once the hold has run out) ask the node whether it holds the
/// transaction, and send the same bytes if not.
#[derive(Debug, Clone)]
pub struct BroadcastLog {
    notes: tokio::sync::mpsc::UnboundedSender<Note>,
    store: Store,
    hold: chrono::Duration,
}

/// What the broadcast log's writer is given.
#[derive(Debug)]
enum Note {
    /// The current payload of this record was accepted by the node.
    Sent(Uuid),
    /// Answer once every note before this one is written.
    Flush(tokio::sync::oneshot::Sender<()>),
}

/// Notes written in one UPDATE at most.
const BROADCAST_NOTES_PER_WRITE: usize = 256;

impl BroadcastLog {
    /// Starts the writer over `store` on the current runtime; requests last `request_timeout`
    /// at most.
    pub fn start(store: Store, request_timeout: std::time::Duration) -> Self {
        let (notes, mut pending) = tokio::sync::mpsc::unbounded_channel();
        let writer = store.clone();
        tokio::spawn(async move {
            let mut batch = Vec::with_capacity(BROADCAST_NOTES_PER_WRITE);
            while pending
                .recv_many(&mut batch, BROADCAST_NOTES_PER_WRITE)
                .await
                > 0
            {
                let (mut ids, mut flushes) = (Vec::with_capacity(batch.len()), Vec::new());
                for note in batch.drain(..) {
                    match note {
                        Note::Sent(id) => ids.push(id),
                        Note::Flush(done) => flushes.push(done),
                    }
                }
                if !ids.is_empty()
                    && let Err(e) = writer.record_broadcasts(&ids, chrono::Utc::now()).await
                {
                    tracing::warn!(error = %e, "recording broadcast times failed");
                }
                for done in flushes {
                    let _ = done.send(());
                }
            }
        });
        let hold = chrono::Duration::from_std(request_timeout)
            .unwrap_or(chrono::Duration::MAX)
            .checked_add(&HOLD_MARGIN)
            .unwrap_or(chrono::Duration::MAX);
        Self { notes, store, hold }
    }

    /// Until when a record a request is about to store is held by it.
    pub(crate) fn hold_until(&self) -> chrono::DateTime<chrono::Utc> {
        chrono::Utc::now() + self.hold
    }

    /// Notes that the current payload of record `id` was just accepted by the node.
    pub fn note(&self, id: Uuid) {
        // The writer ends only with the runtime; a note lost then is harmless (see above).
        let _ = self.notes.send(Note::Sent(id));
    }

    /// Waits until every note made so far is written: a core stopping hands its requests'
    /// records over, rather than leave them held until the holds run out.
    pub async fn flush(&self) {
        let (done, written) = tokio::sync::oneshot::channel();
        if self.notes.send(Note::Flush(done)).is_ok() {
            let _ = written.await;
        }
    }

    /// Hands record `id`, whose first send its request has handled without the node taking
    /// it, to the monitor at once. Should this fail, the hold runs out.
    pub(crate) async fn hand_over(&self, id: Uuid) {
        if let Err(e) = self.store.release_hold(id).await {
            tracing::warn!(%id, error = %e, "handing a record to the monitor failed; it waits for its hold to run out");
        }
    }
}

/// What a write's key stands for when the write arrives.
#[derive(Debug)]
pub enum Keyed {
    /// The key already has this answer: the write is not run again.
    Answered(Submission),
    /// The key is free: the write runs under this ticket.
    Fresh(Ticket),
}

/// Runs writes under their idempotency key.
#[derive(Debug, Clone)]
pub struct Writes {
    idempotency: Idempotency,
    store: Store,
}

impl Writes {
    /// Writes over `store`, with keys kept by `idempotency`.
    pub fn new(store: Store, idempotency: Idempotency) -> Self {
        Self { idempotency, store }
    }

    /// Opens the request (`path` and its canonical bytes) under `key`: the answer the key
    /// already stands for (a stored success replayed, a stored transaction answered from), or
    /// the ticket to run it under. A key used with another request is
    /// IDEMPOTENT_BODY_MISMATCH; one whose request failed is IDEMPOTENT_REPLAY.
    pub async fn open(
        &self,
        user: Uuid,
        key: IdempotencyKey,
        path: &str,
        canonical: &[u8],
        chains: &Registry,
    ) -> Result<Keyed> {
        let ticket = self
            .idempotency
            .ticket(user, key, path, request_hash(path, canonical));
        match self.idempotency.prior(&ticket).await? {
            Some(prior) => Ok(Keyed::Answered(self.answer(user, prior, chains).await?)),
            None => Ok(Keyed::Fresh(ticket)),
        }
    }

    /// Runs `act` under `ticket`, a key `open` found free: `act` claims it inside its signing
    /// transaction; when a concurrent twin claims first, its answer is this request's answer
    /// too.
    pub async fn run<F>(&self, ticket: Ticket, chains: &Registry, act: F) -> Result<Submission>
    where
        F: AsyncFnOnce(&Ticket) -> Result<Submission>,
    {
        let user = ticket.claim.user;
        fail::fail_point!("write-before-run");
        match act(&ticket).await {
            Ok(submission) => {
                // The transaction is stored and sent: an error now would tell the caller it
                // was not. The claim then keeps the response it committed with, whose id
                // still leads to the record.
                match stored_response(&submission) {
                    Ok(response) => {
                        if let Err(e) = self.idempotency.succeed(&ticket, response).await {
                            tracing::error!(id = %submission.id, error = ?e, "updating the stored response");
                        }
                    }
                    Err(e) => {
                        tracing::error!(id = %submission.id, error = ?e, "storing the response")
                    }
                }
                Ok(submission)
            }
            Err(err @ WalletOpsError::IdempotentReplay(_)) => {
                // The claim was lost to a concurrent twin: answer as it will.
                match self.idempotency.prior(&ticket).await? {
                    Some(prior) => self.answer(user, prior, chains).await,
                    None => Err(err),
                }
            }
            Err(err) => {
                fail::fail_point!("write-before-failing-key");
                match self.idempotency.fail(&ticket, &err).await {
                    Ok(true) => {}
                    // A concurrent twin claimed the key before this request failed: its
                    // simulation may have failed for the very payment the twin made (the
                    // balance it spent). The key stands for the twin's transaction, and an
                    // error here would have the caller pay again under a new key.
                    Ok(false) => {
                        if let Ok(Some(prior)) = self.idempotency.prior(&ticket).await {
                            return self.answer(user, prior, chains).await;
                        }
                    }
                    Err(e) => tracing::error!(error = ?e, "recording a failed write"),
                }
                Err(err)
            }
        }
    }

    async fn answer(&self, user: Uuid, prior: Prior, chains: &Registry) -> Result<Submission> {
        match prior {
            Prior::Replay(stored) => serde_json::from_value(stored).map_err(|e| {
                WalletOpsError::Internal(anyhow::anyhow!("stored response unreadable: {e}"))
            }),
            Prior::Recover(id) => {
                let tx = self
                    .store
                    .find_transaction(user, id)
                    .await?
                    .ok_or_else(|| {
                        WalletOpsError::Internal(anyhow::anyhow!(
                            "claimed transaction {id} missing"
                        ))
                    })?;
                let (chain_name, explorer_url) = chains.label(&tx.chain, tx.hash.as_deref());
                Ok(Submission {
                    id,
                    explorer_url,
                    hash: tx.hash,
                    chain_name,
                })
            }
        }
    }
}
