//! Transaction records: what the service submitted for a user, and where each stands.

use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::{
    error::{Result, WalletOpsError},
    store::{Store, entities::transactions},
};

/// Where a transaction is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TxStatus {
    /// Signed and stored; being broadcast or followed by the monitor.
    Submitted,
    /// Included and succeeded.
    Confirmed,
    /// Included and reverted.
    Reverted,
    /// Rejected before reaching the chain.
    Failed,
    /// Dropped by the network.
    Dropped,
    /// Stuck, and a replacement would exceed the fee cap.
    FeeCapped,
}

/// What a transaction does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TxKind {
    /// A transfer.
    Send,
    /// An ERC20 approval.
    Approve,
    /// A contract call.
    ContractCall,
    /// A swap.
    Swap,
    /// A zero-value self-transfer that fills a nonce left behind by a failed transaction,
    /// so that later transactions of the wallet are not stranded.
    NonceFill,
}

/// One step of a status history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusChange {
    /// Status entered.
    pub status: TxStatus,
    /// When.
    pub at: DateTime<Utc>,
    /// Why, when there is something to say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A transaction record as its owner sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionRecord {
    /// Service id.
    pub id: Uuid,
    /// Chain slug.
    pub chain: String,
    /// Chain id (Solana sentinels).
    pub chain_id: i64,
    /// What it does.
    pub kind: TxKind,
    /// Sender.
    pub from: String,
    /// Recipient or contract.
    pub to: String,
    /// Asset moved, for transfers.
    pub asset: Option<String>,
    /// Token, when one is involved.
    pub token: Option<String>,
    /// Amount, in base units.
    pub amount: Option<String>,
    /// Current status.
    pub status: TxStatus,
    /// Every status, oldest first.
    pub history: Vec<StatusChange>,
    /// Hash or signature.
    pub hash: Option<String>,
    /// Why it failed, reverted or was dropped.
    pub error: Option<String>,
    /// Accepted at.
    pub created_at: DateTime<Utc>,
    /// Last changed at.
    pub updated_at: DateTime<Utc>,
}

fn corrupt(id: Uuid, what: &str) -> WalletOpsError {
    WalletOpsError::Internal(anyhow::anyhow!("transaction {id} has a bad {what}"))
}

/// The stored status and kind of `m`, read back into their enums.
fn status_and_kind(m: &transactions::Model) -> Result<(TxStatus, TxKind)> {
    let status = serde_json::from_value(serde_json::Value::String(m.status.clone()))
        .map_err(|_| corrupt(m.id, "status"))?;
    let kind = serde_json::from_value(serde_json::Value::String(m.kind.clone()))
        .map_err(|_| corrupt(m.id, "kind"))?;
    Ok((status, kind))
}

impl TryFrom<transactions::Model> for TransactionRecord {
    type Error = WalletOpsError;

    fn try_from(m: transactions::Model) -> Result<Self> {
        let id = m.id;
        let corrupt = |what: &str| corrupt(id, what);
        let (status, kind) = status_and_kind(&m)?;
        let history =
            serde_json::from_value(m.status_history.clone()).map_err(|_| corrupt("history"))?;
        Ok(Self {
            id: m.id,
            chain: m.chain,
            chain_id: m.chain_id,
            kind,
            from: m.from_address,
            to: m.to_address,
            asset: m.asset,
            token: m.token,
            amount: m.amount,
            status,
            history,
            hash: m.hash,
            error: m.error,
            created_at: m.created_at,
            updated_at: m.updated_at,
        })
    }
}

/// An open transaction as the write pipeline and the monitor see it.
#[derive(Debug, Clone)]
pub struct OpenTransaction {
    /// Service id.
    pub id: Uuid,
    /// Owner.
    pub user_id: Uuid,
    /// Sending wallet.
    pub wallet_id: Uuid,
    /// Chain slug.
    pub chain: String,
    /// Chain id.
    pub chain_id: i64,
    /// What it does.
    pub kind: TxKind,
    /// Current status.
    pub status: TxStatus,
    /// Sender address.
    pub from: String,
    /// EVM nonce.
    pub nonce: Option<u64>,
    /// The current signed bytes.
    pub signed_payload: Vec<u8>,
    /// Every hash broadcast, oldest first; the last is the current payload's.
    pub hashes: Vec<String>,
    /// The status history as stored.
    pub history: serde_json::Value,
    /// When the current payload was last sent.
    pub last_broadcast_at: Option<DateTime<Utc>>,
    /// When the record was made.
    pub created_at: DateTime<Utc>,
    /// Solana: the last block height at which the payload's blockhash is valid.
    pub valid_until: Option<u64>,
    /// The record's revision as read: every change of status, history or payload is
    /// conditional on it.
    pub revision: i64,
}

impl TryFrom<transactions::Model> for OpenTransaction {
    type Error = WalletOpsError;

    fn try_from(m: transactions::Model) -> Result<Self> {
        let id = m.id;
        let corrupt = |what: &str| corrupt(id, what);
        let (status, kind) = status_and_kind(&m)?;
        let hashes = serde_json::from_value(m.hashes.clone()).map_err(|_| corrupt("hashes"))?;
        Ok(Self {
            id: m.id,
            user_id: m.user_id,
            wallet_id: m.wallet_id,
            chain: m.chain,
            chain_id: m.chain_id,
            kind,
            status,
            from: m.from_address,
            nonce: m
                .nonce
                .map(|n| u64::try_from(n).map_err(|_| corrupt("nonce")))
                .transpose()?,
            signed_payload: m.signed_payload.unwrap_or_default(),
            hashes,
            history: m.status_history,
            last_broadcast_at: m.last_broadcast_at,
            created_at: m.created_at,
            valid_until: m
                .valid_until_height
                .map(|n| u64::try_from(n).map_err(|_| corrupt("valid_until_height")))
                .transpose()?,
            revision: m.revision,
        })
    }
}

/// Transaction lookups.
#[derive(Debug, Clone)]
pub struct Transactions {
    store: Store,
}

impl Transactions {
    /// Lookups over `store`.
    pub fn new(store: Store) -> Self {
        Self { store }
    }

    /// The caller's transaction `id`. A malformed id is `INVALID_INPUT`; an unknown id and
    /// another user's transaction are both `NOT_FOUND`.
    pub async fn get(&self, user_id: Uuid, id: &str) -> Result<TransactionRecord> {
        let id = Uuid::from_str(id.trim())
            .map_err(|_| WalletOpsError::invalid("id", "must be a transaction id (a UUID)"))?;
        self.store
            .find_transaction(user_id, id)
            .await?
            .ok_or_else(|| WalletOpsError::NotFound(format!("no transaction {id}")))
    }
}
