//! What is done to a stored EVM record after its first broadcast: re-sign it with a new
//! nonce, replace it with higher fees, fail it and give its nonce back (or fill the nonce),
//! fill a gap below it. The monitor does all of these; the request that stored the record
//! uses the refusal path once, for its first broadcast.

use std::sync::Arc;

use alloy::{
    consensus::{TxEip1559, TxEnvelope},
    eips::eip2718::Decodable2718,
    primitives::{Address, Bytes, U256},
};
use uuid::Uuid;

use crate::{
    error::{Result, WalletOpsError},
    idempotency::failure_detail,
    signer::Signer,
};

use walletops_chains::{
    Chain,
    evm::{EvmClient, Fees, call_to},
};
use walletops_domain::{DelegatedWallet, OpenTransaction, TxHash, TxKind, TxStatus};
use walletops_store::{NewTransaction, Store};

/// Gas of a plain value transfer.
pub(crate) const TRANSFER_GAS: u64 = 21_000;

/// Acts on stored EVM records.
#[derive(Debug, Clone)]
pub struct EvmRecovery {
    store: Store,
    signer: Arc<dyn Signer>,
    /// The most a transaction signed by the monitor (a nonce filler) pays per gas.
    fee_caps: walletops_chains::evm::FeeCaps,
}

/// The EVM address that sent `open`. Not one when the record's chain slug was redefined as
/// another family since it was stored: then nothing can be signed for it here.
pub(crate) fn sender(open: &OpenTransaction) -> Result<Address> {
    open.from.evm().ok_or_else(|| {
        WalletOpsError::Internal(anyhow::anyhow!(
            "record {} was sent from {}, which is not an EVM address: its chain {} changed family",
            open.id,
            open.from,
            open.chain
        ))
    })
}

/// Who ends a record that is refused for good, and what that means for its key and nonce.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Ending<'a> {
    /// The request that signed it answers with this refusal: its key's claim fails with it,
    /// in the same database transaction.
    Answered(&'a WalletOpsError),
    /// The monitor, for a record no node may still hold.
    Found,
    /// The monitor, for a record taken as gone that a node may still hold: its nonce is
    /// filled, never given back, so that no later payment takes a nonce it may still use.
    MaybeHeld,
}

/// What `resign_with_new_nonce` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resign {
    /// Re-signed with a new nonce and stored; not yet sent.
    Resigned,
    /// Nothing: the node holds one of the record's own versions, pooled or mined.
    HeldByRecord,
    /// Nothing: no transaction holds the record's nonce, which the node's pending nonce has
    /// not passed.
    NonceFree,
    /// Nothing yet: another transaction took the nonce, but only in a pool, or in a block
    /// not yet as deep as asked; it may never be mined, or a reorganisation could still put
    /// the record's own version in its place.
    Shallow,
    /// Nothing: the record is a nonce filler, and another transaction filled its nonce.
    Unneeded,
    /// Nothing yet: another transaction took the nonce, deep enough, and the record is to be
    /// signed with a new one, at `pending` (the node's pending nonce) or past it.
    Due {
        /// The node's pending nonce for the wallet.
        pending: u64,
    },
}

/// Decodes a stored EIP-1559 payload.
pub(crate) fn decode_payload(payload: &[u8]) -> Result<TxEip1559> {
    let envelope = TxEnvelope::decode_2718(&mut &payload[..])
        .map_err(|e| WalletOpsError::Internal(anyhow::anyhow!("stored payload: {e}")))?;
    match envelope {
        TxEnvelope::Eip1559(signed) => Ok(signed.tx().clone()),
        _ => Err(WalletOpsError::Internal(anyhow::anyhow!(
            "stored payload is not an EIP-1559 transaction"
        ))),
    }
}

