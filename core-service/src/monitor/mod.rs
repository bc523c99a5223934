//! The transaction monitor: a background task in every core that takes each open transaction
//! to a final state and keeps the nonce ledger true.
//!
//! Each sweep leases a batch of open records (one conditional UPDATE per record, so any
//! number of cores share the work and a dead core's lease runs out) and, for each:
//! - a receipt for any hash it ever had settles it CONFIRMED or REVERTED once its block is
//!   the chain's `confirmations` deep; until then the record stays open, and a block
//!   reorganised away leaves it to the steps below like any transaction the node lost;
//! - its nonce used on chain by something else means it can never be included as signed: it
//!   is re-signed with a new nonce (the wallet was used outside the service);
//! - never sent, or lost by the node: the same signed bytes are sent again;
//! - unmined past `stuck_after_secs`: it is replaced with the same nonce and a fee raised by
//!   `fee_bump_percent`, unless that passes `max_fee_per_gas_gwei` (then FEE_CAPPED);
//! - refused for good: it ends DROPPED and its nonce is given back or filled.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use alloy::primitives::B256;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use uuid::Uuid;

use crate::{
    chains::{
        ChainFamily, Registry,
        evm::{BroadcastOutcome, Fees, Rejection},
        solana::{SendOutcome, SignatureState},
    },
    config::MonitorConfig,
    error::{Result, WalletOpsError},
    idempotency::Idempotency,
    store::Store,
    transactions::{OpenTransaction, TxKind, TxStatus},
    transfers::{
        evm::{Ending, EvmPipeline, Resign, decode_payload},
        solana::SolanaPipeline,
    },
    wallets::Wallets,
};

/// The history note of a record whose sends the node keeps answering without a verdict.
const NO_VERDICT_NOTE: &str = "no verdict from the node yet (unreachable, or answering with errors that say nothing of the transaction); sent again each sweep";

/// Records followed per sweep.
const BATCH: u64 = 100;
/// Signed versions a Solana transfer gets at most. Once that many blockhashes have expired
/// with none of its signatures seen, the record ends DROPPED instead of being signed again
/// for ever (a node that keeps losing it, or answering its sends without a verdict): none of
/// them can land any more.
const SOLANA_MAX_VERSIONS: usize = 5;
/// A final state the chain shows for an open record.
#[derive(Debug)]
struct Settlement {
    open: OpenTransaction,
    status: TxStatus,
    error: Option<String>,
    note: Option<String>,
    /// The hash that was included.
    hash: String,
}

/// Stuck times a record a node took before is kept open while every send of it is refused,
/// before it ends DROPPED and its nonce is filled.
const REFUSED_STUCK_TIMES: i32 = 5;
/// Records followed at once within a sweep.
const FOLLOWERS: usize = 16;
/// Sweeps between purges of expired idempotency keys.
const PURGE_EVERY: u64 = 600;

/// The monitor of one core.
#[derive(Debug, Clone)]
pub struct Monitor {
    owner: Uuid,
    store: Store,
    chains: Arc<Registry>,
    wallets: Wallets,
    evm: EvmPipeline,
    solana: SolanaPipeline,
    idempotency: Idempotency,
    config: MonitorConfig,
    /// Since when the node has not answered about each record it last failed to answer
    /// about: a record says so once that lasts as long as a transaction takes to count as
    /// stuck, not at the first error.
    unanswered: Arc<Marks>,
    /// When each record was last raised in fee because the node called it underpriced.
    raised: Arc<Marks>,
    /// Since when each record's nonce has been seen used on chain while none of its own
    /// versions was found: it is signed with a new nonce only once that has lasted.
    taken: Arc<Marks>,
    /// Since when every send of each record has been refused: on EVM of a record a node took
    /// before; on Solana of a record whose current version has not been seen.
    refused_since: Arc<Marks>,
    /// Since when this core has failed to follow each record: once that lasts a lease, the
    /// core gives the record up after each failure, for a core that can follow it.
    failing: Arc<Marks>,
    /// When this core last gave each record up: it leaves the record to the other cores for
    /// a lease. Taken back at its next sweep, a record whose follow fails slowly (a node
    /// that times out) would be free for a moment only, and rarely reach another core.
    gave_up: Arc<Marks>,
}

/// A time per record, kept in memory for the records this core follows.
#[derive(Debug, Default)]
struct Marks(Mutex<HashMap<Uuid, DateTime<Utc>>>);

impl Marks {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, DateTime<Utc>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The time marked for `id`, marked now if there was none.
    fn first(&self, id: Uuid) -> DateTime<Utc> {
        *self.map().entry(id).or_insert_with(Utc::now)
    }

    /// Marks `id` now.
    fn set(&self, id: Uuid) {
        self.map().insert(id, Utc::now());
    }

    fn clear(&self, id: Uuid) {
        self.map().remove(&id);
    }

    /// The records marked.
    fn ids(&self) -> Vec<Uuid> {
        self.map().keys().copied().collect()
    }

    fn marked(&self, id: Uuid) -> bool {
        self.map().contains_key(&id)
    }

