//! The signing lanes: each wallet's sends queue per core and are signed, stored and claimed
//! in one database transaction per batch, then broadcast in nonce order while the next batch
//! is signed.

use super::*;

/// A draft and where its answer goes.
type Queued = (Draft, oneshot::Sender<Result<Sent>>);

/// A committed batch's transactions and their waiters, in nonce order.
type Committed = Vec<(OpenTransaction, oneshot::Sender<Result<Sent>>)>;

/// How one try at signing a batch ended.
enum Attempt {
    /// Everything signed, stored and claimed; the transaction is to be committed.
    Stored(Txn, Vec<OpenTransaction>),
    /// These sends (ascending indexes) are refused; the transaction is to be rolled back.
    Refused(Txn, Vec<(usize, WalletOpsError)>),
}

impl Attempt {
    /// Every send refused with `err`: a store error ends the batch, not the drainer.
    fn refuse_all(txn: Txn, n: usize, err: &dyn std::fmt::Display) -> Self {
        Self::Refused(txn, (0..n).map(|i| (i, batch_failed(err))).collect())
    }
}

/// What a lane holds for its drainer.
enum Take {
    /// Drafts to sign.
    Batch(Vec<Queued>),
    /// Nothing queued, but the drainer's last broadcast is still out: the lane stays open.
    Idle,
    /// Nothing queued; the lane is closed.
    Closed,
}

/// The signing lanes of one core: the drafts queued per wallet. A lane present in the map
/// has a drainer running.
#[derive(Debug, Default)]
pub(super) struct Lanes {
    queued: Mutex<HashMap<LaneKey, Vec<Queued>>>,
    /// Wallets the nonce ledger has a row for.
    known: Mutex<HashSet<LaneKey>>,
}

/// Drafts signed and stored in one database transaction at most.
const MAX_BATCH: usize = 64;

impl Lanes {
    /// Queues a draft; true when its lane was idle, so the caller must start its drainer.
    fn push(&self, key: LaneKey, draft: Draft, reply: oneshot::Sender<Result<Sent>>) -> bool {
        let mut queued = self.queued.lock().unwrap_or_else(PoisonError::into_inner);
        crate::metrics::lane_depth(1.0);
        match queued.entry(key) {
            Entry::Occupied(mut lane) => {
                lane.get_mut().push((draft, reply));
                false
            }
            Entry::Vacant(lane) => {
                lane.insert(vec![(draft, reply)]);
                true
            }
        }
    }

    /// The next batch of lane `key`. An empty lane closes unless `sending` (its drainer
    /// still has a broadcast out, which the next batch's must follow).
    fn next_batch(&self, key: &LaneKey, sending: bool) -> Take {
        let mut queued = self.queued.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(lane) = queued.get_mut(key) else {
            return Take::Closed;
        };
        if !lane.is_empty() {
            let take = lane.len().min(MAX_BATCH);
            crate::metrics::lane_depth(-(take as f64));
            return Take::Batch(lane.drain(..take).collect());
        }
        if sending {
            return Take::Idle;
        }
        queued.remove(key);
        Take::Closed
    }

    pub(super) fn known(&self, key: &LaneKey) -> bool {
        self.known
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(key)
    }

    pub(super) fn learn(&self, key: LaneKey) {
        self.known
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key);
    }
}

/// Closes a lane whose drainer died (a panic): its queued callers get an error instead of
/// waiting forever, and the next send starts a new drainer.
struct LaneGuard<'a> {
    lanes: &'a Lanes,
    key: &'a LaneKey,
    armed: bool,
}

impl Drop for LaneGuard<'_> {
    fn drop(&mut self) {
        if self.armed
            && let Some(lost) = self
                .lanes
                .queued
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(self.key)
        {
            crate::metrics::lane_depth(-(lost.len() as f64));
        }
    }
}

/// The error of every send of a batch that could not be stored.
fn batch_failed(err: &dyn std::fmt::Display) -> WalletOpsError {
    WalletOpsError::Internal(anyhow::anyhow!("database: storing the signed batch: {err}"))
}