/// Whether the node holds one of `open`'s signed versions, pooled or mined. Asked before a
/// refusal ends a record: nodes word "I have it already" in ways no list covers, and a
/// record failed (its key failed, its nonce freed) while its transaction is mined is a
/// payment the caller will make again.
pub(crate) async fn held_by_node(client: &EvmClient, open: &OpenTransaction) -> Result<bool> {
    for hash in open.hashes.iter().rev() {
        if let TxHash::Evm(hash) = hash
            && client.knows(*hash).await?
        {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The chain id of EVM `chain` as transactions carry it.
pub(crate) fn evm_chain_id(chain: &Chain) -> Result<u64> {
    u64::try_from(chain.chain_id()).map_err(|_| {
        WalletOpsError::Internal(anyhow::anyhow!(
            "EVM chain id {} negative",
            chain.chain_id()
        ))
    })
}

impl EvmRecovery {
    /// Recovery signing with `signer`; nonce fillers pay at most `fee_caps`.
    pub fn new(
        store: Store,
        signer: Arc<dyn Signer>,
        fee_caps: walletops_chains::evm::FeeCaps,
    ) -> Self {
        Self {
            store,
            signer,
            fee_caps,
        }
    }

    /// Re-signs `open` with the next free nonce, moving the ledger past the chain's pending
    /// nonce, once its nonce is taken. Only when the node holds none of the record's own
    /// signed versions, pooled or mined: then the nonce went to another transaction (the
    /// wallet was used outside the service) and the old bytes can never be included. When
    /// the node holds one of them, the nonce is taken by the record itself (a "nonce too
    /// low" can answer a resend of a transaction just mined): nothing changes, since a second
    /// signing would pay twice. Nothing changes either while the node's pending nonce has not
    /// passed the record's: a refusal then was not about the nonce ("transaction
    /// underpriced" also answers a fee under the node's minimum), and a new nonce would
    /// leave a gap behind. Nor until the block that used the nonce is `depth` blocks deep
    /// (1: mined at all): re-signing pays twice if that block is reorganised away and an
    /// earlier send of the record's own version is mined in its place (`nonce_taken`).
    pub(crate) async fn resign_with_new_nonce(
        &self,
        chain: &Chain,
        wallet: &DelegatedWallet,
        client: &EvmClient,
        open: &OpenTransaction,
        why: &str,
        depth: u64,
    ) -> Result<Resign> {
        let pending = match self.nonce_taken(client, open, depth).await? {
            Resign::Due { pending } => pending,
            other => return Ok(other),
        };
        let from = sender(open)?;
        let mut tx = decode_payload(&open.signed_payload)?;
        self.signer.prepare(wallet).await?;
        let txn = self.store.begin().await?;
        let nonce = self
            .store
            .allocate_nonce(&txn, chain.chain_id(), from, Some(pending), 1)
            .await?;
        let old = tx.nonce;
        tx.nonce = nonce;
        let (payload, hash) = self.signer.sign_eip1559(wallet, tx).await?;
        self.store
            .resign_transaction(
                &txn,
                open,
                Some(nonce),
                None,
                payload,
                &hash,
                TxStatus::Submitted,
                format!("nonce {old} is used by another transaction ({why}); re-signed with nonce {nonce}"),
            )
            .await?;
        txn.commit().await?;
        crate::metrics::replacement(chain.slug(), "nonce");
        Ok(Resign::Resigned)
    }

    /// Who holds the nonce of `open`, read from the node: `Due` when a new nonce is due (see
    /// `resign_with_new_nonce`), with nothing signed.
    pub(crate) async fn nonce_taken(
        &self,
        client: &EvmClient,
        open: &OpenTransaction,
        depth: u64,
    ) -> Result<Resign> {
        if held_by_node(client, open).await? {
            return Ok(Resign::HeldByRecord);
        }
        let from = sender(open)?;
        let pending = client.pending_nonce(from).await?;
        if open.nonce.is_some_and(|n| pending <= n) {
            return Ok(Resign::NonceFree);
        }
        // The pending nonce also counts transactions only pooled, which may never be mined:
        // a new nonce then would strand every later one behind a gap.
        let settled = client.mined_nonce(from, depth.max(1)).await?;
        if open.nonce.is_some_and(|n| settled <= n) {
            return Ok(Resign::Shallow);
        }
        // A filler is there to fill its nonce: at another nonce it would only cost gas.
        if open.kind == TxKind::NonceFill {
            return Ok(Resign::Unneeded);
        }
        Ok(Resign::Due { pending })
    }

    /// Replaces `open` with the same nonce and `fees`.
    pub(crate) async fn replace_with_fees(
        &self,
        wallet: &DelegatedWallet,
        open: &OpenTransaction,
        fees: Fees,
        status: TxStatus,
        note: String,
    ) -> Result<()> {
        let mut tx = decode_payload(&open.signed_payload)?;
        tx.max_fee_per_gas = fees.max_fee_per_gas;
        tx.max_priority_fee_per_gas = fees.max_priority_fee_per_gas;
        let (payload, hash) = self.signer.sign_eip1559(wallet, tx).await?;
        let txn = self.store.begin().await?;
        self.store
            .resign_transaction(&txn, open, open.nonce, None, payload, &hash, status, note)
            .await?;
        txn.commit().await?;
        crate::metrics::replacement(&open.chain, "fee");
        Ok(())
    }

    /// Ends `open` as `status` (FAILED or DROPPED) with `error`, and gives its nonce back; when
    /// later nonces are out already, signs a zero-value self-transfer at that nonce instead,
    /// so the wallet's later transactions are not stranded behind a gap. False, with nothing
    /// changed, when another worker settled or re-signed the record meanwhile. `ending` says
    /// who ends it and what that means for its key and its nonce.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn fail_and_free_nonce(
        &self,
        chain: &Chain,
        wallet: &DelegatedWallet,
        client: &EvmClient,
        open: &OpenTransaction,
        status: TxStatus,
        error: &str,
        ending: Ending<'_>,
    ) -> Result<bool> {
        self.signer.prepare(wallet).await?;
        // Read before the database transaction, which must not wait on the node. Only a
        // filler needs them: fees the chain cannot offer now (above the cap, nodes that
        // disagree) must not keep a nonce from being freed.
        let now = client.fees().await.ok();
        let txn = self.store.begin().await?;
        let answered = match ending {
            Ending::Answered(answered) => Some(failure_detail(answered)),
            _ => None,
        };
        let settled = self
            .store
            .fail_transaction(&txn, open, status, error.to_owned(), answered)
            .await?;
        if !settled {
            txn.rollback().await?;
            return Ok(false);
        }
        if let Some(nonce) = open.nonce {
            let released = !matches!(ending, Ending::MaybeHeld)
                && self
                    .store
                    .release_nonce(&txn, chain.chain_id(), sender(open)?, nonce)
                    .await?;
            if !released {
                let failed = decode_payload(&open.signed_payload)?;
                // The filler may have to displace the failed version from a pool, and must
                // not be refused for the fee the failed one was refused for: it pays at
                // least the current fees and a replacement's raise over the failed one.
                let raised = |v: u128| v.saturating_mul(110).div_ceil(100);
                let fees = Fees {
                    max_fee_per_gas: raised(failed.max_fee_per_gas)
                        .max(now.map_or(0, |f| f.max_fee_per_gas)),
                    max_priority_fee_per_gas: raised(failed.max_priority_fee_per_gas)
                        .max(now.map_or(0, |f| f.max_priority_fee_per_gas)),
                };
                let note = format!("fills nonce {nonce} of transaction {}", open.id);
                self.insert_filler(&txn, chain, wallet, open, nonce, fees, note)
                    .await?;
            }
        }
        txn.commit().await?;
        crate::metrics::settled(open, status);
        Ok(true)
    }

    /// Fills `nonce`, which no record holds and the node has nothing pending at, below the
    /// nonce of `open`, queued behind it: a transaction sent from the wallet outside the
    /// service that the ledger counted when it started (the chain's pending nonce) and that
    /// left the pool unmined, say. Without it, `open` and every later transaction of the
    /// wallet would wait for ever. False, with nothing signed, when an open record holds the nonce: checked under the
    /// ledger row's lock, so that two followers (two stuck records of the wallet, or two
    /// cores) do not both fill it.
    pub(crate) async fn fill_gap(
        &self,
        chain: &Chain,
        wallet: &DelegatedWallet,
        client: &EvmClient,
        open: &OpenTransaction,
        nonce: u64,
    ) -> Result<bool> {
        let store = &self.store;
        let from = sender(open)?;
        if store
            .nonce_held_open(store.db(), open.chain_id, from, nonce)
            .await?
        {
            return Ok(false);
        }
        self.signer.prepare(wallet).await?;
        let fees = client.fees().await?;
        let txn = store.begin().await?;
        store.lock_nonce_row(&txn, open.chain_id, from).await?;
        if store
            .nonce_held_open(&txn, open.chain_id, from, nonce)
            .await?
        {
            txn.rollback().await?;
            return Ok(false);
        }
        let note = format!(
            "fills nonce {nonce}, a gap below transaction {} that nothing holds",
            open.id
        );
        self.insert_filler(&txn, chain, wallet, open, nonce, fees, note)
            .await?;
        txn.commit().await?;
        crate::metrics::nonce_gap_filled(chain.slug());
        Ok(true)
    }

    /// Signs and stores, in `txn`, a zero-value self-transfer from the wallet of `open` at
    /// `nonce`, paying `fees` but never more than the cap.
    #[allow(clippy::too_many_arguments)]
    async fn insert_filler(
        &self,
        txn: &walletops_store::Txn,
        chain: &Chain,
        wallet: &DelegatedWallet,
        open: &OpenTransaction,
        nonce: u64,
        fees: Fees,
        note: String,
    ) -> Result<()> {
        let from = sender(open)?;
        let max_fee_per_gas = fees.max_fee_per_gas.min(self.fee_caps.max_fee_per_gas);
        let filler = TxEip1559 {
            chain_id: evm_chain_id(chain)?,
            nonce,
            gas_limit: TRANSFER_GAS,
            max_fee_per_gas,
            max_priority_fee_per_gas: fees
                .max_priority_fee_per_gas
                .min(self.fee_caps.max_priority_fee_per_gas)
                .min(max_fee_per_gas),
            to: call_to(from),
            value: U256::ZERO,
            access_list: Default::default(),
            input: Bytes::new(),
        };
        let (payload, hash) = self.signer.sign_eip1559(wallet, filler).await?;
        self.store
            .insert_transaction(
                txn,
                NewTransaction {
                    id: Uuid::now_v7(),
                    user_id: open.user_id,
                    wallet_id: open.wallet_id,
                    chain: chain.slug().to_owned(),
                    chain_id: chain.chain_id(),
                    kind: TxKind::NonceFill,
                    from: open.from,
                    to: open.from.to_string(),
                    asset: Some("native".to_owned()),
                    token: None,
                    amount: Some("0".to_owned()),
                    request: serde_json::json!({"fills": open.id}),
                    hash,
                    nonce: Some(nonce),
                    signed_payload: payload,
                    idempotency_key: None,
                    note: Some(note),
                    valid_until: None,
                    held_until: None,
                    simulated_effects: None,
                    guarded: false,
                },
            )
            .await?;
        Ok(())
    }
}
