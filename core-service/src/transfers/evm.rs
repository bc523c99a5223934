//! The EVM write pipeline: simulate, allocate a nonce and sign and store in one database
//! transaction, then broadcast; and the operations the monitor needs on an open transaction
//! (re-sign with a new nonce, replace with a higher fee, fail and fill the nonce).
//!
//! **Invariant:** a signed payload is stored before it is broadcast, and the nonce it uses is
//! allocated in the same database transaction that stores it. A node's definite refusal marks
//! the record failed and frees its nonce (or fills it when later nonces are out already); an
//! uncertain one leaves the record to the monitor, which sends the same bytes again.

use std::{
    collections::{HashMap, HashSet, hash_map::Entry},
    sync::{Arc, Mutex, PoisonError},
};

use alloy::{
    consensus::{SignableTransaction, TxEip1559, TxEnvelope},
    eips::eip2718::{Decodable2718, Encodable2718},
    primitives::{Address, Bytes, U256},
};
use tokio::sync::oneshot;
use uuid::Uuid;

use super::{BroadcastLog, Submission, handed_over};
use crate::{
    chains::{
        Chain,
        evm::{
            BroadcastOutcome, EvmClient, EvmClients, Fees, Rejection, call_to, decode_balance,
            erc20_balance_of,
        },
    },
    error::{Result, WalletOpsError},
    idempotency::{Ticket, failure_detail},
    signer::Signer,
    store::{NewClaim, Store, transactions::NewTransaction},
    transactions::{OpenTransaction, TxKind, TxStatus},
    wallets::DelegatedWallet,
};

/// Gas of a plain value transfer.
const TRANSFER_GAS: u64 = 21_000;

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
    broadcasts: BroadcastLog,
    lanes: Arc<Lanes>,
    /// The most a transaction signed by the monitor (a nonce filler) pays per gas, in wei.
    fee_cap: u128,
}

/// A wallet's lane: its chain id and address.
type LaneKey = (i64, String);

/// A send that passed its checks, waiting to be given a nonce, signed and stored.
#[derive(Debug)]
struct Draft {
    chain: Chain,
    /// The chain's client, which broadcasts the batch.
    client: EvmClient,
    wallet: DelegatedWallet,
    /// The transaction, its nonce still to be set.
    tx: TxEip1559,
    /// The chain's pending nonce, for a wallet the ledger does not know yet.
    floor: Option<u64>,
    /// The record, its nonce, hash and payload still to be set.
    record: NewTransaction,
    claim: Option<NewClaim>,
}

/// A stored transaction and what the node said to its first broadcast.
type Sent = (OpenTransaction, BroadcastOutcome);

/// A draft and where its answer goes.
type Queued = (Draft, oneshot::Sender<Result<Sent>>);

/// A committed batch's transactions and their waiters, in nonce order.
type Committed = Vec<(OpenTransaction, oneshot::Sender<Result<Sent>>)>;

/// How one try at signing a batch ended.
enum Attempt {
    /// Everything signed, stored and claimed; the transaction is to be committed.
    Stored(sea_orm::DatabaseTransaction, Vec<OpenTransaction>),
    /// These sends (ascending indexes) are refused; the transaction is to be rolled back.
    Refused(sea_orm::DatabaseTransaction, Vec<(usize, WalletOpsError)>),
}

impl Attempt {
    /// Every send refused with `err`: a store error ends the batch, not the drainer.
    fn refuse_all(
        txn: sea_orm::DatabaseTransaction,
        n: usize,
        err: &dyn std::fmt::Display,
    ) -> Self {
        Self::Refused(txn, (0..n).map(|i| (i, batch_failed(err))).collect())
    }
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
    /// Nothing, as asked: another transaction took the nonce, deep enough, and the record is
    /// to be signed with a new one.
    Due,
}

/// What a lane holds for its drainer.
enum Take {
    /// Drafts to sign.
    Batch(Vec<Queued>),
    /// Nothing queued, but the drainer's last broadcast is still out: the lane stays open.
    Idle,
    /// Nothing queued; the lane is closed.
    Closed,
}

