//! The EVM write pipeline: simulate, allocate a nonce and sign and store in one database
//! transaction, then broadcast; and the operations the monitor needs on an open transaction
//! (re-sign with a new nonce, replace with a higher fee, fail and fill the nonce).
//!
//! **Invariant:** a signed payload is stored before it is broadcast, and the nonce it uses is
//! allocated in the same database transaction that stores it. A node's definite refusal marks
//! the record failed and frees its nonce (or fills it when later nonces are out already); an
//! uncertain one leaves the record to the monitor, which sends the same bytes again.

use std::sync::Arc;

use alloy::{
    consensus::{SignableTransaction, TxEip1559, TxEnvelope},
    eips::eip2718::{Decodable2718, Encodable2718},
    primitives::{Address, Bytes, U256},
};
use chrono::Utc;
use uuid::Uuid;

use super::Submission;
use crate::{
    chains::{
        Chain,
        evm::{
            BroadcastOutcome, EvmClient, EvmClients, Fees, Rejection, call_to, decode_balance,
            erc20_balance_of,
        },
    },
    error::{Result, WalletOpsError},
    idempotency::Ticket,
    signer::Signer,
    store::{Store, transactions::NewTransaction},
    transactions::{OpenTransaction, TxKind, TxStatus},
    wallets::DelegatedWallet,
};

/// Gas of a plain value transfer.
const TRANSFER_GAS: u64 = 21_000;
/// Times a fresh transaction is re-signed with a new nonce when the node says its nonce is
/// taken (the wallet was used outside the service) before the request gives up.
const RESYNC_ATTEMPTS: usize = 3;

/// What an EVM write sends, parsed and ready.
#[derive(Debug, Clone)]
pub struct EvmIntent {
    /// What it does.
    pub kind: TxKind,
    /// Recipient or contract.
    pub to: Address,
    /// Native value in wei.
    pub value: U256,
    /// Calldata.
    pub input: Bytes,
    /// `native` or `erc20`, for transfers.
    pub asset: Option<String>,
    /// Token involved, if any.
    pub token: Option<Address>,
    /// Amount moved or approved, in base units.
    pub amount: Option<U256>,
    /// The recipient of a token transfer (`to` is then the token).
    pub beneficiary: Option<Address>,
    /// An ERC20 balance the sender must hold, checked before anything is signed.
    pub token_debit: Option<(Address, U256)>,
    /// The request as received, kept with the record for audit.
    pub request: serde_json::Value,
}

/// The EVM pipeline.
#[derive(Debug, Clone)]
pub struct EvmPipeline {
    store: Store,
    signer: Arc<dyn Signer>,
    clients: Arc<EvmClients>,
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

fn parse_address(a: &str) -> Result<Address> {
    a.parse()
        .map_err(|_| WalletOpsError::Internal(anyhow::anyhow!("stored address {a} unreadable")))
}

impl EvmPipeline {
    /// A pipeline signing with `signer`.
    pub fn new(store: Store, signer: Arc<dyn Signer>, clients: Arc<EvmClients>) -> Self {
        Self {
            store,
            signer,
            clients,
        }
    }

    /// The client of `chain`.
    pub fn client(&self, chain: &Chain) -> Result<EvmClient> {
        self.clients.get(chain.rpc_url())
    }

    async fn sign(&self, wallet: &DelegatedWallet, tx: TxEip1559) -> Result<(Vec<u8>, String)> {
        let signature = self.signer.sign_evm(wallet, tx.signature_hash()).await?;
        let signed = tx.into_signed(signature);
        let hash = format!("{:#x}", signed.hash());
        Ok((TxEnvelope::from(signed).encoded_2718(), hash))
    }

