//! The REST contract's JSON shapes that the core writes too: a transaction record with its
//! status history, as `GET /tx/{id}` gives it, and a deposit, as `GET /deposits/{id}` gives
//! it, and a payout, all as webhooks deliver them (in their envelope), and the value
//! spellings every shape uses (ISO 8601 timestamps, enum names without their prefix). The
//! edge serves them; the core's webhook bodies are made with the same code.

use chrono::{DateTime, SecondsFormat};
use serde::Serialize;
use utoipa::ToSchema;

use crate::v1 as pb;

mod payouts;

pub use payouts::{PayoutItemJson, PayoutJson};

/// ISO 8601 with milliseconds, UTC (`2026-11-23T02:15:19.123Z`), as the spec asks.
pub fn iso(ts: Option<prost_types::Timestamp>) -> Option<String> {
    let ts = ts?;
    DateTime::from_timestamp(ts.seconds, u32::try_from(ts.nanos).unwrap_or_default())
        .map(|t| t.to_rfc3339_opts(SecondsFormat::Millis, true))
}

/// `iso`, or the empty string for no timestamp.
pub fn iso_or_empty(ts: Option<prost_types::Timestamp>) -> String {
    iso(ts).unwrap_or_default()
}

/// A protobuf enum value's name without its type's `prefix` (`TRANSACTION_STATUS_SUBMITTED`
/// is `SUBMITTED`); `UNSPECIFIED` for a value this build does not know.
pub fn short_name<E>(name: Result<&str, E>, prefix: &str) -> String {
    name.map_or_else(
        |_| "UNSPECIFIED".to_owned(),
        |n| n.trim_start_matches(prefix).to_owned(),
    )
}

/// One step of a transaction's status history.
#[derive(Debug, Serialize, ToSchema)]
pub struct StatusChangeJson {
    /// Status entered.
    pub status: String,
    /// When, ISO 8601 UTC.
    pub at: String,
    /// Why, when there is something to say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A transaction record.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TransactionJson {
    /// Service transaction id.
    pub id: String,
    /// Chain slug.
    pub chain: String,
    /// Numeric chain id (Solana: 0 mainnet, -2 testnet, -3 devnet).
    pub chain_id: i64,
    /// Display name of the chain.
    pub chain_name: String,
    /// `send`, `approve`, `contract_call` or `swap`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Sender.
    pub from: String,
    /// Recipient, token or contract.
    pub to: String,
    /// `native`, `erc20` or `spl` for transfers.
    pub asset: Option<String>,
    /// Token address or mint.
    pub token: Option<String>,
    /// Amount in base units.
    pub amount: Option<String>,
    /// `SUBMITTED`, `CONFIRMED`, `REVERTED`, `FAILED`, `DROPPED` or `FEE_CAPPED`.
    pub status: String,
    /// Every status, oldest first.
    pub status_history: Vec<StatusChangeJson>,
    /// Hash or signature.
    pub hash: Option<String>,
    /// Explorer link.
    pub explorer_url: Option<String>,
    /// Why it failed, reverted or was dropped.
    pub error: Option<String>,
    /// Accepted at.
    pub created_at: String,
    /// Last changed at.
    pub updated_at: String,
    /// Swaps only: the token sold, as the aggregator names it (never `NATIVE`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_token: Option<String>,
    /// Swaps only: the token bought.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to_token: Option<String>,
    /// Swaps only: how much was sold, in base units.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub src_amount: Option<String>,
    /// Swaps only: what the quote said it buys, in base units, before slippage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dst_amount: Option<String>,
    /// Swaps only: the least the caller accepted (`dstAmount` less the slippage).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_dst_amount: Option<String>,
    /// What its simulation showed it does to the wallet, before it was signed; null when
    /// not read.
    pub simulated_effects: Option<EffectsJson>,
    /// What it did to the wallet, read from the chain once final; null until then. A
    /// reverted or failed transaction moved nothing (its fee aside).
    pub final_effects: Option<EffectsJson>,
    /// How the two differ, per asset; null when they agree or either is not known.
    pub effects_difference: Option<String>,
    /// Whether it ran through its wallet's guard, whose checks revert it on chain when it
    /// moves more than its key reserved.
    pub guarded: bool,
}