impl EvmPipeline {
    /// Queues `draft` in its wallet's signing lane and waits until it is signed, stored and
    /// broadcast once.
    ///
    /// Every wallet's sends pass through one lane per core: whatever queued while the
    /// previous batch was being written is signed and stored in one database transaction
    /// (one durable commit for the batch instead of one per send; see `sign_batch` for how a
    /// lost idempotency claim or a signer error undoes only that send). Once committed, the batch is broadcast in nonce order as one JSON-RPC batch,
    /// after the lane's previous batch, while the next batch is being signed: the node sees
    /// the wallet's nonces in order. The drainer runs on its own task: a caller that goes
    /// away after queueing still gets its transaction stored and sent.
    pub(super) async fn sign_in_lane(&self, draft: Draft) -> Result<Sent> {
        let key = (draft.record.chain_id, draft.from);
        let (reply, answer) = oneshot::channel();
        if self.lanes.push(key, draft, reply) {
            let this = self.clone();
            tokio::spawn(async move { this.drain(key).await });
        }
        answer.await.map_err(|_| {
            WalletOpsError::Internal(anyhow::anyhow!("the signing lane ended without an answer"))
        })?
    }

    /// Signs, stores and broadcasts the batches of lane `key` until it is empty.
    async fn drain(&self, key: LaneKey) {
        let mut guard = LaneGuard {
            lanes: &self.lanes,
            key: &key,
            armed: true,
        };
        let mut sending: Option<tokio::task::JoinHandle<()>> = None;
        loop {
            let batch = match self.lanes.next_batch(&key, sending.is_some()) {
                Take::Batch(batch) => batch,
                Take::Idle => {
                    if let Some(previous) = sending.take() {
                        let _ = previous.await;
                    }
                    continue;
                }
                Take::Closed => break,
            };
            let client = batch[0].0.client.clone();
            let committed = self.sign_batch(batch).await;
            if committed.is_empty() {
                continue;
            }
            let (this, previous) = (self.clone(), sending.take());
            sending = Some(tokio::spawn(async move {
                if let Some(previous) = previous {
                    let _ = previous.await;
                }
                this.broadcast_batch(client, committed).await;
            }));
        }
        guard.armed = false;
    }

    /// Sends a committed batch in nonce order and answers each waiter with its outcome.
    async fn broadcast_batch(&self, client: EvmClient, committed: Committed) {
        // The crash tests stop the process here: signed and stored, not yet broadcast.
        fail::fail_point!("evm-before-broadcast");
        let payloads: Vec<&[u8]> = committed
            .iter()
            .map(|(open, _)| open.signed_payload.as_slice())
            .collect();
        let outcomes = client.broadcast_all(&payloads).await;
        for ((open, reply), outcome) in committed.into_iter().zip(outcomes) {
            let accepted = outcome == BroadcastOutcome::Accepted;
            if accepted {
                self.broadcasts.note(open.id);
            }
            let id = open.id;
            // A request that went away (its caller disconnected, its deadline passed) does
            // not follow its send up: the monitor does, at once rather than once the hold
            // runs out.
            if reply.send(Ok((open, outcome))).is_err() && !accepted {
                self.broadcasts.hand_over(id).await;
            }
        }
    }