    /// Submits `intent` from `wallet` on `chain`: simulate, sign and store, broadcast.
    pub async fn submit(
        &self,
        chain: &Chain,
        wallet: &DelegatedWallet,
        intent: EvmIntent,
        ticket: Option<&Ticket>,
    ) -> Result<Submission> {
        let client = self.client(chain)?;
        let w = wallet.wallet();
        let from = parse_address(&w.address)?;
        if let Some((token, amount)) = intent.token_debit {
            let held = client
                .call(token, erc20_balance_of(from))
                .await
                .ok()
                .and_then(|d| decode_balance(&d));
            if let Some(held) = held
                && held < amount
            {
                return Err(WalletOpsError::InsufficientFunds(format!(
                    "wallet {} holds {held} of token {token}, less than {amount}",
                    w.address
                )));
            }
        }
        let fees = client.fees().await?;
        let estimated = client
            .estimate_gas(from, intent.to, intent.value, &intent.input, fees)
            .await?;
        // Contract calls get headroom: state can move between simulation and inclusion.
        let gas = if intent.input.is_empty() {
            estimated.max(TRANSFER_GAS)
        } else {
            estimated.saturating_add(estimated / 5)
        };
        // The node checked value plus the estimated gas; the headroom must be affordable too.
        if gas > estimated {
            let balance = client.balance(from).await?;
            let cost = intent.value + U256::from(gas) * U256::from(fees.max_fee_per_gas);
            if balance < cost {
                return Err(WalletOpsError::InsufficientFunds(format!(
                    "wallet {} holds {balance} wei, less than value plus maximum fee ({cost} wei)",
                    w.address
                )));
            }
        }
        let floor = if self
            .store
            .has_nonce_row(chain.chain_id(), &w.address)
            .await?
        {
            None
        } else {
            Some(client.pending_nonce(from).await?)
        };
        let chain_id = u64::try_from(chain.chain_id()).map_err(|_| {
            WalletOpsError::Internal(anyhow::anyhow!(
                "EVM chain id {} negative",
                chain.chain_id()
            ))
        })?;
        let id = Uuid::now_v7();
        self.signer.prepare(wallet).await?;
        let txn = self.store.begin().await?;
        let nonce = self
            .store
            .allocate_nonce(&txn, chain.chain_id(), &w.address, floor)
            .await?;
        let tx = TxEip1559 {
            chain_id,
            nonce,
            gas_limit: gas,
            max_fee_per_gas: fees.max_fee_per_gas,
            max_priority_fee_per_gas: fees.max_priority_fee_per_gas,
            to: call_to(intent.to),
            value: intent.value,
            access_list: Default::default(),
            input: intent.input.clone(),
        };
        let (payload, hash) = self.sign(wallet, tx).await?;
        let record_to = intent.beneficiary.unwrap_or(intent.to);
        self.store
            .insert_transaction(
                &txn,
                NewTransaction {
                    id,
                    user_id: w.user_id,
                    wallet_id: w.id,
                    chain: chain.slug().to_owned(),
                    chain_id: chain.chain_id(),
                    kind: intent.kind,
                    from: w.address.clone(),
                    to: record_to.to_checksum(None),
                    asset: intent.asset,
                    token: intent.token.map(|t| t.to_checksum(None)),
                    amount: intent.amount.map(|a| a.to_string()),
                    request: intent.request,
                    hash,
                    nonce: Some(nonce),
                    signed_payload: payload,
                    idempotency_key: ticket.map(|t| t.claim.key),
                    note: Some(format!("signed with nonce {nonce}")),
                    valid_until: None,
                },
            )
            .await?;
        super::commit_with_claim(&self.store, txn, ticket, id).await?;
        // The crash tests stop the process here: signed and stored, not yet broadcast.
        fail::fail_point!("evm-before-broadcast");
        self.first_broadcast(chain, wallet, &client, id).await
    }

    /// Broadcasts a freshly stored transaction; re-signs it with a new nonce when the node
    /// says the nonce is taken (the wallet was used outside the service).
    async fn first_broadcast(
        &self,
        chain: &Chain,
        wallet: &DelegatedWallet,
        client: &EvmClient,
        id: Uuid,
    ) -> Result<Submission> {
        for attempt in 0..=RESYNC_ATTEMPTS {
            let open = self.store.stored_transaction(id).await?;
            match client.broadcast(&open.signed_payload).await {
                BroadcastOutcome::Accepted => {
                    self.store.record_broadcast(id, Utc::now()).await?;
                    return Ok(Submission::of(chain, &open));
                }
                BroadcastOutcome::Unknown(why) => {
                    tracing::warn!(%id, %why, "broadcast outcome unknown; the monitor takes over");
                    return Ok(Submission::of(chain, &open));
                }
                BroadcastOutcome::Rejected(
                    Rejection::NonceTooLow(why) | Rejection::Underpriced(why),
                ) if attempt < RESYNC_ATTEMPTS => {
                    self.resign_with_new_nonce(chain, wallet, client, &open, &why)
                        .await?;
                }
                BroadcastOutcome::Rejected(rejection) => {
                    let err = match rejection {
                        Rejection::InsufficientFunds(m) => WalletOpsError::InsufficientFunds(
                            format!("the node refused the transaction: {m}"),
                        ),
                        Rejection::NonceTooLow(m)
                        | Rejection::Underpriced(m)
                        | Rejection::Other(m) => WalletOpsError::SendFailed(format!(
                            "the node refused the transaction: {m}"
                        )),
                    };
                    self.fail_and_free_nonce(
                        chain,
                        wallet,
                        &open,
                        TxStatus::Failed,
                        &err.to_string(),
                    )
                    .await?;
                    return Err(err);
                }
            }
        }
        Err(WalletOpsError::Internal(anyhow::anyhow!(
            "unreachable resync loop end"
        )))
    }