/// What a transaction does to its wallet, per asset.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EffectsJson {
    /// What leaves the wallet, in the order it happens.
    pub outflows: Vec<FlowJson>,
    /// What comes in.
    pub inflows: Vec<FlowJson>,
    /// Holds on the wallet's assets granted to another account.
    pub grants: Vec<GrantJson>,
}

/// One move of an asset.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FlowJson {
    /// `native`, a token's address (lowercase) or a mint.
    #[schema(example = "native")]
    pub asset: String,
    /// The receiver of an outflow, the sender of an inflow.
    pub counterparty: String,
    /// Base units (1 per non-fungible token).
    #[schema(example = "1000")]
    pub amount: String,
    /// A non-fungible token's id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_id: Option<String>,
}

/// A hold granted on the wallet's assets.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GrantJson {
    /// `allowance`, `token`, `all`, `delegation` or `authority`.
    #[schema(example = "allowance")]
    pub kind: String,
    /// The asset held.
    pub asset: String,
    /// Who gets it.
    pub spender: String,
    /// Base units; null when unlimited.
    pub amount: Option<String>,
}

impl From<pb::Effects> for EffectsJson {
    fn from(e: pb::Effects) -> Self {
        let flow = |f: pb::Flow| FlowJson {
            asset: f.asset,
            counterparty: f.counterparty,
            amount: f.amount,
            token_id: f.token_id,
        };
        Self {
            outflows: e.outflows.into_iter().map(flow).collect(),
            inflows: e.inflows.into_iter().map(flow).collect(),
            grants: e
                .grants
                .into_iter()
                .map(|g| GrantJson {
                    kind: g.kind,
                    asset: g.asset,
                    spender: g.spender,
                    amount: g.amount,
                })
                .collect(),
        }
    }
}

fn status_name(s: i32) -> String {
    let status = pb::TransactionStatus::try_from(s).map(|s| s.as_str_name());
    short_name(status, "TRANSACTION_STATUS_")
}

impl From<pb::Transaction> for TransactionJson {
    fn from(t: pb::Transaction) -> Self {
        let kind = pb::TransactionKind::try_from(t.kind)
            .map(|k| {
                k.as_str_name()
                    .trim_start_matches("TRANSACTION_KIND_")
                    .to_ascii_lowercase()
            })
            .unwrap_or_default();
        Self {
            id: t.id,
            chain: t.chain,
            chain_id: t.chain_id,
            chain_name: t.chain_name,
            kind,
            from: t.from,
            to: t.to,
            asset: t.asset,
            token: t.token,
            amount: t.amount,
            status: status_name(t.status),
            status_history: t
                .status_history
                .into_iter()
                .map(|c| StatusChangeJson {
                    status: status_name(c.status),
                    at: iso_or_empty(c.at),
                    note: c.note,
                })
                .collect(),
            hash: t.hash,
            explorer_url: t.explorer_url,
            error: t.error,
            created_at: iso_or_empty(t.created_at),
            updated_at: iso_or_empty(t.updated_at),
            from_token: t.from_token,
            to_token: t.to_token,
            src_amount: t.src_amount,
            dst_amount: t.dst_amount,
            min_dst_amount: t.min_dst_amount,
            simulated_effects: t.simulated_effects.map(EffectsJson::from),
            final_effects: t.final_effects.map(EffectsJson::from),
            effects_difference: t.effects_difference,
            guarded: t.guarded,
        }
    }
}

/// A deposit: one credit of one asset to one of the caller's wallets.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DepositJson {
    /// Deposit id, derived from where it happened (the same credit is never recorded twice).
    pub id: String,
    /// Chain slug.
    pub chain: String,
    /// Display name of the chain.
    pub chain_name: String,
    /// The wallet credited.
    pub wallet_id: String,
    /// The wallet's address.
    pub address: String,
    /// `native`, the token's address (EVM, lowercase) or its mint.
    pub asset: String,
    /// Base units.
    pub amount: String,
    /// The asset's decimals, when known.
    pub decimals: Option<u32>,
    /// The asset's symbol, when known.
    pub symbol: Option<String>,
    /// The sender, when the chain names one.
    pub from: Option<String>,
    /// The transaction's hash or signature.
    pub hash: String,
    /// Block number (EVM) or slot (Solana).
    pub block: u64,
    /// `PENDING`, `CONFIRMED`, `REVERTED` or `IGNORED`.
    pub state: String,
    /// Why it is ignored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ignored_reason: Option<String>,
    /// Explorer link.
    pub explorer_url: Option<String>,
    /// First seen at.
    pub created_at: String,
    /// Last changed state at.
    pub updated_at: String,
}