    /// Signs and stores `batch` in one database transaction and answers the waiters of the
    /// sends it refused; returns the committed ones, in nonce order.
    ///
    /// The batch takes a run of nonces with one UPDATE, stores its records with one INSERT
    /// and claims their keys with another. A send whose key is claimed already (a concurrent
    /// twin won it) or that the signer refuses is refused alone: the database transaction is
    /// rolled back and the others are signed again with a shorter run, so no nonce is lost.
    async fn sign_batch(&self, batch: Vec<Queued>) -> Committed {
        crate::metrics::signing_batch(batch.len());
        // Refusals are answered after the commit: a twin whose claim lost to another send of
        // this batch looks the winner's response up, which is visible only then.
        let mut refused = Vec::new();
        let mut keys = HashSet::new();
        let mut drafts = Vec::with_capacity(batch.len());
        for (draft, reply) in batch {
            if keys.insert((draft.claim.user, draft.claim.key)) {
                drafts.push((draft, reply));
            } else {
                refused.push((reply, claimed_elsewhere(&draft.claim)));
            }
        }
        let stored = loop {
            if drafts.is_empty() {
                break Ok(Vec::new());
            }
            match self.try_sign_batch(&drafts).await {
                Ok(Attempt::Stored(txn, opens)) => {
                    let committed = txn.commit().await;
                    if committed.is_ok() {
                        for open in &opens {
                            crate::metrics::write_submitted(&open.chain, open.kind.as_str());
                        }
                    }
                    break committed.map(|()| opens);
                }
                Ok(Attempt::Refused(txn, losers)) => {
                    if let Err(e) = txn.rollback().await {
                        break Err(e);
                    }
                    // Highest index first, so the lower ones stay valid.
                    for (i, err) in losers.into_iter().rev() {
                        let (_, reply) = drafts.remove(i);
                        refused.push((reply, err));
                    }
                }
                Err(e) => break Err(e),
            }
        };
        for (reply, e) in refused {
            let _ = reply.send(Err(e));
        }
        match stored {
            Ok(opens) => {
                if let Some((draft, _)) = drafts.first() {
                    self.lanes.learn((draft.record.chain_id, draft.from));
                }
                opens
                    .into_iter()
                    .zip(drafts)
                    .map(|(open, (_, reply))| (open, reply))
                    .collect()
            }
            Err(e) => {
                for (_, reply) in drafts {
                    let _ = reply.send(Err(batch_failed(&e)));
                }
                Vec::new()
            }
        }
    }

    /// One try at `sign_batch`: the open database transaction with the records stored and the
    /// keys claimed, or with the sends to refuse (ascending indexes) and why.
    async fn try_sign_batch(&self, drafts: &[Queued]) -> std::result::Result<Attempt, StoreError> {
        let first = &drafts[0].0;
        let txn = self.store.begin().await?;
        let floor = drafts.iter().filter_map(|(d, _)| d.floor).max();
        let start = match self
            .store
            .allocate_nonce(
                &txn,
                first.record.chain_id,
                first.from,
                floor,
                drafts.len() as u64,
            )
            .await
        {
            Ok(start) => start,
            Err(e) => return Ok(Attempt::refuse_all(txn, drafts.len(), &e)),
        };
        let mut records = Vec::with_capacity(drafts.len());
        let mut losers = Vec::new();
        for (i, (draft, _)) in drafts.iter().enumerate() {
            let nonce = start + i as u64;
            let mut tx = draft.tx.clone();
            tx.nonce = nonce;
            match self.signer.sign_eip1559(&draft.wallet, tx).await {
                Ok((payload, hash)) => {
                    let mut record = draft.record.clone();
                    record.nonce = Some(nonce);
                    record.hash = hash;
                    record.signed_payload = payload;
                    record.note = Some(format!("signed with nonce {nonce}"));
                    records.push(record);
                }
                Err(e) => losers.push((i, e)),
            }
        }
        if !losers.is_empty() {
            return Ok(Attempt::Refused(txn, losers));
        }
        let opens = match self.store.insert_transactions(&txn, records).await {
            Ok(opens) => opens,
            Err(e) => return Ok(Attempt::refuse_all(txn, drafts.len(), &e)),
        };
        let submissions: Vec<Submission> = drafts
            .iter()
            .zip(&opens)
            .map(|((draft, _), open)| draft.chain.submission_of(open))
            .collect();
        let claims: Vec<_> = drafts
            .iter()
            .zip(&opens)
            .zip(&submissions)
            .map(|(((draft, _), open), submission)| (&draft.claim, open.id, submission))
            .collect();
        match self.idempotency.claim(&txn, &claims).await {
            Ok(lost) if lost.is_empty() => Ok(Attempt::Stored(txn, opens)),
            Ok(lost) => Ok(Attempt::Refused(txn, lost)),
            Err(e) => Ok(Attempt::refuse_all(txn, drafts.len(), &e)),
        }
    }
}
