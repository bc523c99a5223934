//! The monitor's EVM follow-up: settle a record from its receipt once deep enough, send it
//! again when the node lost it, re-sign it when its nonce was taken, replace it with higher
//! fees when stuck, fill a gap below it, and end it when it is refused for good.

use alloy::primitives::{Address, B256};
use uuid::Uuid;

use super::{
    Monitor, REFUSED_STUCK_TIMES, Settlement,
    bump::{MIN_BUMP_PERCENT, raise, replacement_fees},
};
use crate::{
    error::{Result, WalletOpsError},
    recovery::evm::{Ending, decode_payload, sender},
};
use walletops_chains::effects::evm::{self, Log};
use walletops_chains::{
    Chain,
    evm::{BroadcastOutcome, EvmClient, Fees, Rejection},
};
use walletops_domain::{
    ChainFamily, DelegatedWallet, Effects, OpenTransaction, TxHash, TxKind, TxStatus,
};

/// The final state a mined transaction's `receipt` gives its record.
pub(super) fn outcome_of(
    receipt: &alloy::rpc::types::TransactionReceipt,
) -> (TxStatus, Option<String>) {
    if receipt.status() {
        (TxStatus::Confirmed, None)
    } else {
        (TxStatus::Reverted, Some("execution reverted".to_owned()))
    }
}

/// What `open`, mined as `receipt` with `status`, did to its wallet: read from the receipt's
/// logs and the payload's value; nothing when it reverted. None for a nonce filler, which
/// was never simulated, or a payload that does not decode.
fn landed(
    open: &OpenTransaction,
    status: TxStatus,
    receipt: &alloy::rpc::types::TransactionReceipt,
) -> Option<Effects> {
    if open.kind == TxKind::NonceFill {
        return None;
    }
    if status != TxStatus::Confirmed {
        return Some(Effects::default());
    }
    let wallet = open.from.evm()?;
    let tx = decode_payload(&open.signed_payload).ok()?;
    let logs: Vec<Log> = receipt
        .inner
        .logs()
        .iter()
        .map(|l| Log {
            address: l.address(),
            topics: l.topics().to_vec(),
            data: l.data().data.clone(),
        })
        .collect();
    Some(evm::landed(wallet, (tx.to.to().copied(), tx.value), &logs))
}

/// Whether block `block` is its chain's `confirmations` deep. A receipt is the node's
/// canonical chain only: one for a block that is reorganised away is gone at the next sweep.
pub(super) async fn deep_enough(
    chain: &walletops_chains::Chain,
    client: &walletops_chains::evm::EvmClient,
    block: u64,
) -> Result<bool> {
    let needed = chain.confirmations();
    Ok(needed <= 1 || client.block_number().await?.saturating_sub(block) + 1 >= needed)
}

/// What the receipts of a record's hashes say of it.
enum Receipts {
    /// One is included deep enough: the record's final state.
    Mined(Settlement),
    /// One is included, not yet deep enough.
    Shallow,
    /// None is included: the record, given back.
    None(OpenTransaction),
}

