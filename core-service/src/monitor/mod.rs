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
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use chrono::{DateTime, Utc};
use futures::StreamExt;
use uuid::Uuid;

use crate::{
    Core,
    config::MonitorConfig,
    error::{Result, WalletOpsError},
    idempotency::Idempotency,
    recovery::{evm::EvmRecovery, solana::SolanaRecovery},
    runner::{self, Pace},
    wallets::Wallets,
};

use walletops_chains::{Registry, evm::EvmClients, solana::SolanaClients};
use walletops_domain::{Effects, OpenTransaction, TxStatus};
use walletops_store::Store;

mod bump;
mod evm;
mod executed;
mod landing;
mod marks;
mod quiet;
mod resign;
mod solana;
mod waiting;

use marks::{Counts, Horizons, Marks, Memory, Resends, Unmined};

/// The history note of a record whose sends the node keeps answering without a verdict.
const NO_VERDICT_NOTE: &str = "no verdict from the node yet (unreachable, or answering with errors that say nothing of the transaction); sent again after pauses that grow";

/// Records leased per sweep: most of a large backlog waits without a call of its own (see
/// `waiting`), so a sweep takes many.
const BATCH: u64 = 1000;
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
    /// What it did to the wallet, read from the chain; `None`: not read.
    landed: Option<Effects>,
    /// The fee it paid, where it may differ from what its write reserved (an EVM receipt's
    /// gas used at its price; a Solana transaction pays what it was priced at).
    fee: Option<alloy::primitives::U256>,
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
    evm: EvmRecovery,
    solana: SolanaRecovery,
    evm_clients: Arc<EvmClients>,
    solana_clients: Arc<SolanaClients>,
    idempotency: Idempotency,
    config: MonitorConfig,
    /// What it remembers of each record, one value per record; the fields below are views
    /// of its parts.
    memory: Memory,
    /// Since when the node has not answered about each record it last failed to answer
    /// about: a record says so once that lasts as long as a transaction takes to count as
    /// stuck, not at the first error.
    unanswered: Marks,
    /// When each record was last raised in fee because the node called it underpriced.
    raised: Marks,
    /// Since when each record's nonce has been seen used on chain while none of its own
    /// versions was found: it is signed with a new nonce only once that has lasted.
    taken: Marks,
    /// Since when every send of each record has been refused: on EVM of a record a node took
    /// before; on Solana of a record whose current version has not been seen.
    refused_since: Marks,
    /// Since when this core has failed to follow each record: once that lasts a lease, the
    /// core gives the record up after each failure, for a core that can follow it.
    failing: Marks,
    /// When the node last showed it holds each record's one hash: for `waiting::HELD_FOR`
    /// from then, the record's wallet nonces say enough of it.
    held: Marks,
    /// When this core last gave each record up: it leaves the record to the other cores for
    /// a lease. Taken back at its next sweep, a record whose follow fails slowly (a node
    /// that times out) would be free for a moment only, and rarely reach another core.
    gave_up: Marks,
    /// The head at which each record was last found unmined (see `quiet`).
    unmined: Unmined,
    /// The pauses between sends of each record's same bytes (see `quiet`).
    resends: Resends,
    /// How often each record's same bytes were sent again (see `landing`).
    resent: Counts,
}

impl Monitor {
    /// The monitor of `core`.
    pub fn new(core: &Core) -> Self {
        let memory = Memory::default();
        let marks::Parts {
            unanswered,
            raised,
            taken,
            refused_since,
            failing,
            held,
            gave_up,
            unmined,
            resends,
            resent,
        } = memory.parts();
        Self {
            owner: Uuid::now_v7(),
            store: core.store.clone(),
            chains: core.chains.clone(),
            wallets: core.wallets.clone(),
            evm: core.evm_recovery.clone(),
            solana: core.solana_recovery.clone(),
            // Clients of its own: the requests a sweep makes are counted apart from the
            // writes' (see `quiet::Budget`).
            evm_clients: Arc::new(core.evm_clients.apart()),
            solana_clients: core.solana_clients.clone(),
            idempotency: core.idempotency.clone(),
            config: core.config.monitor.clone(),
            unanswered,
            raised,
            taken,
            refused_since,
            failing,
            gave_up,
            held,
            unmined,
            resends,
            resent,
            memory,
        }
    }