    /// Whether `period` has passed since the time marked for `id` (or none is marked); if
    /// so, marks now.
    fn due(&self, id: Uuid, period: chrono::Duration) -> bool {
        let now = Utc::now();
        let mut map = self.map();
        if map.get(&id).is_some_and(|at| now - *at < period) {
            return false;
        }
        map.insert(id, now);
        true
    }

    /// Forgets the times before `horizon`: records settled or followed by another core
    /// since, mostly.
    fn forget_before(&self, horizon: DateTime<Utc>) {
        self.map().retain(|_, at| *at >= horizon);
    }
}

/// The final state a mined transaction's `receipt` gives its record.
fn outcome_of(receipt: &alloy::rpc::types::TransactionReceipt) -> (TxStatus, Option<String>) {
    if receipt.status() {
        (TxStatus::Confirmed, None)
    } else {
        (TxStatus::Reverted, Some("execution reverted".to_owned()))
    }
}

/// Whether block `block` is its chain's `confirmations` deep. A receipt is the node's
/// canonical chain only: one for a block that is reorganised away is gone at the next sweep.
async fn deep_enough(
    chain: &crate::chains::Chain,
    client: &crate::chains::evm::EvmClient,
    block: u64,
) -> Result<bool> {
    let needed = chain.confirmations();
    Ok(needed <= 1 || client.block_number().await?.saturating_sub(block) + 1 >= needed)
}

fn hash_of(h: &str) -> Result<B256> {
    h.parse()
        .map_err(|_| WalletOpsError::Internal(anyhow::anyhow!("stored hash {h} unreadable")))
}

impl Monitor {
    /// A monitor over the core's parts.
    pub fn new(
        store: Store,
        chains: Arc<Registry>,
        wallets: Wallets,
        evm: EvmPipeline,
        solana: SolanaPipeline,
        idempotency: Idempotency,
        config: MonitorConfig,
    ) -> Self {
        Self {
            owner: Uuid::now_v7(),
            store,
            chains,
            wallets,
            evm,
            solana,
            idempotency,
            config,
            unanswered: Arc::default(),
            raised: Arc::default(),
            taken: Arc::default(),
            refused_since: Arc::default(),
            failing: Arc::default(),
            gave_up: Arc::default(),
        }
    }