/// The signing lanes of one core: the drafts queued per wallet. A lane present in the map
/// has a drainer running.
#[derive(Debug, Default)]
struct Lanes {
    queued: Mutex<HashMap<LaneKey, Vec<Queued>>>,
    /// Wallets the nonce ledger has a row for.
    known: Mutex<HashSet<LaneKey>>,
}

/// Drafts signed and stored in one database transaction at most.
const MAX_BATCH: usize = 64;

impl Lanes {
    /// Queues a draft; true when its lane was idle, so the caller must start its drainer.
    fn push(&self, key: LaneKey, draft: Draft, reply: oneshot::Sender<Result<Sent>>) -> bool {
        let mut queued = self.queued.lock().unwrap_or_else(PoisonError::into_inner);
        match queued.entry(key) {
            Entry::Occupied(mut lane) => {
                lane.get_mut().push((draft, reply));
                false
            }
            Entry::Vacant(lane) => {
                lane.insert(vec![(draft, reply)]);
                true
            }
        }
    }

    /// The next batch of lane `key`. An empty lane closes unless `sending` (its drainer
    /// still has a broadcast out, which the next batch's must follow).
    fn next_batch(&self, key: &LaneKey, sending: bool) -> Take {
        let mut queued = self.queued.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(lane) = queued.get_mut(key) else {
            return Take::Closed;
        };
        if !lane.is_empty() {
            let take = lane.len().min(MAX_BATCH);
            return Take::Batch(lane.drain(..take).collect());
        }
        if sending {
            return Take::Idle;
        }
        queued.remove(key);
        Take::Closed
    }

    fn known(&self, key: &LaneKey) -> bool {
        self.known
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(key)
    }

    fn learn(&self, key: LaneKey) {
        self.known
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key);
    }
}

/// Closes a lane whose drainer died (a panic): its queued callers get an error instead of
/// waiting forever, and the next send starts a new drainer.
struct LaneGuard<'a> {
    lanes: &'a Lanes,
    key: &'a LaneKey,
    armed: bool,
}

impl Drop for LaneGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.lanes
                .queued
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(self.key);
        }
    }
}