    /// Sweeps until `stop` completes (a sweep under way is finished first), then gives up
    /// this core's leases.
    pub async fn run(self, stop: impl Future<Output = ()>) {
        let poll = Duration::from_millis(self.config.poll_interval_ms);
        let sweeps = std::sync::atomic::AtomicU64::new(0);
        // A node that answers slowly makes a sweep long: it is then asked less, not more.
        let pace = Pace::AtLeastRound(poll);
        let round = || async {
            let started = std::time::Instant::now();
            let swept = self.sweep().await;
            crate::metrics::swept(started.elapsed());
            let n = sweeps.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            if n.is_multiple_of(PURGE_EVERY)
                && let Err(e) = self.idempotency.purge().await
            {
                tracing::warn!(error = %e, "purging idempotency keys failed");
            }
            swept
        };
        runner::run("monitor", pace, stop, round, runner::never).await;
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
        let now = crate::clock::now();
        let lease = chrono::Duration::seconds(self.config.lease_secs as i64);
        self.memory.forget(self.horizons(now, lease));
        let leased = self
            .store
            .lease_open_transactions(self.owner, now, now + lease, BATCH, &self.gave_up.ids())
            .await?;
        // Another core followed these since this one last did: what this one remembers of
        // them would date a refusal, a taken nonce or a failing node from before that turn.
        for id in &leased.taken_over {
            self.memory.taken_over(*id);
        }
        let leased = leased.records;
        let ids: Vec<Uuid> = leased.iter().map(|open| open.id).collect();
        // Each record waits mostly on its node: several are followed at once, those that are
        // waiting as they should (see `waiting`) not at all.
        let follow_all = async {
            let budget = self.budget(&leased);
            let heads = self.heads(&budget).await;
            let (quiet, from_send) = self.unmoved(&leased, (&budget, &heads)).await;
            let moved: Vec<&OpenTransaction> = leased
                .iter()
                .filter(|open| !quiet.contains(&open.id) && !from_send.contains(&open.id))
                .collect();
            let waiting = self.waiting(&moved, &heads).await;
            let full = AtomicUsize::new(0);
            let (full_ref, budget) = (&full, &budget);
            let (heads, from_send) = (&heads, &from_send);
            let swept = leased.len();
            let followed = leased
                .into_iter()
                .filter(|open| !quiet.contains(&open.id) && !waiting.contains(&open.id))
                .filter(|open| budget.admits(&open.chain));
            let settled = futures::stream::iter(followed)
                .map(|open| {
                    full_ref.fetch_add(1, Ordering::Relaxed);
                    let head = heads.get(&open.chain).copied();
                    let unmoved = from_send.contains(&open.id);
                    self.follow_one(open, head, unmoved, lease)
                })
                .buffer_unordered(FOLLOWERS)
                .filter_map(std::future::ready)
                .collect::<Vec<Settlement>>()
                .await;
            let full = full.load(Ordering::Relaxed);
            (settled, (full, swept - full))
        };
        // A sweep slowed by its nodes past the lease (the wallets' nonces included) would let
        // another core follow the same records at once: the lease is renewed every third of
        // it while the sweep lasts.
        let (settled, counts) = while_renewing(
            follow_all,
            lease.to_std().unwrap_or_default() / 3,
            || async {
                if let Err(e) = self
                    .store
                    .renew_leases(self.owner, &ids, crate::clock::now() + lease)
                    .await
                {
                    tracing::warn!(error = %e, "renewing the monitor's leases failed");
                }
            },
        )
        .await;
        self.settle(settled).await?;
        // Counted as the sweep ends, beside its duration (`run`): a scrape between the two
        // would see a sweep's records without the sweep.
        crate::metrics::records_swept(counts.0, counts.1);
        Ok(())
    }