    /// Re-signs `open` with the next free nonce, moving the ledger past the chain's pending
    /// nonce. Safe because its old nonce is used on chain by another transaction, so its old
    /// bytes can never be included.
    pub(crate) async fn resign_with_new_nonce(
        &self,
        chain: &Chain,
        wallet: &DelegatedWallet,
        client: &EvmClient,
        open: &OpenTransaction,
        why: &str,
    ) -> Result<()> {
        let from = parse_address(&open.from)?;
        let pending = client.pending_nonce(from).await?;
        let mut tx = decode_payload(&open.signed_payload)?;
        self.signer.prepare(wallet).await?;
        let txn = self.store.begin().await?;
        let nonce = self
            .store
            .allocate_nonce(&txn, chain.chain_id(), &open.from, Some(pending))
            .await?;
        let old = tx.nonce;
        tx.nonce = nonce;
        let (payload, hash) = self.sign(wallet, tx).await?;
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
        Ok(())
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
        let (payload, hash) = self.sign(wallet, tx).await?;
        let txn = self.store.begin().await?;
        self.store
            .resign_transaction(&txn, open, open.nonce, None, payload, &hash, status, note)
            .await?;
        txn.commit().await?;
        Ok(())
    }

    /// Ends `open` as `status` (FAILED or DROPPED) with `error`, and gives its nonce back; when
    /// later nonces are out already, signs a zero-value self-transfer at that nonce instead,
    /// so the wallet's later transactions are not stranded behind a gap.
    pub(crate) async fn fail_and_free_nonce(
        &self,
        chain: &Chain,
        wallet: &DelegatedWallet,
        open: &OpenTransaction,
        status: TxStatus,
        error: &str,
    ) -> Result<()> {
        self.signer.prepare(wallet).await?;
        let txn = self.store.begin().await?;
        self.store
            .settle_transaction(&txn, open, status, Some(error.to_owned()), None, None)
            .await?;
        if let Some(nonce) = open.nonce {
            let released = self
                .store
                .release_nonce(&txn, chain.chain_id(), &open.from, nonce)
                .await?;
            if !released {
                let failed = decode_payload(&open.signed_payload)?;
                let from = parse_address(&open.from)?;
                let filler = TxEip1559 {
                    chain_id: failed.chain_id,
                    nonce,
                    gas_limit: TRANSFER_GAS,
                    max_fee_per_gas: failed.max_fee_per_gas,
                    max_priority_fee_per_gas: failed.max_priority_fee_per_gas,
                    to: call_to(from),
                    value: U256::ZERO,
                    access_list: Default::default(),
                    input: Bytes::new(),
                };
                let (payload, hash) = self.sign(wallet, filler).await?;
                self.store
                    .insert_transaction(
                        &txn,
                        NewTransaction {
                            id: Uuid::now_v7(),
                            user_id: open.user_id,
                            wallet_id: open.wallet_id,
                            chain: chain.slug().to_owned(),
                            chain_id: chain.chain_id(),
                            kind: TxKind::NonceFill,
                            from: open.from.clone(),
                            to: open.from.clone(),
                            asset: Some("native".to_owned()),
                            token: None,
                            amount: Some("0".to_owned()),
                            request: serde_json::json!({"fills": open.id}),
                            hash,
                            nonce: Some(nonce),
                            signed_payload: payload,
                            idempotency_key: None,
                            note: Some(format!("fills nonce {nonce} of transaction {}", open.id)),
                            valid_until: None,
                        },
                    )
                    .await?;
            }
        }
        txn.commit().await?;
        Ok(())
    }
}