/// The error of every send of a batch that could not be stored.
fn batch_failed(err: &dyn std::fmt::Display) -> WalletOpsError {
    WalletOpsError::Internal(anyhow::anyhow!("database: storing the signed batch: {err}"))
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
        let hash = hash.parse().map_err(|_| {
            WalletOpsError::Internal(anyhow::anyhow!("stored hash {hash} unreadable"))
        })?;
        if client.knows(hash).await? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Whether the token call of `intent` (a transfer or an approval) answers `false` when
/// simulated from `from`: some tokens refuse that way instead of reverting, and the
/// transaction would be mined and do nothing. A revert is the estimate's to report.
async fn refused_by_token(client: &EvmClient, from: Address, intent: &EvmIntent) -> bool {
    if intent.token.is_none() {
        return false;
    }
    client
        .call_from(Some(from), intent.to, intent.input.clone())
        .await
        .is_ok_and(|answer| answer.len() == 32 && answer.iter().all(|b| *b == 0))
}

/// The chain id of EVM `chain` as transactions carry it.
fn evm_chain_id(chain: &Chain) -> Result<u64> {
    u64::try_from(chain.chain_id()).map_err(|_| {
        WalletOpsError::Internal(anyhow::anyhow!(
            "EVM chain id {} negative",
            chain.chain_id()
        ))
    })
}

fn parse_address(a: &str) -> Result<Address> {
    a.parse()
        .map_err(|_| WalletOpsError::Internal(anyhow::anyhow!("stored address {a} unreadable")))
}

impl EvmPipeline {
    /// A pipeline signing with `signer`, noting broadcasts in `broadcasts`; nonce fillers pay
    /// at most `fee_cap` wei per gas.
    pub fn new(
        store: Store,
        signer: Arc<dyn Signer>,
        clients: Arc<EvmClients>,
        broadcasts: BroadcastLog,
        fee_cap: u128,
    ) -> Self {
        Self {
            store,
            signer,
            clients,
            broadcasts,
            lanes: Arc::default(),
            fee_cap,
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
        // A call to an address without code succeeds and does nothing: a mistyped token
        // or contract would be mined, recorded CONFIRMED, and move nothing.
        if !intent.input.is_empty() && !client.has_code(intent.to).await? {
            let field = if intent.token.is_some() {
                "token"
            } else {
                "to"
            };
            return Err(WalletOpsError::invalid(
                field,
                format!(
                    "{} holds no contract on {}",
                    intent.to.to_checksum(None),
                    chain.slug()
                ),
            ));
        }
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
        // The balance is checked here, not left to the simulation: nodes short-cut the
        // estimate of a plain transfer (anvil answers 21000 whatever the sender holds), and
        // the headroom below must be affordable too. Both reads go out together.
        let (estimated, balance, refused) = tokio::join!(
            client.estimate_gas(from, intent.to, intent.value, &intent.input, fees),
            client.balance(from),
            refused_by_token(&client, from, &intent),
        );
        let (estimated, balance) = (estimated?, balance?);
        if refused {
            return Err(WalletOpsError::SendFailed(format!(
                "the transaction would do nothing: token {} answers false to this {}",
                intent.to.to_checksum(None),
                if intent.kind == TxKind::Approve {
                    "approval"
                } else {
                    "transfer"
                }
            )));
        }
        // Contract calls get headroom: state can move between simulation and inclusion.
        let gas = if intent.input.is_empty() {
            estimated.max(TRANSFER_GAS)
        } else {
            estimated.saturating_add(estimated / 5)
        };
        let cost = intent
            .value
            .saturating_add(U256::from(gas).saturating_mul(U256::from(fees.max_fee_per_gas)));
        if balance < cost {
            return Err(WalletOpsError::InsufficientFunds(format!(
                "wallet {} holds {balance} wei, less than value plus maximum fee ({cost} wei)",
                w.address
            )));
        }
        let floor = self.nonce_floor(chain, &client, from, &w.address).await?;
        let chain_id = evm_chain_id(chain)?;
        self.signer.prepare(wallet).await?;
        let draft = Draft {
            chain: chain.clone(),
            client: client.clone(),
            wallet: wallet.clone(),
            tx: TxEip1559 {
                chain_id,
                nonce: 0,
                gas_limit: gas,
                max_fee_per_gas: fees.max_fee_per_gas,
                max_priority_fee_per_gas: fees.max_priority_fee_per_gas,
                to: call_to(intent.to),
                value: intent.value,
                access_list: Default::default(),
                input: intent.input.clone(),
            },
            floor,
            record: NewTransaction {
                id: Uuid::now_v7(),
                user_id: w.user_id,
                wallet_id: w.id,
                chain: chain.slug().to_owned(),
                chain_id: chain.chain_id(),
                kind: intent.kind,
                from: w.address.clone(),
                to: intent.beneficiary.unwrap_or(intent.to).to_checksum(None),
                asset: intent.asset,
                token: intent.token.map(|t| t.to_checksum(None)),
                amount: intent.amount.map(|a| a.to_string()),
                request: intent.request,
                hash: String::new(),
                nonce: None,
                signed_payload: Vec::new(),
                idempotency_key: ticket.map(|t| t.claim.key),
                note: None,
                valid_until: None,
                held_until: Some(self.broadcasts.hold_until()),
            },
            claim: ticket.map(|t| t.claim.clone()),
        };
        let (open, outcome) = self.sign_in_lane(draft).await?;
        super::note_claimed(ticket, open.id, &Submission::of(chain, &open))?;
        self.first_broadcast(chain, wallet, &client, open, outcome)
            .await
    }

    /// The chain's pending nonce for a wallet the ledger has no row for yet (its first
    /// send through the service); `None` once the ledger knows it.
    async fn nonce_floor(
        &self,
        chain: &Chain,
        client: &EvmClient,
        from: Address,
        address: &str,
    ) -> Result<Option<u64>> {
        let key = (chain.chain_id(), address.to_owned());
        if self.lanes.known(&key) {
            return Ok(None);
        }
        if self.store.has_nonce_row(chain.chain_id(), address).await? {
            self.lanes.learn(key);
            return Ok(None);
        }
        Ok(Some(client.pending_nonce(from).await?))
    }

    /// Queues `draft` in its wallet's signing lane and waits until it is signed, stored and
    /// broadcast once.
    ///
    /// Every wallet's sends pass through one lane per core: whatever queued while the
    /// previous batch was being written is signed and stored in one database transaction
    /// (one durable commit for the batch instead of one per send; see `sign_batch` for how a
    /// lost idempotency claim or a signer error undoes only that send). Once committed, the batch is broadcast in nonce order as one JSON-RPC batch,
    /// after the lane's previous batch, while the next batch is being signed: the node sees
    /// the wallet's nonces in order. The drainer runs on its own task: a caller that goes
    /// away after queueing still gets its transaction stored and sent.
    async fn sign_in_lane(&self, draft: Draft) -> Result<Sent> {
        let key = (draft.record.chain_id, draft.record.from.clone());
        let (reply, answer) = oneshot::channel();
        if self.lanes.push(key.clone(), draft, reply) {
            let this = self.clone();
            tokio::spawn(async move { this.drain(key).await });
        }
        answer.await.map_err(|_| {
            WalletOpsError::Internal(anyhow::anyhow!("the signing lane ended without an answer"))
        })?
    }

    /// Signs, stores and broadcasts the batches of lane `key` until it is empty.
    async fn drain(&self, key: LaneKey) {
        let mut guard = LaneGuard {
            lanes: &self.lanes,
            key: &key,
            armed: true,
        };
        let mut sending: Option<tokio::task::JoinHandle<()>> = None;
        loop {
            let batch = match self.lanes.next_batch(&key, sending.is_some()) {
                Take::Batch(batch) => batch,
                Take::Idle => {
                    if let Some(previous) = sending.take() {
                        let _ = previous.await;
                    }
                    continue;
                }
                Take::Closed => break,
            };
            let client = batch[0].0.client.clone();
            let committed = self.sign_batch(batch).await;
            if committed.is_empty() {
                continue;
            }
            let (this, previous) = (self.clone(), sending.take());
            sending = Some(tokio::spawn(async move {
                if let Some(previous) = previous {
                    let _ = previous.await;
                }
                this.broadcast_batch(client, committed).await;
            }));
        }
        guard.armed = false;
    }

    /// Sends a committed batch in nonce order and answers each waiter with its outcome.
    async fn broadcast_batch(&self, client: EvmClient, committed: Committed) {
        // The crash tests stop the process here: signed and stored, not yet broadcast.
        fail::fail_point!("evm-before-broadcast");
        let payloads: Vec<&[u8]> = committed
            .iter()
            .map(|(open, _)| open.signed_payload.as_slice())
            .collect();
        let outcomes = client.broadcast_all(&payloads).await;
        for ((open, reply), outcome) in committed.into_iter().zip(outcomes) {
            let accepted = outcome == BroadcastOutcome::Accepted;
            if accepted {
                self.broadcasts.note(open.id);
            }
            let id = open.id;
            // A request that went away (its caller disconnected, its deadline passed) does
            // not follow its send up: the monitor does, at once rather than once the hold
            // runs out.
            if reply.send(Ok((open, outcome))).is_err() && !accepted {
                self.broadcasts.hand_over(id).await;
            }
        }
    }

    /// Signs and stores `batch` in one database transaction and answers the waiters of the
    /// sends it refused; returns the committed ones, in nonce order.
    ///
    /// The batch takes a run of nonces with one UPDATE, stores its records with one INSERT
    /// and claims their keys with another. A send whose key is claimed already (a concurrent
    /// twin won it) or that the signer refuses is refused alone: the database transaction is
    /// rolled back and the others are signed again with a shorter run, so no nonce is lost.
    async fn sign_batch(&self, batch: Vec<Queued>) -> Committed {
        // Refusals are answered after the commit: a twin whose claim lost to another send of
        // this batch looks the winner's response up, which is visible only then.
        let mut refused = Vec::new();
        let mut keys = HashSet::new();
        let mut drafts = Vec::with_capacity(batch.len());
        for (draft, reply) in batch {
            match &draft.claim {
                Some(claim) if !keys.insert((claim.user, claim.key)) => {
                    refused.push((reply, super::claimed_elsewhere(claim)));
                }
                _ => drafts.push((draft, reply)),
            }
        }
        let stored = loop {
            if drafts.is_empty() {
                break Ok(Vec::new());
            }
            match self.try_sign_batch(&drafts).await {
                Ok(Attempt::Stored(txn, opens)) => break txn.commit().await.map(|()| opens),
                Ok(Attempt::Refused(txn, losers)) => {
                    if let Err(e) = txn.rollback().await {
                        break Err(e);
                    }
                    // Highest index first, so the lower ones stay valid.
                    for (i, err) in losers.into_iter().rev() {
                        let (_, reply) = drafts.remove(i);
                        refused.push((reply, err));
                    }
                }
                Err(e) => break Err(e),
            }
        };
        for (reply, e) in refused {
            let _ = reply.send(Err(e));
        }
        match stored {
            Ok(opens) => {
                if let Some(open) = opens.first() {
                    self.lanes.learn((open.chain_id, open.from.clone()));
                }
                opens
                    .into_iter()
                    .zip(drafts)
                    .map(|(open, (_, reply))| (open, reply))
                    .collect()
            }
            Err(e) => {
                for (_, reply) in drafts {
                    let _ = reply.send(Err(batch_failed(&e)));
                }
                Vec::new()
            }
        }
    }

    /// One try at `sign_batch`: the open database transaction with the records stored and the
    /// keys claimed, or with the sends to refuse (ascending indexes) and why.
    async fn try_sign_batch(
        &self,
        drafts: &[Queued],
    ) -> std::result::Result<Attempt, sea_orm::DbErr> {
        let first = &drafts[0].0;
        let txn = self.store.begin().await?;
        let floor = drafts.iter().filter_map(|(d, _)| d.floor).max();
        let start = match self
            .store
            .allocate_nonce(
                &txn,
                first.record.chain_id,
                &first.record.from,
                floor,
                drafts.len() as u64,
            )
            .await
        {
            Ok(start) => start,
            Err(e) => return Ok(Attempt::refuse_all(txn, drafts.len(), &e)),
        };
        let mut records = Vec::with_capacity(drafts.len());
        let mut losers = Vec::new();
        for (i, (draft, _)) in drafts.iter().enumerate() {
            let nonce = start + i as u64;
            let mut tx = draft.tx.clone();
            tx.nonce = nonce;
            match self.sign(&draft.wallet, tx).await {
                Ok((payload, hash)) => {
                    let mut record = draft.record.clone();
                    record.nonce = Some(nonce);
                    record.hash = hash;
                    record.signed_payload = payload;
                    record.note = Some(format!("signed with nonce {nonce}"));
                    records.push(record);
                }
                Err(e) => losers.push((i, e)),
            }
        }
        if !losers.is_empty() {
            return Ok(Attempt::Refused(txn, losers));
        }
        let opens = match self.store.insert_transactions(&txn, records).await {
            Ok(opens) => opens,
            Err(e) => return Ok(Attempt::refuse_all(txn, drafts.len(), &e)),
        };
        let mut rows = Vec::new();
        for ((draft, _), open) in drafts.iter().zip(&opens) {
            if let Some(claim) = &draft.claim {
                match super::succeeded_claim(claim, open.id, &Submission::of(&draft.chain, open)) {
                    Ok(row) => rows.push(row),
                    Err(e) => return Ok(Attempt::refuse_all(txn, drafts.len(), &e)),
                }
            }
        }
        let claims = rows.len();
        let won = match self.store.insert_idempotency_keys(&txn, rows).await {
            Ok(won) => won,
            Err(e) => return Ok(Attempt::refuse_all(txn, drafts.len(), &e)),
        };
        if won.len() < claims {
            let losers = drafts
                .iter()
                .enumerate()
                .filter_map(|(i, (draft, _))| {
                    let claim = draft.claim.as_ref()?;
                    (!won.contains(&(claim.user, claim.key)))
                        .then(|| (i, super::claimed_elsewhere(claim)))
                })
                .collect();
            return Ok(Attempt::Refused(txn, losers));
        }
        Ok(Attempt::Stored(txn, opens))
    }

    /// Follows up the first broadcast of a freshly stored transaction.
    ///
    /// Once the record is stored, the only error is a definite refusal that was recorded (the
    /// record FAILED, its nonce freed). Anything else that goes wrong on the way answers with
    /// the submission and leaves the record to the monitor: an error would mark the key's
    /// claim failed and send the caller to retry with a new key, while the monitor still
    /// sends the stored transaction, and the payment would go out twice. So does a nonce
    /// another transaction took (the wallet was used outside the service): a new nonce is
    /// the monitor's to sign, once that sight has lasted, since a gateway that retried the
    /// send may have had it mined through a node the next call does not reach, and signing
    /// now would pay twice.
    async fn first_broadcast(
        &self,
        chain: &Chain,
        wallet: &DelegatedWallet,
        client: &EvmClient,
        open: OpenTransaction,
        answer: BroadcastOutcome,
    ) -> Result<Submission> {
        let id = open.id;
        let rejection = match answer {
            // The broadcast's note hands the record over.
            BroadcastOutcome::Accepted => return Ok(Submission::of(chain, &open)),
            BroadcastOutcome::Unknown(why) => {
                tracing::warn!(%id, %why, "broadcast outcome unknown; the monitor takes over");
                self.broadcasts.hand_over(id).await;
                return Ok(Submission::of(chain, &open));
            }
            BroadcastOutcome::Rejected(rejection) => rejection,
        };
        let answer = self
            .after_refusal(chain, wallet, client, &open, rejection)
            .await;
        self.broadcasts.hand_over(id).await;
        answer
    }

    /// Follows up a refusal of the first broadcast of `open`: the record failed and its
    /// nonce freed, or left to the monitor.
    async fn after_refusal(
        &self,
        chain: &Chain,
        wallet: &DelegatedWallet,
        client: &EvmClient,
        open: &OpenTransaction,
        rejection: Rejection,
    ) -> Result<Submission> {
        let id = open.id;
        // Whether the node holds one of the record's versions, which makes the refusal a
        // duplicate's: the nonce checks ask that first, any other refusal asks it here.
        let held = match &rejection {
            Rejection::NonceTooLow(why) | Rejection::Underpriced(why) => {
                match self
                    .resign_with_new_nonce(chain, None, client, open, why, 1)
                    .await
                {
                    Ok(Resign::HeldByRecord) => true,
                    // Nothing holds the nonce, by the node's pending nonce: an "underpriced"
                    // was about the transaction itself (a fee under the node's minimum), which
                    // fails it like any other refusal. A "nonce too low" says the opposite of
                    // that pending nonce: two nodes behind one gateway disagree, and one of
                    // them may have the transaction mined, so the monitor follows it up.
                    Ok(Resign::NonceFree) if matches!(rejection, Rejection::Underpriced(_)) => {
                        false
                    }
                    Ok(
                        Resign::NonceFree
                        | Resign::Resigned
                        | Resign::Shallow
                        | Resign::Unneeded
                        | Resign::Due,
                    ) => {
                        tracing::info!(%id, %why, "the nonce is taken; the monitor follows the record up");
                        return Ok(Submission::of(chain, open));
                    }
                    Err(e) => return Ok(handed_over(chain, open, &e)),
                }
            }
            _ => match held_by_node(client, open).await {
                Ok(held) => held,
                Err(e) => return Ok(handed_over(chain, open, &e)),
            },
        };
        if held {
            tracing::warn!(%id, ?rejection, "the node refused a transaction it holds; taken as sent");
            self.broadcasts.note(id);
            return Ok(Submission::of(chain, open));
        }
        let err = match rejection {
            Rejection::InsufficientFunds(m) => {
                WalletOpsError::InsufficientFunds(format!("the node refused the transaction: {m}"))
            }
            Rejection::NonceTooLow(m) | Rejection::Underpriced(m) | Rejection::Other(m) => {
                WalletOpsError::SendFailed(format!("the node refused the transaction: {m}"))
            }
        };
        match self
            .fail_and_free_nonce(
                chain,
                wallet,
                client,
                open,
                TxStatus::Failed,
                &err.to_string(),
                Ending::Answered(&err),
            )
            .await
        {
            Ok(true) => Err(err),
            // The request's hold ran out and the monitor took the record up: it is its to
            // finish.
            Ok(false) => Ok(Submission::of(chain, open)),
            Err(e) => Ok(handed_over(chain, open, &e)),
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
    /// earlier send of the record's own version is mined in its place. Without `wallet`,
    /// nothing is signed: `Due` says it would be.
    pub(crate) async fn resign_with_new_nonce(
        &self,
        chain: &Chain,
        wallet: Option<&DelegatedWallet>,
        client: &EvmClient,
        open: &OpenTransaction,
        why: &str,
        depth: u64,
    ) -> Result<Resign> {
        if held_by_node(client, open).await? {
            return Ok(Resign::HeldByRecord);
        }
        let from = parse_address(&open.from)?;
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
        let Some(wallet) = wallet else {
            return Ok(Resign::Due);
        };
        let mut tx = decode_payload(&open.signed_payload)?;
        self.signer.prepare(wallet).await?;
        let txn = self.store.begin().await?;
        let nonce = self
            .store
            .allocate_nonce(&txn, chain.chain_id(), &open.from, Some(pending), 1)
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
        Ok(Resign::Resigned)
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
        // Read before the database transaction, which must not wait on the node.
        let now = client.fees().await?;
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
                    .release_nonce(&txn, chain.chain_id(), &open.from, nonce)
                    .await?;
            if !released {
                let failed = decode_payload(&open.signed_payload)?;
                // The filler may have to displace the failed version from a pool, and must
                // not be refused for the fee the failed one was refused for: it pays at
                // least the current fees and a replacement's raise over the failed one.
                let raised = |v: u128| v.saturating_mul(110).div_ceil(100);
                let fees = Fees {
                    max_fee_per_gas: raised(failed.max_fee_per_gas).max(now.max_fee_per_gas),
                    max_priority_fee_per_gas: raised(failed.max_priority_fee_per_gas)
                        .max(now.max_priority_fee_per_gas),
                };
                let note = format!("fills nonce {nonce} of transaction {}", open.id);
                self.insert_filler(&txn, chain, wallet, open, nonce, fees, note)
                    .await?;
            }
        }
        txn.commit().await?;
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
        if store
            .nonce_held_open(store.db(), open.chain_id, &open.from, nonce)
            .await?
        {
            return Ok(false);
        }
        self.signer.prepare(wallet).await?;
        let fees = client.fees().await?;
        let txn = store.begin().await?;
        store
            .lock_nonce_row(&txn, open.chain_id, &open.from)
            .await?;
        if store
            .nonce_held_open(&txn, open.chain_id, &open.from, nonce)
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
        Ok(true)
    }

    /// Signs and stores, in `txn`, a zero-value self-transfer from the wallet of `open` at
    /// `nonce`, paying `fees` but never more than the cap.
    #[allow(clippy::too_many_arguments)]
    async fn insert_filler(
        &self,
        txn: &sea_orm::DatabaseTransaction,
        chain: &Chain,
        wallet: &DelegatedWallet,
        open: &OpenTransaction,
        nonce: u64,
        fees: Fees,
        note: String,
    ) -> Result<()> {
        let from = parse_address(&open.from)?;
        let max_fee_per_gas = fees.max_fee_per_gas.min(self.fee_cap);
        let filler = TxEip1559 {
            chain_id: evm_chain_id(chain)?,
            nonce,
            gas_limit: TRANSFER_GAS,
            max_fee_per_gas,
            max_priority_fee_per_gas: fees.max_priority_fee_per_gas.min(max_fee_per_gas),
            to: call_to(from),
            value: U256::ZERO,
            access_list: Default::default(),
            input: Bytes::new(),
        };
        let (payload, hash) = self.sign(wallet, filler).await?;
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
                    note: Some(note),
                    valid_until: None,
                    held_until: None,
                },
            )
            .await?;
        Ok(())
    }
}