    /// Follows `open` one step (`follow`): its final state, if the chain shows one. A
    /// failure is noted where a signer outside the process is the cause, and a record this
    /// core keeps failing to follow is given up to the other cores.
    async fn follow_one(
        &self,
        open: OpenTransaction,
        head: Option<u64>,
        unmoved: bool,
        lease: chrono::Duration,
    ) -> Option<Settlement> {
        let id = open.id;
        match self.follow(open, head, unmoved).await {
            Ok(settled) => {
                self.failing.clear(id);
                settled
            }
            Err(e) => {
                tracing::warn!(%id, error = %e, "following a transaction failed");
                if let Some(signer) = signer_down(&e) {
                    self.note_signer_down(id, signer, &e).await;
                }
                self.give_up_if_failing(id, lease).await;
                None
            }
        }
    }

    /// How far back the sweep that begins at `now` remembers. Forgotten by age, not by the
    /// records leased now: a record can skip sweeps (leased by another core for a while,
    /// say) and must keep its marks meanwhile.
    fn horizons(&self, now: DateTime<Utc>, lease: chrono::Duration) -> Horizons {
        Horizons {
            gave_up: now - lease,
            held: now - chrono::Duration::seconds(self.config.held_check_secs as i64),
            rest: now - chrono::Duration::seconds(10 * self.config.stuck_after_secs.max(60) as i64),
        }
    }

    /// Writes the final states `settled` of a sweep: the records, what their fees and moves
    /// charge their keys' budgets, and their events.
    async fn settle(&self, settled: Vec<Settlement>) -> Result<()> {
        // The final states of the sweep are written in one database transaction; when it
        // fails, the records are still open and leased to this core, and the next sweep
        // finds the same receipts.
        if settled.is_empty() {
            return Ok(());
        }
        let txn = self.store.begin().await?;
        let mut changed = Vec::new();
        let mut differed = Vec::new();
        for s in settled {
            let id = s.open.id;
            // A write that failed on chain moved nothing, and its status says so: only a
            // confirmed one is compared. An EVM receipt shows no coin received through an
            // internal call (a token sold for ETH), so native inflows are left out there.
            let difference = s.landed.as_ref().and_then(|landed| {
                if s.status != TxStatus::Confirmed {
                    return None;
                }
                let stored = s.open.simulated_effects.as_deref()?;
                let simulated: Effects = serde_json::from_str(stored).ok()?;
                simulated.difference(landed, s.open.from.evm().is_none())
            });
            let settled = match &s.landed {
                Some(landed) => {
                    let change = (s.status, s.error, s.note);
                    let difference = difference.clone();
                    self.store
                        .settle_with_effects(&txn, &s.open, change, &s.hash, landed, difference)
                        .await?
                }
                None => {
                    self.store
                        .settle_transaction(&txn, &s.open, s.status, s.error, s.note, Some(&s.hash))
                        .await?
                }
            };
            if settled {
                // A fee budget holds what the write paid, not its most.
                if let Some(fee) = s.fee {
                    self.store
                        .settle_reserved_fee(&txn, id, walletops_domain::FEES_ASSET, fee)
                        .await?;
                }
                if let Some(landed) = s
                    .landed
                    .as_ref()
                    .filter(|_| s.status == TxStatus::Confirmed)
                {
                    self.hold_to_reservation(&txn, &s.open, landed).await?;
                }
                if let Some(what) = &difference {
                    tracing::warn!(%id, %what, "a transaction did otherwise than simulated");
                    differed.push((s.open.chain.clone(), s.open.kind));
                }
                changed.push((s.open, s.status));
            } else {
                tracing::debug!(%id, "changed by another worker before it was settled");
            }
        }
        txn.commit().await?;
        for (open, status) in &changed {
            crate::metrics::settled(open, *status);
            self.report_end(open, *status);
        }
        for (chain, kind) in &differed {
            crate::metrics::effects_differed(chain, *kind);
        }
        Ok(())
    }

