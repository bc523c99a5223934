//! The frame every write runs in: open the request under its key (an answered key replays),
//! run it, and claim the key inside the signing transaction.

use std::collections::{HashMap, HashSet};

use uuid::Uuid;

use super::{
    Idempotency, IdempotencyKey,
    canonical::request_hash,
    claims::{Prior, Ticket},
};
use crate::error::{Result, WalletOpsError};
use walletops_chains::Registry;
use walletops_domain::{ClaimState, Submission};
use walletops_store::{ClaimRow, Conn, NewClaim, Txn};

/// What a write run under a key answers: a submission, which the key stands for from then
/// on, or something that leaves the key unclaimed (a write held for approval).
pub trait Answer: From<Submission> {
    /// The submission the key now stands for, if the write made one.
    fn submission(&self) -> Option<&Submission>;
}

impl Answer for Submission {
    fn submission(&self) -> Option<&Submission> {
        Some(self)
    }
}

/// What a write's key stands for when the write arrives.
#[derive(Debug)]
pub enum Keyed {
    /// The key already has this answer: the write is not run again.
    Answered(Submission),
    /// The key is free: the write runs under this ticket.
    Fresh(Box<Ticket>),
}

impl Idempotency {
    /// Opens the request (`path` and its canonical bytes) of `user` under `key`: the answer
    /// the key already stands for (a stored success replayed, a stored transaction answered
    /// from), or the ticket to run it under.
    pub async fn open(
        &self,
        user: Uuid,
        key: IdempotencyKey,
        path: &str,
        canonical: &[u8],
        chains: &Registry,
    ) -> Result<Keyed> {
        let ticket = self.ticket(user, key, path, request_hash(path, canonical));
        match self.prior(&ticket).await? {
            Some(prior) => Ok(Keyed::Answered(self.answer(user, prior, chains).await?)),
            None => Ok(Keyed::Fresh(Box::new(ticket))),
        }
    }

