//! A stalled or congested node is not flooded.
//!
//! Each sweep reads every EVM chain's head once. A record found unmined, its nonce unused, at
//! the head the chain still shows (`marks::Unmined`) cannot have been included since: it is
//! asked no receipt and no nonce. If it is sent and not stuck, and no earlier sweep marked
//! it (no verdict on a send, refusals, a nonce taken), the node is asked whether it still
//! holds it at most once every `monitor.held_check_secs`, and nothing else; otherwise it is
//! followed from its send on (`follow`'s `unmoved`), where a lost one is sent again after
//! pauses that double up to `monitor.rebroadcast_max_secs`.
//!
//! Whatever is left to follow in full is rationed per chain (`Budget`): once the monitor's
//! own client of the chain has made one HTTP request per `RECORDS_PER_REQUEST` records
//! leased (at least `LEAST_REQUESTS`) in a sweep, no further record is followed in full in
//! that sweep beyond the first `LEAST_FOLLOWS`; the rest keep their turn in the rotation of
//! leases. A node that answers slowly makes each sweep longer, and the pause after a sweep is
//! at least as long as the sweep itself: it is asked less.

use std::{
    collections::{HashMap, HashSet},
    sync::atomic::{AtomicUsize, Ordering},
};

use uuid::Uuid;

use super::Monitor;
use walletops_chains::evm::EvmClient;
use walletops_domain::{ChainFamily, OpenTransaction};

/// Records leased per node request a sweep may make.
const RECORDS_PER_REQUEST: u64 = 50;
/// Node requests a sweep may make of a chain however few its records.
const LEAST_REQUESTS: u64 = 20;
/// Records of a chain followed in full each sweep whatever the requests so far: the sweep
/// always moves on.
const LEAST_FOLLOWS: usize = 4;

/// The node requests each chain's records may still cost in one sweep.
#[derive(Debug, Default)]
pub(super) struct Budget {
    chains: HashMap<String, Allowance>,
}

#[derive(Debug)]
struct Allowance {
    client: EvmClient,
    /// The client's request count when the sweep began.
    start: u64,
    allowed: u64,
    follows: AtomicUsize,
}

impl Budget {
    /// The monitor's client of EVM chain `slug`, found once for the sweep.
    fn client(&self, slug: &str) -> Option<&EvmClient> {
        self.chains.get(slug).map(|a| &a.client)
    }

    /// Whether a record of chain `slug` may be followed in full now (see the module docs).
    /// Records of chains without a budget (Solana) always may.
    pub(super) fn admits(&self, slug: &str) -> bool {
        let Some(a) = self.chains.get(slug) else {
            return true;
        };
        let spent = a.client.requests_made().saturating_sub(a.start);
        a.follows.fetch_add(1, Ordering::Relaxed) < LEAST_FOLLOWS || spent < a.allowed
    }
}

impl Monitor {
    /// The budget of the sweep of `leased`, set before it asks anything.
    pub(super) fn budget(&self, leased: &[OpenTransaction]) -> Budget {
        let mut counts: HashMap<&str, u64> = HashMap::new();
        for open in leased {
            *counts.entry(open.chain.as_str()).or_default() += 1;
        }
        let chains = counts
            .into_iter()
            .filter_map(|(slug, records)| {
                let chain = self.chains.resolve(slug).ok()?;
                if chain.family() != ChainFamily::Evm {
                    return None;
                }
                let client = self.evm_clients.get(chain).ok()?;
                let allowance = Allowance {
                    start: client.requests_made(),
                    allowed: (records / RECORDS_PER_REQUEST).max(LEAST_REQUESTS),
                    follows: AtomicUsize::new(0),
                    client,
                };
                Some((slug.to_owned(), allowance))
            })
            .collect();
        Budget { chains }
    }

    /// The head of each EVM chain of `budget`, read once each for this sweep; a chain whose
    /// node does not answer is left out, and its records are followed as if it had moved.
    pub(super) async fn heads(&self, budget: &Budget) -> HashMap<String, u64> {
        let reads = budget.chains.iter().map(|(slug, a)| async move {
            match a.client.block_number().await {
                Ok(head) => Some((slug.clone(), head)),
                Err(e) => {
                    tracing::debug!(chain = %slug, error = %e, "reading the chain's head failed");
                    None
                }
            }
        });
        futures::future::join_all(reads)
            .await
            .into_iter()
            .flatten()
            .collect()
    }

    /// Of `leased`, the records found unmined at the head their chain still shows (see the
    /// module docs), in two sets: those with nothing to do, and those to follow from their
    /// send on.
    pub(super) async fn unmoved(
        &self,
        leased: &[OpenTransaction],
        (budget, heads): (&Budget, &HashMap<String, u64>),
    ) -> (HashSet<Uuid>, HashSet<Uuid>) {
        let now = crate::clock::now();
        let stuck_after = self.stuck_after();
        let held_for = chrono::Duration::seconds(self.config.held_check_secs as i64);
        let mut quiet = HashSet::new();
        let mut from_send = HashSet::new();
        let mut ask = Vec::new();
        for open in leased {
            let id = open.id;
            let unmoved = heads
                .get(&open.chain)
                .is_some_and(|head| self.unmined.at_head(id, *head));
            if !unmoved {
                continue;
            }
            // A record marked by an earlier sweep (no verdict on a send, refusals, a nonce
            // taken) is followed from its send on, which deals with the mark; its receipt
            // and nonce, asked at this very head already, cannot have changed.
            if [&self.unanswered, &self.taken, &self.refused_since]
                .iter()
                .any(|marks| marks.marked(id))
            {
                from_send.insert(id);
                continue;
            }
            let current = open.hashes.last().and_then(|h| super::evm::hash_of(h).ok());
            match (open.last_broadcast_at, current) {
                (Some(sent), Some(hash)) if now - sent < stuck_after => {
                    if self.held.within(id, held_for) {
                        quiet.insert(id);
                    } else {
                        ask.push((id, open.chain.as_str(), hash));
                    }
                }
                _ => {
                    from_send.insert(id);
                }
            }
        }
        let asked = ask.into_iter().map(|(id, slug, hash)| async move {
            let client = budget.client(slug)?;
            Some((id, client.knows(hash).await))
        });
        for (id, known) in futures::future::join_all(asked).await.into_iter().flatten() {
            match known {
                Ok(true) => {
                    self.held.set(id);
                    quiet.insert(id);
                }
                Ok(false) => {
                    from_send.insert(id);
                }
                // Nothing more is asked of a node that did not answer this sweep.
                Err(_) => {
                    quiet.insert(id);
                }
            }
        }
        (quiet, from_send)
    }

    /// Whether record `id`'s signed bytes may be sent to the node again now (see
    /// `marks::Resends`).
    pub(super) fn resend_due(&self, id: Uuid) -> bool {
        let first = chrono::Duration::milliseconds(self.config.poll_interval_ms as i64);
        let cap = chrono::Duration::seconds(self.config.rebroadcast_max_secs as i64);
        self.resends.due(id, first, cap)
    }
}