    /// Sweeps until `stop` completes (a sweep under way is finished first), then gives up
    /// this core's leases.
    pub async fn run(self, stop: impl Future<Output = ()>) {
        let mut tick = tokio::time::interval(Duration::from_millis(self.config.poll_interval_ms));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tokio::pin!(stop);
        let mut sweeps: u64 = 0;
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                () = &mut stop => break,
            }
            if let Err(e) = self.sweep().await {
                tracing::warn!(error = %e, "monitor sweep failed");
            }
            sweeps += 1;
            if sweeps.is_multiple_of(PURGE_EVERY)
                && let Err(e) = self.idempotency.purge().await
            {
                tracing::warn!(error = %e, "purging idempotency keys failed");
            }
        }
        match self.store.release_leases(self.owner).await {
            Ok(n) => tracing::info!(
                records = n,
                "monitor stopped; its records are free for other cores"
            ),
            Err(e) => {
                tracing::warn!(error = %e, "releasing the monitor's leases failed; they run out instead")
            }
        }
    }

    /// One pass over the open transactions this core can lease.
    pub async fn sweep(&self) -> Result<()> {
        let now = Utc::now();
        let lease = chrono::Duration::seconds(self.config.lease_secs as i64);
        self.gave_up.forget_before(now - lease);
        let leased = self
            .store
            .lease_open_transactions(self.owner, now, now + lease, BATCH, &self.gave_up.ids())
            .await?;
        // Another core followed these since this one last did: what this one remembers of
        // them would date a refusal, a taken nonce or a failing node from before that turn.
        for id in &leased.taken_over {
            for marks in [
                &self.unanswered,
                &self.taken,
                &self.refused_since,
                &self.failing,
            ] {
                marks.clear(*id);
            }
        }
        let leased = leased.records;
        let ids: Vec<Uuid> = leased.iter().map(|open| open.id).collect();
        // Each record waits mostly on its node: several are followed at once.
        let follow_all = futures::stream::iter(leased)
            .map(|open| async move {
                let id = open.id;
                match self.follow(open).await {
                    Ok(settled) => {
                        self.failing.clear(id);
                        settled
                    }
                    Err(e) => {
                        tracing::warn!(%id, error = %e, "following a transaction failed");
                        self.give_up_if_failing(id, lease).await;
                        None
                    }
                }
            })
            .buffer_unordered(FOLLOWERS)
            .filter_map(std::future::ready)
            .collect::<Vec<Settlement>>();
        // A sweep slowed by its nodes past the lease would let another core follow the same
        // records at once: the lease is renewed every third of it while the sweep lasts.
        let settled = while_renewing(
            follow_all,
            lease.to_std().unwrap_or_default() / 3,
            || async {
                if let Err(e) = self
                    .store
                    .renew_leases(self.owner, &ids, Utc::now() + lease)
                    .await
                {
                    tracing::warn!(error = %e, "renewing the monitor's leases failed");
                }
            },
        )
        .await;
        // Not by the records leased now: a record can skip sweeps (leased by another core
        // for a while, say) and must keep its marks meanwhile.
        let horizon =
            now - chrono::Duration::seconds(10 * self.config.stuck_after_secs.max(60) as i64);
        self.unanswered.forget_before(horizon);
        self.raised.forget_before(horizon);
        self.taken.forget_before(horizon);
        self.refused_since.forget_before(horizon);
        self.failing.forget_before(horizon);
        // The final states of the sweep are written in one database transaction; when it
        // fails, the records are still open and leased to this core, and the next sweep
        // finds the same receipts.
        if !settled.is_empty() {
            let txn = self.store.begin().await?;
            for s in settled {
                let id = s.open.id;
                if !self
                    .store
                    .settle_transaction(&txn, &s.open, s.status, s.error, s.note, Some(&s.hash))
                    .await?
                {
                    tracing::debug!(%id, "changed by another worker before it was settled");
                }
            }
            txn.commit().await?;
        }
        Ok(())
    }

    /// Gives up the lease on record `id` once this core has failed to follow it for a
    /// lease: renewed each sweep, the lease would otherwise never run out, and a core whose
    /// node is down (or that lacks the record's chain) would hold the record, and every later
    /// nonce of its wallet, from the cores that can follow it.
    async fn give_up_if_failing(&self, id: Uuid, lease: chrono::Duration) {
        if Utc::now() - self.failing.first(id) < lease {
            return;
        }
        match self.store.release_lease(self.owner, id).await {
            Ok(()) => {
                self.gave_up.set(id);
                tracing::debug!(%id, "gave up a transaction this core cannot follow");
            }
            Err(e) => tracing::warn!(%id, error = %e, "giving up a lease failed"),
        }
    }

    /// Follows `open` one step; returns its final state when the chain shows one.
    async fn follow(&self, open: OpenTransaction) -> Result<Option<Settlement>> {
        let id = open.id;
        let chain = self.chains.resolve(&open.chain)?.clone();
        if chain.family() == ChainFamily::Solana {
            return self.follow_solana(&chain, open).await;
        }
        let client = self.evm.client(&chain)?;
        let from = open
            .from
            .parse()
            .map_err(|_| WalletOpsError::Internal(anyhow::anyhow!("bad sender {}", open.from)))?;
        for hash in open.hashes.iter().rev() {
            let receipt = match client.receipt(hash_of(hash)?).await {
                Ok(receipt) => {
                    self.unanswered.clear(id);
                    receipt
                }
                Err(e) => {
                    self.no_verdict(&open, self.unanswered.first(id)).await?;
                    return Err(e);
                }
            };
            if let Some(receipt) = receipt {
                let block = receipt.block_number.unwrap_or_default();
                let included = format!(
                    "included in block {block} ({:#x})",
                    receipt.block_hash.unwrap_or_default()
                );
                if !deep_enough(&chain, &client, block).await? {
                    let needed = chain.confirmations();
                    self.note_once(
                        &open,
                        format!("{included}; waiting for {needed} confirmations"),
                    )
                    .await?;
                    return Ok(None);
                }
                let (status, error) = outcome_of(&receipt);
                let note = Some(included);
                return Ok(Some(Settlement {
                    hash: hash.clone(),
                    open,
                    status,
                    error,
                    note,
                }));
            }
        }
        let Some(nonce) = open.nonce else {
            return Ok(None);
        };
        // Read after the receipts, so the usual case (mined) costs one call. Ours may have
        // been mined since: `resign_with_new_nonce` re-signs only when the node holds none of
        // the record's hashes.
        let mined = client.mined_nonce(from, 1).await?;
        if mined > nonce {
            // A filler is never signed again (only found unneeded, and the record it fills
            // settled): it needs no key.
            if open.kind == TxKind::NonceFill {
                self.resign_and_send(&chain, None, &client, &open, "seen on chain")
                    .await?;
            } else if let Some(wallet) = self.signable(&open).await {
                self.resign_and_send(&chain, Some(&wallet), &client, &open, "seen on chain")
                    .await?;
            }
            return Ok(None);
        }
        self.taken.clear(id);
        let current = open
            .hashes
            .last()
            .ok_or_else(|| WalletOpsError::Internal(anyhow::anyhow!("record {id} has no hash")))?;
        let sent_before = open.last_broadcast_at.is_some();
        let stuck_after = self.stuck_after();
        if !sent_before || !client.knows(hash_of(current)?).await? {
            let mut retaken = false;
            match client.broadcast(&open.signed_payload).await {
                BroadcastOutcome::Accepted if sent_before => {
                    // The stuck time still runs from the first send: a node that keeps
                    // losing a transaction (a pool evicting it for its price) gets it again,
                    // and it is replaced with a higher fee in time all the same, below.
                    tracing::info!(%id, "rebroadcast a transaction the node had lost");
                    retaken = true;
                }
                BroadcastOutcome::Accepted => self.sent(id).await?,
                BroadcastOutcome::Unknown(why) => {
                    tracing::warn!(%id, %why, "no verdict from the node; will send again");
                    self.no_verdict(&open, open.created_at).await?;
                    // A node that refuses a nonce ahead of its own ("nonce too high") never
                    // takes a record above a gap: the gap is filled once it is stuck.
                    if Utc::now() - open.created_at >= stuck_after
                        && let Some(wallet) = self.signable(&open).await
                    {
                        self.gap_filled_below(&chain, &wallet, &client, &open, from, nonce)
                            .await?;
                    }
                }
                BroadcastOutcome::Rejected(rejection) => {
                    let Some(wallet) = self.signable(&open).await else {
                        return Ok(None);
                    };
                    match rejection {
                        Rejection::NonceTooLow(why) => {
                            self.resign_and_send(&chain, Some(&wallet), &client, &open, &why)
                                .await?;
                        }
                        // Raised at once, then at most once a stuck time: another transaction
                        // at the nonce (the wallet's owner's, say) is not outbid sweep after
                        // sweep up to the cap.
                        Rejection::Underpriced(why) if !self.raised.due(id, stuck_after) => {
                            self.note_once(
                                &open,
                                format!(
                                    "the node refused it as underpriced ({why}); the fee is raised again {} s after the last raise",
                                    self.config.stuck_after_secs
                                ),
                            )
                            .await?;
                        }
                        Rejection::Underpriced(_) => {
                            self.replace(&wallet, &open, &client).await?;
                        }
                        Rejection::InsufficientFunds(why) => {
                            self.refused(&chain, &wallet, &client, &open, &why, true)
                                .await?;
                        }
                        Rejection::Other(why) => {
                            self.refused(&chain, &wallet, &client, &open, &why, false)
                                .await?;
                        }
                    }
                }
            }
            if !retaken {
                return Ok(None);
            }
        }
        // The node holds it: any run of refusals has ended.
        self.refused_since.clear(id);
        if open
            .last_broadcast_at
            .is_some_and(|at| Utc::now() - at >= stuck_after)
            && let Some(wallet) = self.signable(&open).await
        {
            // Queued behind a nonce nothing holds, a higher fee would not help.
            if !self
                .gap_filled_below(&chain, &wallet, &client, &open, from, nonce)
                .await?
            {
                self.replace(&wallet, &open, &client).await?;
            }
        }
        Ok(None)
    }

    /// Fills the lowest nonce below `nonce`, that of `open` (sent from `from`), that the
    /// node has nothing pending at, when no open record holds it (one nonce a sweep; the
    /// filler then counts as pending). Whether there is such a gap, filled now or held by a
    /// record of ours.
    async fn gap_filled_below(
        &self,
        chain: &crate::chains::Chain,
        wallet: &crate::wallets::DelegatedWallet,
        client: &crate::chains::evm::EvmClient,
        open: &OpenTransaction,
        from: alloy::primitives::Address,
        nonce: u64,
    ) -> Result<bool> {
        let pending = client.pending_nonce(from).await?;
        if pending >= nonce {
            return Ok(false);
        }
        if self
            .evm
            .fill_gap(chain, wallet, client, open, pending)
            .await?
        {
            tracing::warn!(id = %open.id, gap = pending, "filled a nonce gap below a stuck transaction");
        }
        Ok(true)
    }

    /// The wallet of `open`, for the steps that sign (a re-signing, a replacement, a nonce
    /// filler); `None` when it can no longer be signed for (its delegation was revoked, say),
    /// which the record's history then says, so that it does not wait without a reason.
    /// Sending the stored bytes again needs no key, so a lost transaction is still rebroadcast
    /// and a mined one still settled.
    async fn signable(&self, open: &OpenTransaction) -> Option<crate::wallets::DelegatedWallet> {
        match self.wallets.delegated_by_id(open.wallet_id).await {
            Ok(w) => Some(w),
            Err(e) => {
                tracing::warn!(id = %open.id, error = %e, "cannot sign for the transaction's wallet");
                if let WalletOpsError::WalletNotDelegated(why) = e {
                    let note = format!("waiting: it needs signing again, and {why}");
                    if let Err(e) = self.note_once(open, note).await {
                        tracing::warn!(id = %open.id, error = %e, "noting why a transaction waits failed");
                    }
                }
                None
            }
        }
    }

    /// Follows a Solana transfer: settled from its signatures' statuses; never seen and its
    /// blockhash expired (and only then), re-signed with a new one, or ended when a send of
    /// it was refused, it has had its last version, or its wallet can no longer be signed
    /// for; otherwise sent again, which a node that has it ignores.
    async fn follow_solana(
        &self,
        chain: &crate::chains::Chain,
        open: OpenTransaction,
    ) -> Result<Option<Settlement>> {
        let client = self.solana.client(chain);
        let signatures = crate::transfers::solana::signatures(&open)?;
        // The height is read before the statuses: a signature processed before this read
        // shows in the statuses read after it, if they come from a node as far along (a
        // load balancer may ask another, lagging one).
        let (height, height_slot) = client.block_height().await?;
        let (statuses_slot, states) = client.statuses(&signatures).await?;
        for (hash, state) in open.hashes.iter().zip(&states) {
            let (status, error) = match state {
                SignatureState::Succeeded => (TxStatus::Confirmed, None),
                SignatureState::Failed(e) => (TxStatus::Reverted, Some(e.clone())),
                SignatureState::Processed => return Ok(None),
                SignatureState::Unseen => continue,
            };
            return Ok(Some(Settlement {
                hash: hash.clone(),
                open,
                status,
                error,
                note: None,
            }));
        }
        let expired = open.valid_until.is_some_and(|valid| height > valid);
        if expired && statuses_slot < height_slot {
            // Unseen by a node behind the one that saw the expiry: no verdict yet.
            return Ok(None);
        }
        if expired {
            // Unseen, and it can never land as signed: it ends or is signed again.
            let ending = if self.refused_since.marked(open.id) {
                Some((
                    TxStatus::Failed,
                    "the node refused the transfer (its history says why), and its blockhash expired unseen".to_owned(),
                ))
            } else if open.hashes.len() >= SOLANA_MAX_VERSIONS {
                Some((
                    TxStatus::Dropped,
                    format!(
                        "none of its {} signed versions was seen by the cluster before its blockhash expired",
                        open.hashes.len()
                    ),
                ))
            } else {
                match self.wallets.delegated_by_id(open.wallet_id).await {
                    Ok(wallet) => {
                        self.solana
                            .resign_with_new_blockhash(
                                &wallet,
                                &client,
                                &open,
                                "its blockhash expired unseen",
                            )
                            .await?;
                        self.send_solana(&client, open.id).await?;
                        None
                    }
                    // Kept open, it would be signed and paid once the wallet is delegated
                    // again, however late: the caller may have paid another way meanwhile.
                    Err(WalletOpsError::WalletNotDelegated(why)) => Some((
                        TxStatus::Dropped,
                        format!(
                            "its blockhash expired unseen, and it cannot be signed again: {why}"
                        ),
                    )),
                    Err(e) => return Err(e),
                }
            };
            if let Some((status, why)) = ending {
                self.refused_since.clear(open.id);
                self.solana.fail(&open, status, &why, None).await?;
            }
            return Ok(None);
        }
        let resend_after = chrono::Duration::seconds(2);
        if open
            .last_broadcast_at
            .is_none_or(|at| Utc::now() - at >= resend_after)
        {
            self.send_solana(&client, open.id).await?;
        }
        Ok(None)
    }

    /// Sends the current payload of Solana record `id`.
    async fn send_solana(
        &self,
        client: &crate::chains::solana::SolanaClient,
        id: Uuid,
    ) -> Result<()> {
        let Some(open) = self.store.open_transaction(id).await? else {
            return Ok(());
        };
        let tx = crate::transfers::solana::decode(&open.signed_payload)?;
        match client.send(&tx).await {
            SendOutcome::Accepted => self.sent(id).await,
            // Unknown blockhash: handled once the height passes its validity.
            SendOutcome::BlockhashExpired | SendOutcome::Unknown(_) => Ok(()),
            // A send the node holds was refused as a duplicate, whatever its words.
            SendOutcome::Rejected { why, .. }
                if crate::transfers::solana::held_by_node(client, &open).await? =>
            {
                tracing::warn!(%id, %why, "the node refused a transfer it holds; taken as sent");
                self.sent(id).await
            }
            // An earlier send may still land: one a node took before, or one whose answer
            // never came (forwarded all the same), and a node behind the others refuses
            // what they take. Only the blockhash's expiry, unseen, says it never will: the
            // record ends FAILED then, not before.
            SendOutcome::Rejected { why, .. } => {
                tracing::warn!(%id, %why, "the node refused a send; waiting for the blockhash to expire");
                self.refused_since.first(id);
                self.note_once(
                    &open,
                    format!(
                        "the node refused it ({why}); it ends FAILED if its blockhash expires unseen"
                    ),
                )
                .await
            }
        }
    }

    /// Handles the node's definite refusal (`why`) of the current version of `open`. A node
    /// that holds that very version refused a duplicate, whatever its words: the record
    /// counts as sent. An earlier version the node holds can still be mined: the record waits
    /// for it. A nonce filler, and a record some version of which a node took before, stay
    /// open and are raised in fee once a stuck time, unless the wallet cannot pay
    /// (`insufficient`): a filler then waits for funds, noted in its history. A record no
    /// node took ends FAILED, its nonce freed (or filled, when later ones are out); one a
    /// node took ends DROPPED, its nonce filled, once the wallet cannot pay for it or it has
    /// been refused for `REFUSED_STUCK_TIMES` stuck times.
    async fn refused(
        &self,
        chain: &crate::chains::Chain,
        wallet: &crate::wallets::DelegatedWallet,
        client: &crate::chains::evm::EvmClient,
        open: &OpenTransaction,
        why: &str,
        insufficient: bool,
    ) -> Result<()> {
        let id = open.id;
        if let Some(current) = open.hashes.last()
            && client.knows(hash_of(current)?).await?
        {
            tracing::warn!(%id, %why, "the node refused a transaction it holds; taken as sent");
            if open.last_broadcast_at.is_some() {
                return Ok(());
            }
            return self.store.record_broadcasts(&[id], Utc::now()).await;
        }
        for earlier in open.hashes.iter().rev().skip(1) {
            if client.knows(hash_of(earlier)?).await? {
                tracing::warn!(%id, %earlier, %why, "the node refused a replacement; the earlier version is still pending");
                let note =
                    format!("the node refused the replacement ({why}); {earlier} is still pending");
                return self.note_once(open, note).await;
            }
        }
        let filler = open.kind == TxKind::NonceFill;
        if filler && insufficient {
            tracing::warn!(%id, %why, "the wallet cannot pay for a nonce filler");
            let note = format!("the node refused the filler ({why}); waiting for funds");
            return self.note_once(open, note).await;
        }
        let accepted = open.last_broadcast_at.is_some() || open.hashes.len() > 1;
        let stuck_after = self.stuck_after();
        // Not for ever: a record refused every time for this long is taken as gone.
        let refused_long =
            Utc::now() - self.refused_since.first(id) >= stuck_after * REFUSED_STUCK_TIMES;
        if filler || (accepted && !insufficient && !refused_long) {
            // A filler must fill its nonce. A transaction a node took before may still sit
            // in other nodes' pools and be mined: ending it would give back or fill a nonce
            // it holds, and its record would say DROPPED of a payment that is made. Both are
            // sent again each sweep and raised in fee at most once a stuck time (a filler at
            // once), so a refusal for the fee (a base fee risen over it) ends, and a passing
            // one (a full pool) does not cost a raise each second.
            let stuck = filler
                || open
                    .last_broadcast_at
                    .is_none_or(|at| Utc::now() - at >= stuck_after);
            if stuck && self.raised.due(id, stuck_after) {
                tracing::warn!(%id, %why, "the node refused a transaction; raising its fee");
                return self.replace(wallet, open, client).await;
            }
            let note = format!(
                "the node refused it ({why}); it is sent again each sweep and raised in fee at most once every {} s",
                self.config.stuck_after_secs
            );
            return self.note_once(open, note).await;
        }
        // Never taken by a node, taken but beyond the wallet's funds now, or refused every
        // time for `REFUSED_STUCK_TIMES` stuck times: taken as gone. The nonce of one no node
        // took is given back (or filled, when later ones are out); that of one a node took
        // is filled, never given to the next payment: funded again, or in another pool, it
        // could still be mined.
        self.refused_since.clear(id);
        let (status, ending) = if accepted {
            (TxStatus::Dropped, Ending::MaybeHeld)
        } else {
            (TxStatus::Failed, Ending::Found)
        };
        self.evm
            .fail_and_free_nonce(
                chain,
                wallet,
                client,
                open,
                status,
                &format!("the node refused the transaction: {why}"),
                ending,
            )
            .await?;
        Ok(())
    }

    /// How long an unmined transaction waits before it counts as stuck.
    fn stuck_after(&self) -> chrono::Duration {
        chrono::Duration::seconds(self.config.stuck_after_secs as i64)
    }

    /// Notes in the history of `open` that its node gives no verdict (it does not answer, or
    /// answers with errors that say nothing of the transaction), once that has lasted since
    /// `since` for as long as a transaction takes to count as stuck: it says why it is still
    /// open.
    async fn no_verdict(&self, open: &OpenTransaction, since: DateTime<Utc>) -> Result<()> {
        let stuck_after = self.stuck_after();
        if Utc::now() - since >= stuck_after {
            self.note_once(open, NO_VERDICT_NOTE.to_owned()).await?;
        }
        Ok(())
    }

    /// Adds `note` to the history of `open`, status unchanged, unless it is the last note
    /// already: a record waiting on something says so once, not once a sweep.
    async fn note_once(&self, open: &OpenTransaction, note: String) -> Result<()> {
        let last_note = open
            .history
            .as_array()
            .and_then(|h| h.last())
            .and_then(|c| c["note"].as_str());
        if last_note != Some(note.as_str()) {
            self.mark(open, open.status, note).await?;
        }
        Ok(())
    }

    /// Moves `open` to `status` with `note` in its history (nothing, when another worker
    /// changed the record meanwhile).
    async fn mark(&self, open: &OpenTransaction, status: TxStatus, note: String) -> Result<()> {
        let txn = self.store.begin().await?;
        self.store
            .settle_transaction(&txn, open, status, None, Some(note), None)
            .await?;
        txn.commit().await?;
        Ok(())
    }

    /// Replaces `open` with a higher fee, or marks it FEE_CAPPED when the cap forbids it.
    async fn replace(
        &self,
        wallet: &crate::wallets::DelegatedWallet,
        open: &OpenTransaction,
        client: &crate::chains::evm::EvmClient,
    ) -> Result<()> {
        let old = decode_payload(&open.signed_payload)?;
        let old_fees = Fees {
            max_fee_per_gas: old.max_fee_per_gas,
            max_priority_fee_per_gas: old.max_priority_fee_per_gas,
        };
        let now = client.fees().await?;
        let bump = u128::from(self.config.fee_bump_percent);
        let cap = self.config.max_fee_per_gas_wei();
        let Some(fees) = replacement_fees(old_fees, now, bump, cap) else {
            let needed = raise(old.max_fee_per_gas, MIN_BUMP_PERCENT);
            if open.status != TxStatus::FeeCapped {
                self.mark(
                    open,
                    TxStatus::FeeCapped,
                    format!(
                        "stuck; a replacement needs maxFeePerGas {needed} wei, above the cap of {cap} wei"
                    ),
                )
                .await?;
            }
            return Ok(());
        };
        self.evm
            .replace_with_fees(
                wallet,
                open,
                fees,
                TxStatus::Submitted,
                format!(
                    "replaced: maxFeePerGas {} -> {} wei",
                    old.max_fee_per_gas, fees.max_fee_per_gas
                ),
            )
            .await?;
        self.send_current(client, open.id).await
    }

    /// Re-signs `open` with a new nonce, its own being used on chain, and sends it. Nothing
    /// happens when the node holds one of the record's own versions: that is what used the
    /// nonce, and the next sweep reads its receipt. Nor, noted in its history, until the
    /// block that used the nonce is the chain's `confirmations` deep.
    async fn resign_and_send(
        &self,
        chain: &crate::chains::Chain,
        wallet: Option<&crate::wallets::DelegatedWallet>,
        client: &crate::chains::evm::EvmClient,
        open: &OpenTransaction,
        why: &str,
    ) -> Result<()> {
        // Behind a load balancer, one call can reach a node a block behind (no receipt, no
        // transaction: ours looks lost) and the next one a node ahead (the nonce used): a new
        // nonce then pays twice. The sight must last a few sweeps first.
        let grace = chrono::Duration::milliseconds(
            (3 * self.config.poll_interval_ms).max(self.config.resign_after_secs * 1000) as i64,
        );
        if Utc::now() - self.taken.first(open.id) < grace {
            // Looked up on each sweep of the grace (and of the wait for depth below), not only
            // once the record has moved to a new nonce: one failed lookup then would leave a
            // mined payment FAILED for good.
            self.settle_ended_at_nonce(chain, client, open).await?;
            let nonce = open.nonce.unwrap_or_default();
            return self
                .note_once(
                    open,
                    format!(
                        "nonce {nonce} is used on chain and no version of it is found; checked again for {} ms before anything else is signed",
                        grace.num_milliseconds()
                    ),
                )
                .await;
        }
        let needed = chain.confirmations();
        let resigned = self
            .evm
            .resign_with_new_nonce(chain, wallet, client, open, why, needed)
            .await?;
        if resigned != Resign::Shallow {
            self.taken.clear(open.id);
        }
        match resigned {
            Resign::Resigned => {
                // The payment first: a correction that fails on the node must not hold it.
                let sent = self.send_current(client, open.id).await;
                self.settle_ended_at_nonce(chain, client, open).await?;
                sent
            }
            Resign::Shallow => {
                // The ended records' versions too may turn deep enough while this one waits.
                self.settle_ended_at_nonce(chain, client, open).await?;
                let nonce = open.nonce.unwrap_or_default();
                self.note_once(
                    open,
                    format!(
                        "nonce {nonce} is taken by another transaction; waiting until that is mined {needed} blocks deep"
                    ),
                )
                .await
            }
            Resign::Unneeded => {
                let nonce = open.nonce.unwrap_or_default();
                self.settle_ended_at_nonce(chain, client, open).await?;
                self.mark(
                    open,
                    TxStatus::Dropped,
                    format!("nonce {nonce} was used by another transaction; no filler needed"),
                )
                .await
            }
            Resign::HeldByRecord | Resign::NonceFree | Resign::Due => Ok(()),
        }
    }

    /// Settles a record ended DROPPED (taken as gone) or FAILED at the nonce of `open`, whose
    /// nonce went to another transaction, when that transaction is one of the ended record's
    /// own versions after all: the record a nonce filler was made for, which a node that
    /// held it mined, or one refused for sure whose nonce was given back and reused, which
    /// another node behind the same gateway mined. A caller reading either would pay again.
    async fn settle_ended_at_nonce(
        &self,
        chain: &crate::chains::Chain,
        client: &crate::chains::evm::EvmClient,
        open: &OpenTransaction,
    ) -> Result<()> {
        for ended in self.store.ended_records_at_nonce(open).await? {
            for hash in ended.hashes.iter().rev() {
                let Some(receipt) = client.receipt(hash_of(hash)?).await? else {
                    continue;
                };
                // Final only once deep enough: looked up again at a later sweep (of the
                // re-sign grace, or of the wait for the taker's depth).
                let block = receipt.block_number.unwrap_or_default();
                if !deep_enough(chain, client, block).await? {
                    return Ok(());
                }
                let (status, error) = outcome_of(&receipt);
                let was = if ended.status == TxStatus::Failed {
                    // Its caller was told it failed, and may have paid again.
                    tracing::error!(id = %ended.id, %hash, "a transaction ended FAILED was mined after all");
                    "FAILED"
                } else {
                    tracing::warn!(id = %ended.id, %hash, "a transaction taken as dropped was mined after all");
                    "DROPPED"
                };
                let note = format!(
                    "mined after all, in block {block} ({:#x}), after it had ended {was}",
                    receipt.block_hash.unwrap_or_default()
                );
                self.store
                    .settle_ended(&ended, status, error, note, hash)
                    .await?;
                // One transaction can use the nonce.
                return Ok(());
            }
        }
        Ok(())
    }

    /// Sends the current payload of `id` right after it was re-signed, so the new version
    /// does not wait for the next sweep. A failure here is retried by that sweep.
    async fn send_current(&self, client: &crate::chains::evm::EvmClient, id: Uuid) -> Result<()> {
        let Some(open) = self.store.open_transaction(id).await? else {
            return Ok(());
        };
        if let BroadcastOutcome::Accepted = client.broadcast(&open.signed_payload).await {
            self.sent(id).await?;
        }
        Ok(())
    }

    /// Notes that a node took the current version of record `id` just now: any run of
    /// refusals has ended.
    async fn sent(&self, id: Uuid) -> Result<()> {
        self.refused_since.clear(id);
        self.store.record_broadcasts(&[id], Utc::now()).await
    }
}

