//! Transaction records, their statuses and kinds, and the answer a write gives.

use std::{fmt, str::FromStr};

use alloy::primitives::B256;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use solana_signature::Signature;
use uuid::Uuid;

use super::{Effects, WalletAddress};

/// Where a transaction is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
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

impl TxStatus {
    /// The status as stored and shown (`confirmed`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Submitted => "submitted",
            Self::Confirmed => "confirmed",
            Self::Reverted => "reverted",
            Self::Failed => "failed",
            Self::Dropped => "dropped",
            Self::FeeCapped => "fee_capped",
        }
    }

    /// Every status, in the order a record may pass through them.
    pub const ALL: [Self; 6] = [
        Self::Submitted,
        Self::Confirmed,
        Self::Reverted,
        Self::Failed,
        Self::Dropped,
        Self::FeeCapped,
    ];

    /// The type of the event of entering this status (`transaction.confirmed`), as watchers
    /// and webhooks name it.
    pub fn event_type(self) -> String {
        format!("transaction.{}", self.as_str())
    }

    /// The status whose event type is `name`.
    pub fn from_event_type(name: &str) -> Option<Self> {
        let status = name.strip_prefix("transaction.")?;
        Self::ALL.into_iter().find(|s| s.as_str() == status)
    }

    /// Whether a record in this status is final (until a reorganisation reopens it). A
    /// fee-capped record is still followed: it may yet be mined.
    pub fn is_final(self) -> bool {
        !matches!(self, Self::Submitted | Self::FeeCapped)
    }
}

impl TxKind {
    /// The kind as stored (`contract_call`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Send => "send",
            Self::Approve => "approve",
            Self::ContractCall => "contract_call",
            Self::Swap => "swap",
            Self::NonceFill => "nonce_fill",
        }
    }
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

/// What a swap traded, as quoted when it was signed: kept with its record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SwapTerms {
    /// The token sold, as the aggregator names it (never `NATIVE`).
    pub from_token: String,
    /// The token bought.
    pub to_token: String,
    /// How much is sold, in base units.
    pub src_amount: String,
    /// What the quote said it buys, in base units.
    pub dst_amount: String,
    /// The least the caller accepted: `dst_amount` less the slippage. The swap reverts below.
    pub min_dst_amount: String,
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
    /// For a swap: what it traded.
    pub swap: Option<SwapTerms>,
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
    /// What its simulation showed it does to the wallet, before it was signed.
    pub simulated_effects: Option<Effects>,
    /// What it did, read from the chain once final.
    pub final_effects: Option<Effects>,
    /// How the two differ; `None` when they agree or one is not known.
    pub effects_difference: Option<String>,
    /// Whether it ran through its wallet's guard, which reverts it on chain when it moves
    /// more than its key reserved.
    pub guarded: bool,
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
    pub from: WalletAddress,
    /// EVM nonce.
    pub nonce: Option<u64>,
    /// The current signed bytes.
    pub signed_payload: Vec<u8>,
    /// Every hash broadcast, oldest first; the last is the current payload's.
    pub hashes: Vec<TxHash>,
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
    /// What its simulation showed it does to the wallet, as stored (JSON `Effects`): read
    /// only when the record settles, not at every sweep that leases it.
    pub simulated_effects: Option<String>,
}

/// The submission result of a write, as the contract gives it (its `status` is always
/// `SUBMITTED`). Stored under the idempotency key and replayed as is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Submission {
    /// Service transaction id.
    pub id: Uuid,
    /// Hash or signature, once signed.
    pub hash: Option<String>,
    /// Explorer link, once a hash exists.
    pub explorer_url: Option<String>,
    /// Display name of the chain.
    pub chain_name: String,
}

/// A transaction's hash (EVM) or signature (Solana), as broadcast.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TxHash {
    /// An EVM transaction hash.
    Evm(B256),
    /// A Solana transaction signature.
    Solana(Signature),
}

impl fmt::Display for TxHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Evm(h) => write!(f, "{h}"),
            Self::Solana(s) => write!(f, "{s}"),
        }
    }
}

impl FromStr for TxHash {
    type Err = ();

    /// Either form as stored: 0x-hex (EVM) or base58 (Solana, whose alphabet has no `0`).
    fn from_str(s: &str) -> Result<Self, ()> {
        match s.strip_prefix("0x") {
            Some(_) => B256::from_str(s).map(Self::Evm).map_err(drop),
            None => Signature::from_str(s).map(Self::Solana).map_err(drop),
        }
    }
}

/// The state of an idempotency key's claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimState {
    /// Its request stored a transaction and has an answer: replayed as is.
    Succeeded,
    /// Its request failed before anything could reach the chain: the key is spent.
    Failed,
}

impl ClaimState {
    /// The state as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
        }
    }
}

impl FromStr for ClaimState {
    type Err = ();

    fn from_str(s: &str) -> Result<Self, ()> {
        match s {
            "succeeded" => Ok(Self::Succeeded),
            "failed" => Ok(Self::Failed),
            _ => Err(()),
        }
    }
}
