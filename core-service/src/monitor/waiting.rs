//! Which leased EVM records are waiting as they should, and need no call of their own in
//! this sweep.
//!
//! Followed one by one, an unmined record costs its node three calls a sweep (a receipt, the
//! mined nonce, whether the node holds it), so a backlog of thousands cost thousands of calls
//! a second. Its wallet's two nonces say most of it for all of its records at once: a record
//! whose nonce is not mined yet (at or above the mined count) while the node's pool holds
//! something at it (below the pending count), sent and not stuck yet, has nothing to be done,
//! as long as what the pool holds at its nonce is the record's own transaction. That is
//! asked of the node (by hash) once every `monitor.held_check_secs` (30 s): another transaction
//! at the nonce (the wallet's owner's, priced higher) is found within that. A waiting record
//! is noted unmined at the head read this sweep (see `quiet`). The calls of all wallets and
//! records go out together (the RPC client batches calls that queue, see
//! `chains::rpc_batch`), so a sweep of a thousand records of a hundred wallets costs a few
//! requests.
//!
//! Anything else is followed in full, as before: a record mined or whose nonce was taken,
//! lost by the node, stuck, with several hashes (an earlier one, of another nonce, may have
//! been mined), marked by an earlier sweep (no verdict, refusals, a taken nonce), or of a
//! wallet whose nonces could not be read.

use std::collections::{HashMap, HashSet};

use alloy::primitives::{Address, B256};
use uuid::Uuid;

use super::Monitor;
use crate::recovery::evm::sender;
use walletops_domain::{ChainFamily, OpenTransaction};

/// A record that may be waiting: its id, nonce and one hash.
type Candidate = (Uuid, u64, B256);

impl Monitor {
    /// The ids of the records of `leased` that are waiting as they should (see the module
    /// docs), each noted unmined at its chain's head of `heads`. The node's word that it holds
    /// a record is trusted for `monitor.held_check_secs` (half the default stuck time, longer
    /// than a backlog of 10,000 takes to come round again at 1,000 records a sweep), so most
    /// visits of a record cost nothing of its own.
    pub(super) async fn waiting(
        &self,
        leased: &[&OpenTransaction],
        heads: &HashMap<String, u64>,
    ) -> HashSet<Uuid> {
        let reads = self
            .candidates(leased)
            .into_iter()
            .map(|((slug, from), records)| self.held_of(slug, from, records));
        let waiting: HashSet<Uuid> = futures::future::join_all(reads)
            .await
            .into_iter()
            .flatten()
            .collect();
        for open in leased {
            if waiting.contains(&open.id)
                && let Some(head) = heads.get(&open.chain)
            {
                self.unmined.found_at(open.id, *head);
            }
        }
        waiting
    }

    /// The records of `leased` that may be waiting as they should, by chain and wallet: sent
    /// once, not yet stuck, with no unanswered question, taken nonce or refusal.
    fn candidates<'a>(
        &self,
        leased: &[&'a OpenTransaction],
    ) -> HashMap<(&'a str, Address), Vec<Candidate>> {
        let now = crate::clock::now();
        let stuck_after = self.stuck_after();
        let mut wallets: HashMap<(&str, Address), Vec<Candidate>> = HashMap::new();
        for &open in leased {
            let id = open.id;
            let (Some(nonce), Some(sent), [hash]) =
                (open.nonce, open.last_broadcast_at, open.hashes.as_slice())
            else {
                continue;
            };
            let evm = self
                .chains
                .resolve(&open.chain)
                .is_ok_and(|chain| chain.family() == ChainFamily::Evm);
            if !evm
                || now - sent >= stuck_after
                || [&self.unanswered, &self.taken, &self.refused_since]
                    .iter()
                    .any(|marks| marks.marked(id))
            {
                continue;
            }
            let (Ok(from), Ok(hash)) = (sender(open), super::evm::hash_of(hash)) else {
                continue;
            };
            wallets
                .entry((open.chain.as_str(), from))
                .or_default()
                .push((id, nonce, hash));
        }
        wallets
    }

    /// Which of wallet `from`'s `records` on chain `slug` the node holds in its pool, at a
    /// nonce between the wallet's mined and pending ones: asked of the node at most once a
    /// `monitor.held_check_secs` per record.
    async fn held_of(&self, slug: &str, from: Address, records: Vec<Candidate>) -> Vec<Uuid> {
        let held_for = chrono::Duration::seconds(self.config.held_check_secs as i64);
        let Some(client) = self
            .chains
            .resolve(slug)
            .ok()
            .and_then(|chain| self.evm_clients.get(chain).ok())
        else {
            return Vec::new();
        };
        let (mined, pending) =
            tokio::join!(client.mined_nonce(from, 1), client.pending_nonce(from));
        let (Ok(mined), Ok(pending)) = (mined, pending) else {
            return Vec::new();
        };
        let pooled = records
            .into_iter()
            .filter(|(_, nonce, _)| mined <= *nonce && *nonce < pending);
        let held = pooled.map(|(id, _, hash)| {
            let client = client.clone();
            async move {
                if self.held.within(id, held_for) {
                    return Some(id);
                }
                let known = client.knows(hash).await.ok()?;
                known.then(|| {
                    self.held.set(id);
                    id
                })
            }
        });
        futures::future::join_all(held)
            .await
            .into_iter()
            .flatten()
            .collect()
    }
}