    /// Gives up the lease on record `id` once this core has failed to follow it for a
    /// lease: renewed each sweep, the lease would otherwise never run out, and a core whose
    /// node is down (or that lacks the record's chain) would hold the record, and every later
    /// nonce of its wallet, from the cores that can follow it.
    async fn give_up_if_failing(&self, id: Uuid, lease: chrono::Duration) {
        if crate::clock::now() - self.failing.first(id) < lease {
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

    /// Notes in record `id`'s history that it waits for `signer` (the wallet provider or the
    /// HSM), which failed to sign its next version with `e`: the monitor tries again each
    /// sweep.
    async fn note_signer_down(&self, id: Uuid, signer: &str, e: &WalletOpsError) {
        let noted = async {
            if let Some(open) = self.store.open_transaction(id).await? {
                self.note_once(&open, format!("waiting for {signer}: {e}"))
                    .await?;
            }
            Ok::<_, WalletOpsError>(())
        };
        if let Err(e) = noted.await {
            tracing::warn!(%id, error = %e, "noting why a transaction waits failed");
        }
    }

    /// The wallet of `open`, for the steps that sign (a re-signing, a replacement, a nonce
    /// filler); `None` when it can no longer be signed for (its delegation was revoked, say),
    /// which the record's history then says, so that it does not wait without a reason.
    /// Sending the stored bytes again needs no key, so a lost transaction is still rebroadcast
    /// and a mined one still settled.
    async fn signable(&self, open: &OpenTransaction) -> Option<walletops_domain::DelegatedWallet> {
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
        if crate::clock::now() - since >= stuck_after {
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
        let changed = self
            .store
            .settle_transaction(&txn, open, status, None, Some(note), None)
            .await?;
        txn.commit().await?;
        if changed {
            crate::metrics::settled(open, status);
            if status.is_final() {
                self.report_end(open, status);
            }
        }
        Ok(())
    }

    /// Notes that a node took the current version of record `id` just now: any run of
    /// refusals has ended.
    async fn sent(&self, id: Uuid) -> Result<()> {
        self.refused_since.clear(id);
        Ok(self
            .store
            .record_broadcasts(&[id], crate::clock::now())
            .await?)
    }
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

/// Which signer outside the process a failed re-signing waits for, if `e` says one failed
/// for the moment (`is_transient`, the one rule of "try again later"). A record is never
/// ended by a failure to follow it (its transaction may be on chain): every failure is
/// tried again next sweep, and only a signer's outage is worth a line in its history.
fn signer_down(e: &WalletOpsError) -> Option<&'static str> {
    if !e.is_transient() {
        return None;
    }
    match e {
        WalletOpsError::WalletProviderError(_) => Some("the wallet provider"),
        WalletOpsError::HsmUnavailable(_) => Some("the HSM"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::sync::Notify;

    use super::*;

    #[test]
    fn only_a_signer_out_for_the_moment_is_waited_for_by_name() {
        let hsm = WalletOpsError::HsmUnavailable("token removed".to_owned());
        let provider = WalletOpsError::WalletProviderError("timed out".to_owned());
        assert_eq!(signer_down(&hsm), Some("the HSM"));
        assert_eq!(signer_down(&provider), Some("the wallet provider"));
        assert!(hsm.is_transient() && provider.is_transient());
        let node = WalletOpsError::ProviderRpcError("refused".to_owned());
        assert_eq!(signer_down(&node), None);
        let lasting = WalletOpsError::SendFailed("would fail".to_owned());
        assert!(!lasting.is_transient());
        assert_eq!(signer_down(&lasting), None);
    }

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
}
