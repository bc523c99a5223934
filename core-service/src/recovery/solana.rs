//! What is done to a stored Solana record after its first send: re-sign it with a fresh
//! blockhash once the old one expired unseen, or end it. Solana has no nonce to give back.

use std::sync::Arc;

use solana_message::VersionedMessage;
use solana_signature::Signature;
use solana_transaction::versioned::VersionedTransaction;

use crate::{
    error::{Result, WalletOpsError},
    idempotency::failure_detail,
    signer::Signer,
};

use walletops_chains::{
    SolanaFees, budget_of, reprice,
    solana::{SignatureState, SolanaClient},
    writable,
};
use walletops_domain::{DelegatedWallet, OpenTransaction, TxHash, TxStatus};
use walletops_store::Store;

/// Acts on stored Solana records.
#[derive(Debug, Clone)]
pub struct SolanaRecovery {
    store: Store,
    signer: Arc<dyn Signer>,
}

/// Encodes a signed transaction for the store. A legacy transaction's bytes are the same as
/// its versioned form's: records stored either way decode alike.
pub(crate) fn encode(tx: &VersionedTransaction) -> Result<Vec<u8>> {
    wincode::serialize(tx)
        .map_err(|e| WalletOpsError::Internal(anyhow::anyhow!("encoding a transaction: {e}")))
}

/// Decodes a stored Solana payload.
pub(crate) fn decode(payload: &[u8]) -> Result<VersionedTransaction> {
    wincode::deserialize(payload)
        .map_err(|e| WalletOpsError::Internal(anyhow::anyhow!("stored payload: {e}")))
}

/// Whether the node has seen one of `open`'s signed versions (processed or further). Asked
/// before a refusal ends a record: a record failed (its key failed) while its transfer lands
/// is a payment the caller will make again.
pub(crate) async fn held_by_node(client: &SolanaClient, open: &OpenTransaction) -> Result<bool> {
    let (_, states) = client.statuses(&signatures(open)).await?;
    Ok(states.iter().any(|s| *s != SignatureState::Unseen))
}

/// The signatures of `open`'s signed versions, oldest first.
pub(crate) fn signatures(open: &OpenTransaction) -> Vec<Signature> {
    open.hashes
        .iter()
        .filter_map(|h| match h {
            TxHash::Solana(s) => Some(*s),
            TxHash::Evm(_) => None,
        })
        .collect()
}

impl SolanaRecovery {
    /// Recovery signing with `signer`.
    pub fn new(store: Store, signer: Arc<dyn Signer>) -> Self {
        Self { store, signer }
    }

    /// Re-signs `open` with a fresh blockhash and a fresh compute-unit price (`fees` of its
    /// chain). Callers make sure the old bytes can never be processed (their blockhash
    /// expired and the signature was never seen).
    pub(crate) async fn resign_with_new_blockhash(
        &self,
        wallet: &DelegatedWallet,
        (client, fees): (&SolanaClient, &SolanaFees),
        open: &OpenTransaction,
        why: &str,
    ) -> Result<()> {
        // Only the service's own transfers are legacy, and only they are signed again: a
        // swap's route is never re-signed (its price would be stale).
        let VersionedMessage::Legacy(mut message) = decode(&open.signed_payload)?.message else {
            return Err(WalletOpsError::Internal(anyhow::anyhow!(
                "record {} is not a transfer of the service's own: it is never signed again",
                open.id
            )));
        };
        // What blocks take now; a transfer signed before prices were set keeps its shape.
        let priced = match budget_of(&message) {
            (_, Some(_)) => {
                let (price, capped) =
                    fees.price(client.priority_prices(&writable(&message)).await?);
                reprice(&mut message, price);
                let limit = budget_of(&message).0.unwrap_or_default();
                format!(
                    ", compute unit limit {limit}, price {price} micro-lamports (p{} of recent fees{})",
                    fees.percentile,
                    if capped {
                        format!(", capped at {}", fees.max_price)
                    } else {
                        String::new()
                    }
                )
            }
            (_, None) => String::new(),
        };
        let (blockhash, valid_until) = client.blockhash().await?;
        let (tx, signature) = self
            .signer
            .sign_solana_message(wallet, message, blockhash)
            .await?;
        let txn = self.store.begin().await?;
        self.store
            .resign_transaction(
                &txn,
                open,
                None,
                Some(valid_until),
                encode(&tx.into())?,
                &signature,
                TxStatus::Submitted,
                format!(
                    "{why}; re-signed with a blockhash valid to block height {valid_until}{priced}"
                ),
            )
            .await?;
        txn.commit().await?;
        Ok(())
    }

    /// Ends `open` as `status` with `error` (Solana has no nonce to give back); false, with
    /// nothing changed, when another worker settled or re-signed the record meanwhile.
    /// `answered`: the refusal the request that signed the record answers with, which fails
    /// its key's claim in the same database transaction.
    pub(crate) async fn fail(
        &self,
        open: &OpenTransaction,
        status: TxStatus,
        error: &str,
        answered: Option<&WalletOpsError>,
    ) -> Result<bool> {
        let txn = self.store.begin().await?;
        let failed = self
            .store
            .fail_transaction(
                &txn,
                open,
                status,
                error.to_owned(),
                answered.map(failure_detail),
            )
            .await?;
        txn.commit().await?;
        if failed {
            crate::metrics::settled(open, status);
        }
        Ok(failed)
    }
}