    /// Runs `act` under `ticket`, a key `open` found free: `act` claims it inside its signing
    /// transaction; when a concurrent twin claims first, its answer is this request's answer
    /// too.
    pub async fn run<T, F>(&self, mut ticket: Ticket, chains: &Registry, act: F) -> Result<T>
    where
        T: Answer,
        F: AsyncFnOnce(&mut Ticket) -> Result<T>,
    {
        let user = ticket.claim.user;
        // A race test's racers meet here first, then its failpoint can hold one back.
        crate::barrier::wait("write-before-run").await;
        fail::fail_point!("write-before-run");
        match act(&mut ticket).await {
            Ok(answer) => {
                // The transaction is stored and sent: an error now would tell the caller it
                // was not. The claim then keeps the response it committed with, whose id
                // still leads to the record.
                if let Some(submission) = answer.submission()
                    && let Err(e) = self.succeed(&ticket, submission).await
                {
                    tracing::error!(id = %submission.id, error = ?e, "updating the stored response");
                }
                Ok(answer)
            }
            Err(err @ WalletOpsError::IdempotentReplay(_)) => {
                // The claim was lost to a concurrent twin: answer as it will.
                crate::metrics::twin_met("claim");
                match self.prior(&ticket).await? {
                    Some(prior) => self.answer(user, prior, chains).await.map(T::from),
                    None => Err(err),
                }
            }
            // Nothing was claimed: the key stays free for the same request to succeed later,
            // unless a concurrent twin claimed it meanwhile (its build may have failed for
            // the very swap the twin made): then the twin's answer is this one's too.
            Err(err) if err.leaves_key_free() && !ticket.is_claimed() => {
                match self.prior(&ticket).await {
                    Ok(Some(prior)) => {
                        crate::metrics::twin_met("failure");
                        self.answer(user, prior, chains).await.map(T::from)
                    }
                    _ => Err(err),
                }
            }
            Err(err) => {
                fail::fail_point!("write-before-failing-key");
                match self.fail(&ticket, &err).await {
                    Ok(true) => {}
                    // A concurrent twin claimed the key before this request failed: its
                    // simulation may have failed for the very payment the twin made (the
                    // balance it spent). The key stands for the twin's transaction, and an
                    // error here would have the caller pay again under a new key.
                    Ok(false) => {
                        crate::metrics::twin_met("failure");
                        if let Ok(Some(prior)) = self.prior(&ticket).await {
                            return self.answer(user, prior, chains).await.map(T::from);
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
            Prior::Replay(stored) => {
                crate::metrics::idempotent_replay();
                Ok(stored)
            }
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

    /// Claims, inside the signing transaction `conn`, the keys of records just stored there:
    /// each `(claim, record id, submission)` succeeded, with the submission as its stored
    /// response, in one INSERT for them all. Returns the claims a concurrent twin holds
    /// already (ascending indexes, each with the refusal to answer): the caller must not
    /// commit their records; `run` turns the refusal into the twin's answer. The EVM
    /// signing lanes claim a batch through it, a Solana write its one record.
    pub(crate) async fn claim<C: Conn>(
        &self,
        conn: &C,
        claims: &[(&NewClaim, Uuid, &Submission)],
    ) -> Result<Vec<(usize, WalletOpsError)>> {
        let rows = claims
            .iter()
            .map(|&(claim, id, submission)| ClaimRow {
                claim,
                state: ClaimState::Succeeded,
                transaction_id: Some(id),
                response: Some(submission),
                error: None,
            })
            .collect();
        let won: HashSet<(Uuid, Uuid)> = self.store.insert_idempotency_keys(conn, rows).await?;
        // Every line reserved for is locked first, in one order: lanes of two chains whose
        // batches hold writes of the same lines never wait on each other.
        let limited: Vec<Uuid> = claims
            .iter()
            .filter_map(|(claim, _, _)| claim.spends.first().map(|s| s.key_id))
            .collect();
        let lines = if limited.is_empty() {
            HashMap::new()
        } else {
            self.store.lock_lines(conn, &limited).await?
        };
        let mut refused = Vec::new();
        for (i, &(claim, id, _)) in claims.iter().enumerate() {
            if !won.contains(&(claim.user, claim.key)) {
                refused.push((i, claimed_elsewhere(claim)));
                continue;
            }
            // In order: a batch's earlier writes of a key count against its later ones. A
            // write refused on one asset reserves none of its others.
            let Some(line) = claim.spends.first().and_then(|s| lines.get(&s.key_id)) else {
                continue;
            };
            match crate::limits::reserve(&self.store, conn, (&claim.spends, *line), id).await {
                Ok(()) => {}
                Err(e @ WalletOpsError::Forbidden(_)) => refused.push((i, e)),
                Err(e) => return Err(e),
            }
        }
        Ok(refused)
    }

    /// Commits the signing transaction `txn` of record `id` together with `ticket`'s claim:
    /// the claim commits with the signed transaction or not at all.
    pub(crate) async fn commit_with_claim(
        &self,
        txn: Txn,
        ticket: &Ticket,
        id: Uuid,
        submission: &Submission,
    ) -> Result<()> {
        let lost = match self.claim(&txn, &[(&ticket.claim, id, submission)]).await {
            Ok(lost) => lost,
            Err(e) => {
                txn.rollback().await?;
                return Err(e);
            }
        };
        if let Some((_, refusal)) = lost.into_iter().next() {
            txn.rollback().await?;
            return Err(refusal);
        }
        txn.commit().await?;
        note_claimed(ticket, id, submission);
        Ok(())
    }
}

/// The refusal of a send whose key a concurrent twin claimed first; `Idempotency::run` turns
/// it into the twin's answer.
pub(crate) fn claimed_elsewhere(claim: &NewClaim) -> WalletOpsError {
    WalletOpsError::IdempotentReplay(format!(
        "Idempotency-Key {} was claimed by a concurrent request",
        claim.key
    ))
}

/// Notes on `ticket` that its claim committed with record `id` and `submission`.
pub(crate) fn note_claimed(ticket: &Ticket, id: Uuid, submission: &Submission) {
    ticket.claimed_with(id, submission.clone());
}
