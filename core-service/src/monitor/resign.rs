//! The monitor's EVM re-signing: a record whose nonce another transaction used is signed at
//! a new nonce once that sight has lasted (and the taker is deep enough), and a record ended
//! at that nonce is corrected when the taker turns out to be its own version.

use super::{
    Monitor,
    evm::{deep_enough, hash_of, outcome_of},
};
use crate::{error::Result, recovery::evm::Resign};
use walletops_domain::{OpenTransaction, TxStatus};

impl Monitor {
    /// Re-signs `open` with a new nonce, its own being used on chain, and sends it. Nothing
    /// happens when the node holds one of the record's own versions: that is what used the
    /// nonce, and the next sweep reads its receipt. Nor, noted in its history, until the
    /// block that used the nonce is the chain's `confirmations` deep.
    pub(super) async fn resign_and_send(
        &self,
        chain: &walletops_chains::Chain,
        wallet: Option<&walletops_domain::DelegatedWallet>,
        client: &walletops_chains::evm::EvmClient,
        open: &OpenTransaction,
        why: &str,
    ) -> Result<()> {
        // Behind a load balancer, one call can reach a node a block behind (no receipt, no
        // transaction: ours looks lost) and the next one a node ahead (the nonce used): a new
        // nonce then pays twice. The sight must last a few sweeps first.
        let grace = chrono::Duration::milliseconds(
            (3 * self.config.poll_interval_ms).max(self.config.resign_after_secs * 1000) as i64,
        );
        if crate::clock::now() - self.taken.first(open.id) < grace {
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
        let resigned = match wallet {
            Some(wallet) => {
                self.evm
                    .resign_with_new_nonce(chain, wallet, client, open, why, needed)
                    .await?
            }
            // A filler is never signed again: its nonce taken, it is unneeded.
            None => self.evm.nonce_taken(client, open, needed).await?,
        };
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
            Resign::HeldByRecord | Resign::NonceFree | Resign::Due { .. } => Ok(()),
        }
    }

    /// Settles a record ended DROPPED (taken as gone) or FAILED at the nonce of `open`, whose
    /// nonce went to another transaction, when that transaction is one of the ended record's
    /// own versions after all: the record a nonce filler was made for, which a node that
    /// held it mined, or one refused for sure whose nonce was given back and reused, which
    /// another node behind the same gateway mined. A caller reading either would pay again.
    pub(super) async fn settle_ended_at_nonce(
        &self,
        chain: &walletops_chains::Chain,
        client: &walletops_chains::evm::EvmClient,
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
                if self
                    .store
                    .settle_ended(&ended, status, error, note, &hash.to_string())
                    .await?
                {
                    crate::metrics::settled(&ended, status);
                }
                // One transaction can use the nonce.
                return Ok(());
            }
        }
        Ok(())
    }
}