/// The smallest raise of both fees that nodes accept for a replacement (geth's price bump).
const MIN_BUMP_PERCENT: u128 = 10;

/// `v` raised by `percent`, rounded up.
fn raise(v: u128, percent: u128) -> u128 {
    v.saturating_mul(100 + percent).div_ceil(100)
}

/// The fees of a replacement for a transaction paying `old`: both raised by `bump_percent`
/// (at least 10 %) and at least the current `now`; when that passes `cap` (max fee per
/// gas), the cap itself as long as it still is a 10 % raise. `None`: no replacement fits
/// under the cap.
fn replacement_fees(old: Fees, now: Fees, bump_percent: u128, cap: u128) -> Option<Fees> {
    let bump = bump_percent.max(MIN_BUMP_PERCENT);
    let wanted = raise(old.max_fee_per_gas, bump).max(now.max_fee_per_gas);
    let max_fee_per_gas = wanted.min(cap);
    let min_tip = raise(old.max_priority_fee_per_gas, MIN_BUMP_PERCENT);
    let tip = raise(old.max_priority_fee_per_gas, bump)
        .max(now.max_priority_fee_per_gas)
        .min(max_fee_per_gas);
    (max_fee_per_gas >= raise(old.max_fee_per_gas, MIN_BUMP_PERCENT) && tip >= min_tip).then_some(
        Fees {
            max_fee_per_gas,
            max_priority_fee_per_gas: tip,
        },
    )
}

