//! The monitor's Solana follow-up: settle a transfer from its signature's status, send it
//! again while its blockhash is valid, re-sign it once the blockhash expired unseen, and end
//! it after too many versions.

use uuid::Uuid;

use super::{Monitor, SOLANA_MAX_VERSIONS, Settlement};
use crate::{
    error::{Result, WalletOpsError},
    recovery::solana::{decode, held_by_node, signatures},
};
use walletops_chains::solana::{SendOutcome, SignatureState};
use walletops_domain::{OpenTransaction, TxKind, TxStatus};

/// Why a swap whose blockhash expired unseen ends: its route is never signed again.
const SWAP_EXPIRED: &str = "the swap's blockhash expired before the cluster saw it; a route is never signed again with a fresh blockhash, as its price is stale: request a new swap";

impl Monitor {
    /// Follows a Solana transfer: settled from its signatures' statuses; never seen and its
    /// blockhash expired (and only then), re-signed with a new one, or ended when a send of
    /// it was refused, it has had its last version, or its wallet can no longer be signed
    /// for; otherwise sent again, which a node that has it ignores.
    pub(super) async fn follow_solana(
        &self,
        chain: &walletops_chains::Chain,
        open: OpenTransaction,
    ) -> Result<Option<Settlement>> {
        let client = self.solana_clients.get(chain);
        let signatures = signatures(&open);
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
            let landed = match state {
                SignatureState::Succeeded => self.landed(&client, &open, hash).await,
                _ => Some(walletops_domain::Effects::default()),
            };
            return Ok(Some(Settlement {
                hash: hash.to_string(),
                open,
                status,
                error,
                note: None,
                landed,
                fee: None,
            }));
        }
        let expired = open.valid_until.is_some_and(|valid| height > valid);
        if expired && statuses_slot < height_slot {
            // Unseen by a node behind the one that saw the expiry: no verdict yet.
            return Ok(None);
        }
        if expired {
            self.expired_unseen(chain, &client, &open).await?;
            return Ok(None);
        }
        let resend_after = chrono::Duration::milliseconds(
            i64::try_from(chain.solana_fees().resend_interval_ms).unwrap_or(i64::MAX),
        );
        if open
            .last_broadcast_at
            .is_none_or(|at| crate::clock::now() - at >= resend_after)
        {
            if open.last_broadcast_at.is_some() {
                self.resent.add(open.id);
            }
            self.send_solana(&client, open.id).await?;
        }
        Ok(None)
    }

    /// Ends `open`, unseen and its blockhash expired (it can never land as signed), or signs
    /// it again with a new blockhash and sends it.
    async fn expired_unseen(
        &self,
        chain: &walletops_chains::Chain,
        client: &walletops_chains::solana::SolanaClient,
        open: &OpenTransaction,
    ) -> Result<()> {
        // Unseen, and it can never land as signed: it ends or is signed again.
        let ending = if self.refused_since.marked(open.id) {
            Some((
                TxStatus::Failed,
                "the node refused the transfer (its history says why), and its blockhash expired unseen".to_owned(),
            ))
        } else if open.kind == TxKind::Swap {
            Some((TxStatus::Failed, SWAP_EXPIRED.to_owned()))
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
                            (client, chain.solana_fees()),
                            open,
                            "its blockhash expired unseen",
                        )
                        .await?;
                    self.send_solana(client, open.id).await?;
                    None
                }
                // Kept open, it would be signed and paid once the wallet is delegated
                // again, however late: the caller may have paid another way meanwhile.
                Err(WalletOpsError::WalletNotDelegated(why)) => Some((
                    TxStatus::Dropped,
                    format!("its blockhash expired unseen, and it cannot be signed again: {why}"),
                )),
                Err(e) => return Err(e),
            }
        };
        if let Some((status, why)) = ending {
            self.refused_since.clear(open.id);
            self.solana.fail(open, status, &why, None).await?;
        }
        Ok(())
    }

    /// What `open`, final as `hash`, did to its wallet, read from the chain; `None` when it
    /// cannot be read now (the record settles all the same).
    async fn landed(
        &self,
        client: &walletops_chains::solana::SolanaClient,
        open: &OpenTransaction,
        hash: &walletops_domain::TxHash,
    ) -> Option<walletops_domain::Effects> {
        let (walletops_domain::TxHash::Solana(signature), Some(wallet)) =
            (hash, open.from.solana())
        else {
            return None;
        };
        let tx = decode(&open.signed_payload).ok()?;
        match client.landed(&wallet, signature, &tx).await {
            Ok(landed) => landed,
            Err(e) => {
                tracing::warn!(id = %open.id, error = %e, "reading what a final transaction did failed");
                None
            }
        }
    }

    /// Sends the current payload of Solana record `id`.
    pub(super) async fn send_solana(
        &self,
        client: &walletops_chains::solana::SolanaClient,
        id: Uuid,
    ) -> Result<()> {
        let Some(open) = self.store.open_transaction(id).await? else {
            return Ok(());
        };
        let tx = decode(&open.signed_payload)?;
        match client.resend(&tx).await {
            SendOutcome::Accepted => self.sent(id).await,
            // Unknown blockhash: handled once the height passes its validity.
            SendOutcome::BlockhashExpired | SendOutcome::Unknown(_) => Ok(()),
            // A send the node holds was refused as a duplicate, whatever its words.
            SendOutcome::Rejected { why, .. } if held_by_node(client, &open).await? => {
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
}