impl From<pb::Deposit> for DepositJson {
    fn from(d: pb::Deposit) -> Self {
        Self {
            state: short_name(
                pb::DepositState::try_from(d.state).map(|s| s.as_str_name()),
                "DEPOSIT_STATE_",
            ),
            id: d.id,
            chain: d.chain,
            chain_name: d.chain_name,
            wallet_id: d.wallet_id,
            address: d.address,
            asset: d.asset,
            amount: d.amount,
            decimals: d.decimals,
            symbol: d.symbol,
            from: d.from,
            hash: d.hash,
            block: d.block,
            ignored_reason: d.ignored_reason,
            explorer_url: d.explorer_url,
            created_at: iso_or_empty(d.created_at),
            updated_at: iso_or_empty(d.updated_at),
        }
    }
}

/// What a webhook event is about: a transaction record or a deposit, as their `GET` gives
/// them.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum EventDataJson {
    /// `transaction.*` events.
    Transaction(Box<TransactionJson>),
    /// `deposit.*` events.
    Deposit(Box<DepositJson>),
    /// `payout.completed`: the payout with its totals, without its items.
    Payout(Box<PayoutJson>),
    /// `key.frozen`: the key line and why it froze.
    Key(Box<FrozenKeyJson>),
}

/// A frozen key line, as the `key.frozen` webhook tells it.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FrozenKeyJson {
    /// The line: the id of its first key; every key made from it is frozen with it.
    pub key_id: String,
    /// When it froze, RFC 3339 UTC.
    pub frozen_at: String,
    /// What the write moved beyond its reservation.
    pub reason: String,
    /// The write that moved it.
    pub transaction_id: String,
}

/// What an event is about, from the core.
#[derive(Debug)]
pub enum EventData {
    /// A transaction record.
    Transaction(Box<pb::Transaction>),
    /// A deposit.
    Deposit(Box<pb::Deposit>),
    /// A payout.
    Payout(Box<pb::Payout>),
    /// A frozen key line.
    Key(Box<FrozenKeyJson>),
}

/// A webhook delivery's body: the Standard Webhooks envelope around the record.
#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookEventJson {
    /// The event type, e.g. `transaction.confirmed` or `deposit.pending`.
    #[serde(rename = "type")]
    pub event_type: String,
    /// When the change happened, RFC 3339 UTC with milliseconds (not when it was sent).
    pub timestamp: String,
    /// The record as `GET /tx/{id}` (or the deposit as `GET /deposits/{id}`) gives it, in the
    /// status the event is about.
    pub data: EventDataJson,
}

/// A webhook delivery's body, in JSON: the `event_type` event of `data`, which happened `at`.
pub fn webhook_body(
    event_type: String,
    at: chrono::DateTime<chrono::Utc>,
    data: EventData,
) -> Vec<u8> {
    let event = WebhookEventJson {
        event_type,
        timestamp: at.to_rfc3339_opts(SecondsFormat::Millis, true),
        data: match data {
            EventData::Transaction(t) => {
                EventDataJson::Transaction(Box::new(TransactionJson::from(*t)))
            }
            EventData::Deposit(d) => EventDataJson::Deposit(Box::new(DepositJson::from(*d))),
            EventData::Payout(p) => EventDataJson::Payout(Box::new(PayoutJson::from(*p))),
            EventData::Key(k) => EventDataJson::Key(k),
        },
    };
    serde_json::to_vec(&event).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_iso_with_millis_utc() {
        let ts = prost_types::Timestamp {
            seconds: 1_795_400_119,
            nanos: 123_456_789,
        };
        assert_eq!(iso(Some(ts)).as_deref(), Some("2026-11-23T02:15:19.123Z"));
    }
}