/// A node's definite refusal of a record's current version, as the monitor acts on it.
#[derive(Debug, Clone, Copy)]
pub(super) enum Refusal<'a> {
    /// The wallet cannot pay value and fees; the node's words.
    Unaffordable(&'a str),
    /// Any other refusal; the node's words.
    Other(&'a str),
}

/// An EVM record's hash. Not one when the record's chain slug was redefined as another
/// family since it was stored.
pub(super) fn hash_of(h: &TxHash) -> Result<B256> {
    match h {
        TxHash::Evm(hash) => Ok(*hash),
        TxHash::Solana(_) => Err(WalletOpsError::Internal(anyhow::anyhow!(
            "{h} is not an EVM transaction hash: its chain changed family"
        ))),
    }
}

impl Monitor {
    /// Follows `open` one step; returns its final state when the chain shows one. `head`:
    /// its chain's head read this sweep, if it was; `unmoved`: the record was found unmined,
    /// its nonce unused, at that very head, so neither is asked again (see `quiet`).
    pub(super) async fn follow(
        &self,
        open: OpenTransaction,
        head: Option<u64>,
        unmoved: bool,
    ) -> Result<Option<Settlement>> {
        let id = open.id;
        let chain = self.chains.resolve(&open.chain)?.clone();
        if chain.family() == ChainFamily::Solana {
            return self.follow_solana(&chain, open).await;
        }
        let client = self.evm_clients.get(&chain)?;
        let from = sender(&open)?;
        let open = if unmoved {
            open
        } else {
            match self.receipts(&chain, &client, open).await? {
                Receipts::Mined(settled) => return Ok(Some(settled)),
                Receipts::Shallow => return Ok(None),
                Receipts::None(open) => open,
            }
        };
        let Some(nonce) = open.nonce else {
            return Ok(None);
        };
        if !unmoved {
            if self
                .nonce_taken(&chain, &client, &open, from, nonce)
                .await?
            {
                return Ok(None);
            }
            if let Some(head) = head {
                self.unmined.found_at(id, head);
            }
        }
        let current = open
            .hashes
            .last()
            .ok_or_else(|| WalletOpsError::Internal(anyhow::anyhow!("record {id} has no hash")))?;
        let sent_before = open.last_broadcast_at.is_some();
        let stuck_after = self.stuck_after();
        let held = sent_before && client.knows(hash_of(current)?).await?;
        if held {
            self.resends.clear(id);
        } else {
            // A node that lost it, or gave no verdict, gets it again after growing pauses.
            if !self.resend_due(id) {
                return Ok(None);
            }
            if sent_before {
                self.resent.add(id);
            }
            if !self.send_again(&chain, &client, &open, from, nonce).await? {
                return Ok(None);
            }
        }
        // The node holds it: any run of refusals has ended.
        self.refused_since.clear(id);
        if open
            .last_broadcast_at
            .is_some_and(|at| crate::clock::now() - at >= stuck_after)
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

    /// Whether `open`'s nonce was used on chain (read after the receipts, so the usual case,
    /// mined, costs one call): if so, it is signed again at a new nonce. Ours may have been
    /// mined since: `resign_with_new_nonce` re-signs only when the node holds none of the
    /// record's hashes.
    async fn nonce_taken(
        &self,
        chain: &Chain,
        client: &EvmClient,
        open: &OpenTransaction,
        from: Address,
        nonce: u64,
    ) -> Result<bool> {
        let mined = client.mined_nonce(from, 1).await?;
        if mined <= nonce {
            self.taken.clear(open.id);
            return Ok(false);
        }
        // A filler is never signed again (only found unneeded, and the record it fills
        // settled): it needs no key.
        if open.kind == TxKind::NonceFill {
            self.resign_and_send(chain, None, client, open, "seen on chain")
                .await?;
        } else if let Some(wallet) = self.signable(open).await {
            self.resign_and_send(chain, Some(&wallet), client, open, "seen on chain")
                .await?;
        }
        Ok(true)
    }

    /// Sends `open` again to a node that lost it or gave no verdict, and acts on the node's
    /// answer: whether the node took it again after an earlier send.
    async fn send_again(
        &self,
        chain: &Chain,
        client: &EvmClient,
        open: &OpenTransaction,
        from: Address,
        nonce: u64,
    ) -> Result<bool> {
        let id = open.id;
        let sent_before = open.last_broadcast_at.is_some();
        match client.broadcast(&open.signed_payload).await {
            BroadcastOutcome::Accepted if sent_before => {
                // The stuck time still runs from the first send: a node that keeps
                // losing a transaction (a pool evicting it for its price) gets it again,
                // and it is replaced with a higher fee in time all the same, below.
                tracing::info!(%id, "rebroadcast a transaction the node had lost");
                return Ok(true);
            }
            BroadcastOutcome::Accepted => self.sent(id).await?,
            BroadcastOutcome::Unknown(why) => {
                tracing::warn!(%id, %why, "no verdict from the node; will send again");
                self.no_verdict(open, open.created_at).await?;
                // A node that refuses a nonce ahead of its own ("nonce too high") never
                // takes a record above a gap: the gap is filled once it is stuck.
                if crate::clock::now() - open.created_at >= self.stuck_after()
                    && let Some(wallet) = self.signable(open).await
                {
                    self.gap_filled_below(chain, &wallet, client, open, from, nonce)
                        .await?;
                }
            }
            BroadcastOutcome::Rejected(rejection) => {
                if let Some(wallet) = self.signable(open).await {
                    self.rejected(chain, &wallet, client, open, rejection)
                        .await?;
                }
            }
        }
        Ok(false)
    }

    /// Acts on the node's refusal of `open`, sent again.
    async fn rejected(
        &self,
        chain: &Chain,
        wallet: &DelegatedWallet,
        client: &EvmClient,
        open: &OpenTransaction,
        rejection: Rejection,
    ) -> Result<()> {
        match rejection {
            Rejection::NonceTooLow(why) => {
                self.resign_and_send(chain, Some(wallet), client, open, &why)
                    .await
            }
            // Raised at once, then at most once a stuck time: another transaction at the
            // nonce (the wallet's owner's, say) is not outbid sweep after sweep up to the cap.
            Rejection::Underpriced(why) if !self.raised.due(open.id, self.stuck_after()) => {
                self.note_once(
                    open,
                    format!(
                        "the node refused it as underpriced ({why}); the fee is raised again {} s after the last raise",
                        self.config.stuck_after_secs
                    ),
                )
                .await
            }
            Rejection::Underpriced(_) => self.replace(wallet, open, client).await,
            Rejection::InsufficientFunds(why) => {
                let refusal = Refusal::Unaffordable(&why);
                self.refused(chain, wallet, client, open, refusal).await
            }
            Rejection::Other(why) => {
                let refusal = Refusal::Other(&why);
                self.refused(chain, wallet, client, open, refusal).await
            }
        }
    }

    /// What the receipts of `open`'s hashes say of it (see `Receipts`).
    async fn receipts(
        &self,
        chain: &walletops_chains::Chain,
        client: &walletops_chains::evm::EvmClient,
        open: OpenTransaction,
    ) -> Result<Receipts> {
        let id = open.id;
        for hash in open.hashes.iter().rev() {
            let receipt = match client.receipt(hash_of(hash)?).await {
                Ok(receipt) => {
                    self.unanswered.clear(id);
                    receipt
                }
                Err(e) => {
                    self.no_verdict(&open, self.unanswered.first(id)).await?;
                    return Err(e.into());
                }
            };
            if let Some(receipt) = receipt {
                let block = receipt.block_number.unwrap_or_default();
                let included = format!(
                    "included in block {block} ({:#x})",
                    receipt.block_hash.unwrap_or_default()
                );
                if !deep_enough(chain, client, block).await? {
                    let needed = chain.confirmations();
                    self.note_once(
                        &open,
                        format!("{included}; waiting for {needed} confirmations"),
                    )
                    .await?;
                    return Ok(Receipts::Shallow);
                }
                let (status, error) = outcome_of(&receipt);
                let note = Some(included);
                let landed = landed(&open, status, &receipt);
                let fee = alloy::primitives::U256::from(receipt.gas_used)
                    .saturating_mul(alloy::primitives::U256::from(receipt.effective_gas_price));
                return Ok(Receipts::Mined(Settlement {
                    hash: hash.to_string(),
                    open,
                    status,
                    error,
                    note,
                    landed,
                    fee: Some(fee),
                }));
            }
        }
        Ok(Receipts::None(open))
    }

    /// Fills the lowest nonce below `nonce`, that of `open` (sent from `from`), that the
    /// node has nothing pending at, when no open record holds it (one nonce a sweep; the
    /// filler then counts as pending). Whether there is such a gap, filled now or held by a
    /// record of ours.
    pub(super) async fn gap_filled_below(
        &self,
        chain: &walletops_chains::Chain,
        wallet: &walletops_domain::DelegatedWallet,
        client: &walletops_chains::evm::EvmClient,
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

    /// Handles the node's definite refusal (`why`) of the current version of `open`. A node
    /// that holds that very version refused a duplicate, whatever its words: the record
    /// counts as sent. An earlier version the node holds can still be mined: the record waits
    /// for it. A nonce filler, and a record some version of which a node took before, stay
    /// open and are raised in fee once a stuck time, unless the wallet cannot pay
    /// (`Refusal::Unaffordable`): a filler then waits for funds, noted in its history. A record no
    /// node took ends FAILED, its nonce freed (or filled, when later ones are out); one a
    /// node took ends DROPPED, its nonce filled, once the wallet cannot pay for it or it has
    /// been refused for `REFUSED_STUCK_TIMES` stuck times.
    pub(super) async fn refused(
        &self,
        chain: &walletops_chains::Chain,
        wallet: &walletops_domain::DelegatedWallet,
        client: &walletops_chains::evm::EvmClient,
        open: &OpenTransaction,
        refusal: Refusal<'_>,
    ) -> Result<()> {
        let (why, insufficient) = match refusal {
            Refusal::Unaffordable(why) => (why, true),
            Refusal::Other(why) => (why, false),
        };
        let id = open.id;
        if self.held_anyway(client, open, why).await? {
            return Ok(());
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
            crate::clock::now() - self.refused_since.first(id) >= stuck_after * REFUSED_STUCK_TIMES;
        if filler || (accepted && !insufficient && !refused_long) {
            // A filler must fill its nonce. A transaction a node took before may still sit
            // in other nodes' pools and be mined: ending it would give back or fill a nonce
            // it holds, and its record would say DROPPED of a payment that is made. Both are
            // sent again after growing pauses and raised in fee at most once a stuck time (a filler at
            // once), so a refusal for the fee (a base fee risen over it) ends, and a passing
            // one (a full pool) does not cost a raise each second.
            let stuck = filler
                || open
                    .last_broadcast_at
                    .is_none_or(|at| crate::clock::now() - at >= stuck_after);
            if stuck && self.raised.due(id, stuck_after) {
                tracing::warn!(%id, %why, "the node refused a transaction; raising its fee");
                return self.replace(wallet, open, client).await;
            }
            let note = format!(
                "the node refused it ({why}); it is sent again after pauses that grow and raised in fee at most once every {} s",
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

    /// Whether the node that refused `open` for `why` holds a version of it all the same:
    /// its current one (the record counts as sent) or an earlier one (it waits for that).
    async fn held_anyway(
        &self,
        client: &walletops_chains::evm::EvmClient,
        open: &OpenTransaction,
        why: &str,
    ) -> Result<bool> {
        let id = open.id;
        if let Some(current) = open.hashes.last()
            && client.knows(hash_of(current)?).await?
        {
            tracing::warn!(%id, %why, "the node refused a transaction it holds; taken as sent");
            if open.last_broadcast_at.is_none() {
                self.store
                    .record_broadcasts(&[id], crate::clock::now())
                    .await?;
            }
            return Ok(true);
        }
        for earlier in open.hashes.iter().rev().skip(1) {
            if client.knows(hash_of(earlier)?).await? {
                tracing::warn!(%id, %earlier, %why, "the node refused a replacement; the earlier version is still pending");
                let note =
                    format!("the node refused the replacement ({why}); {earlier} is still pending");
                self.note_once(open, note).await?;
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Replaces `open` with a higher fee, or marks it FEE_CAPPED when the cap forbids it.
    pub(super) async fn replace(
        &self,
        wallet: &walletops_domain::DelegatedWallet,
        open: &OpenTransaction,
        client: &walletops_chains::evm::EvmClient,
    ) -> Result<()> {
        let old = decode_payload(&open.signed_payload)?;
        let old_fees = Fees {
            max_fee_per_gas: old.max_fee_per_gas,
            max_priority_fee_per_gas: old.max_priority_fee_per_gas,
        };
        let caps = client.caps();
        let reading = client.fee_reading().await?;
        let bump = u128::from(self.config.fee_bump_percent);
        let fitting = match caps.apply(&open.chain, reading) {
            Ok(now) => replacement_fees(old_fees, now, bump, caps).ok_or_else(|| {
                let needed = raise(old.max_fee_per_gas, MIN_BUMP_PERCENT);
                format!(
                    "stuck; a replacement needs maxFeePerGas {needed} wei and a 10 % higher tip, \
                     above the caps of {} and {} wei",
                    caps.max_fee_per_gas, caps.max_priority_fee_per_gas
                )
            }),
            Err(above) => Err(format!("stuck; {above}")),
        };
        let fees = match fitting {
            Ok(fees) => fees,
            Err(why) => {
                if open.status != TxStatus::FeeCapped {
                    self.mark(open, TxStatus::FeeCapped, why).await?;
                }
                return Ok(());
            }
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

    /// Sends the current payload of `id` right after it was re-signed, so the new version
    /// does not wait for the next sweep. A failure here is retried by that sweep.
    pub(super) async fn send_current(
        &self,
        client: &walletops_chains::evm::EvmClient,
        id: Uuid,
    ) -> Result<()> {
        // A new version: its sends start again from one sweep's pause, and whether the node
        // holds it is asked afresh.
        self.resends.clear(id);
        self.held.clear(id);
        let Some(open) = self.store.open_transaction(id).await? else {
            return Ok(());
        };
        if let BroadcastOutcome::Accepted = client.broadcast(&open.signed_payload).await {
            self.sent(id).await?;
        }
        Ok(())
    }
}