/// Runs `work` to its end, calling `renew` every `period` meanwhile.
async fn while_renewing<T, R: Future<Output = ()>>(
    work: impl Future<Output = T>,
    period: Duration,
    mut renew: impl FnMut() -> R,
) -> T {
    tokio::pin!(work);
    let period = period.max(Duration::from_millis(1));
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            out = &mut work => return out,
            _ = tick.tick() => renew().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::sync::Notify;

    use super::*;

    #[tokio::test]
    async fn a_sweep_renews_its_leases_for_as_long_as_it_lasts() {
        let renewed = AtomicUsize::new(0);
        let notify = Notify::new();
        // The work ends only once it has seen three renewals: without them it never would.
        let work = async {
            while renewed.load(Ordering::SeqCst) < 3 {
                notify.notified().await;
            }
            "followed"
        };
        let out = tokio::time::timeout(
            Duration::from_secs(30),
            while_renewing(work, Duration::from_millis(5), || async {
                renewed.fetch_add(1, Ordering::SeqCst);
                notify.notify_one();
            }),
        )
        .await
        .expect("the leases were renewed while the work went on");
        assert_eq!(out, "followed");
        assert_eq!(renewed.load(Ordering::SeqCst), 3);
        // A sweep that ends before a third of its lease renews nothing.
        let quick = while_renewing(async { 7 }, Duration::from_secs(10), || async {
            renewed.fetch_add(1, Ordering::SeqCst);
        });
        assert_eq!(quick.await, 7);
        assert_eq!(renewed.load(Ordering::SeqCst), 3);
    }

    const GWEI: u128 = 1_000_000_000;

    fn fees(max: u128, tip: u128) -> Fees {
        Fees {
            max_fee_per_gas: max,
            max_priority_fee_per_gas: tip,
        }
    }

    #[test]
    fn a_replacement_raises_both_fees_by_the_bump_or_to_the_current_fees() {
        let old = fees(10 * GWEI, GWEI);
        assert_eq!(
            replacement_fees(old, fees(GWEI, GWEI / 10), 15, 500 * GWEI),
            Some(fees(11_500_000_000, 1_150_000_000))
        );
        assert_eq!(
            replacement_fees(old, fees(30 * GWEI, 2 * GWEI), 15, 500 * GWEI),
            Some(fees(30 * GWEI, 2 * GWEI))
        );
        // A bump below the nodes' minimum is raised to it.
        assert_eq!(
            replacement_fees(old, fees(GWEI, GWEI / 10), 1, 500 * GWEI),
            Some(fees(11 * GWEI, 1_100_000_000))
        );
    }

    #[test]
    fn the_cap_is_used_while_it_still_allows_a_valid_replacement() {
        let old = fees(10 * GWEI, GWEI);
        // 15 % would need 11.5 gwei; the cap of 11 gwei is still a 10 % raise.
        assert_eq!(
            replacement_fees(old, fees(GWEI, GWEI / 10), 15, 11 * GWEI),
            Some(fees(11 * GWEI, 1_150_000_000))
        );
        // Below a 10 % raise nothing fits.
        assert_eq!(
            replacement_fees(old, fees(GWEI, GWEI / 10), 15, 10_999_999_999),
            None
        );
        // A tip at the old maximum fee rises with it, to the cap.
        assert_eq!(
            replacement_fees(fees(10 * GWEI, 10 * GWEI), fees(GWEI, GWEI), 15, 11 * GWEI),
            Some(fees(11 * GWEI, 11 * GWEI))
        );
    }
}
