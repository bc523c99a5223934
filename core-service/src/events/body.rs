//! An event as a webhook tells it: the Standard Webhooks envelope (`type`, `timestamp`,
//! `data`) around its subject in the contract's shape, the same JSON the API answers
//! (`GET /tx/{id}`, `GET /deposits/{id}`, `GET /payouts/{id}`). The shapes of records,
//! deposits and payouts are made here once, for the gRPC answers and the bodies alike.

use chrono::{DateTime, Utc};
use walletops_proto::v1 as pb;

use crate::balances::Units;
use walletops_chains::Registry;
use walletops_domain::{
    Deposit, ItemStanding, Payout, PayoutState, TransactionRecord, TxKind, TxStatus,
};

/// What a delivery tells: an event, when it happened, and its subject in that state.
#[derive(Debug)]
pub struct Event {
    /// The event type, e.g. `transaction.confirmed`.
    pub event_type: String,
    /// When the change happened (not when it is sent: a retry tells the same event).
    pub at: chrono::DateTime<Utc>,
    /// What it is about, as it is now, in the state the event is about.
    pub subject: Subject,
}

/// What an event is about.
#[derive(Debug)]
pub enum Subject {
    /// A transaction record.
    Transaction(Box<TransactionRecord>),
    /// A deposit.
    Deposit(Box<Deposit>),
    /// A payout and where each of its items stands.
    Payout(Box<(Payout, Vec<ItemStanding>)>),
    /// A frozen key line.
    Key(Box<walletops_domain::FrozenLine>),
}

/// `t` to the millisecond, as the REST contract's ISO 8601 times are: both surfaces then
/// show the same instant.
pub fn timestamp(t: DateTime<Utc>) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: t.timestamp(),
        nanos: (t.timestamp_subsec_millis() * 1_000_000) as i32,
    }
}

/// The body of a delivery of `event`, amounts named with `units`.
pub fn webhook_body(event: Event, units: &Units) -> Vec<u8> {
    use walletops_proto::rest::{EventData, FrozenKeyJson};
    let data = match event.subject {
        Subject::Transaction(record) => {
            EventData::Transaction(Box::new(transaction(*record, units.chains())))
        }
        Subject::Deposit(d) => EventData::Deposit(Box::new(deposit(*d, units))),
        Subject::Payout(p) => {
            let (p, standings) = *p;
            EventData::Payout(Box::new(payout(p, standings, false)))
        }
        Subject::Key(frozen) => EventData::Key(Box::new(FrozenKeyJson {
            key_id: frozen.line_id.to_string(),
            frozen_at: frozen
                .frozen_at
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            reason: frozen.reason,
            transaction_id: frozen.transaction_id.to_string(),
        })),
    };
    walletops_proto::rest::webhook_body(event.event_type, event.at, data)
}

/// Deposit `d` as the API gives it: with its chain's name, explorer link and the asset's
/// units when known.
pub fn deposit(d: walletops_domain::Deposit, units: &Units) -> pb::Deposit {
    let (chain_name, explorer_url) = units.chains().label(&d.chain, Some(&d.tx_hash));
    let (decimals, symbol) = units.of(&d.chain, &d.asset).unzip();
    let state = match d.state {
        walletops_domain::DepositState::Pending => pb::DepositState::Pending,
        walletops_domain::DepositState::Confirmed => pb::DepositState::Confirmed,
        walletops_domain::DepositState::Reverted => pb::DepositState::Reverted,
        walletops_domain::DepositState::Ignored => pb::DepositState::Ignored,
    };
    pb::Deposit {
        id: d.id.to_string(),
        chain: d.chain,
        chain_name,
        wallet_id: d.wallet_id.to_string(),
        address: d.address,
        asset: d.asset,
        amount: d.amount,
        decimals,
        symbol,
        from: d.from,
        hash: d.tx_hash,
        block: d.block,
        state: state.into(),
        ignored_reason: d.ignored_reason,
        explorer_url,
        created_at: Some(timestamp(d.created_at)),
        updated_at: Some(timestamp(d.updated_at)),
    }
}

fn tx_status(s: TxStatus) -> pb::TransactionStatus {
    match s {
        TxStatus::Submitted => pb::TransactionStatus::Submitted,
        TxStatus::Confirmed => pb::TransactionStatus::Confirmed,
        TxStatus::Reverted => pb::TransactionStatus::Reverted,
        TxStatus::Failed => pb::TransactionStatus::Failed,
        TxStatus::Dropped => pb::TransactionStatus::Dropped,
        TxStatus::FeeCapped => pb::TransactionStatus::FeeCapped,
    }
}

fn tx_kind(k: TxKind) -> pb::TransactionKind {
    match k {
        TxKind::Send => pb::TransactionKind::Send,
        TxKind::Approve => pb::TransactionKind::Approve,
        TxKind::ContractCall => pb::TransactionKind::ContractCall,
        TxKind::Swap => pb::TransactionKind::Swap,
        TxKind::NonceFill => pb::TransactionKind::NonceFill,
    }
}

/// Record `t` with its chain's display name and explorer link from `chains`.
pub fn transaction(t: TransactionRecord, chains: &Registry) -> pb::Transaction {
    let (chain_name, explorer_url) = chains.label(&t.chain, t.hash.as_deref());
    let (decimals, symbol) = walletops_chains::amount_units(&t, chains).unzip();
    let swap = t.swap;
    pb::Transaction {
        id: t.id.to_string(),
        chain: t.chain,
        chain_id: t.chain_id,
        chain_name,
        kind: tx_kind(t.kind).into(),
        from: t.from,
        to: t.to,
        asset: t.asset,
        token: t.token,
        amount: t.amount,
        status: tx_status(t.status).into(),
        status_history: t
            .history
            .into_iter()
            .map(|c| pb::StatusChange {
                status: tx_status(c.status).into(),
                at: Some(timestamp(c.at)),
                note: c.note,
            })
            .collect(),
        hash: t.hash,
        explorer_url,
        error: t.error,
        created_at: Some(timestamp(t.created_at)),
        updated_at: Some(timestamp(t.updated_at)),
        from_token: swap.as_ref().map(|s| s.from_token.clone()),
        to_token: swap.as_ref().map(|s| s.to_token.clone()),
        src_amount: swap.as_ref().map(|s| s.src_amount.clone()),
        dst_amount: swap.as_ref().map(|s| s.dst_amount.clone()),
        min_dst_amount: swap.map(|s| s.min_dst_amount),
        simulated_effects: t.simulated_effects.as_ref().map(effects),
        final_effects: t.final_effects.as_ref().map(effects),
        effects_difference: t.effects_difference,
        guarded: t.guarded,
        decimals,
        symbol,
    }
}

/// What a transaction does to its wallet, as the API shows it.
pub fn effects(e: &walletops_domain::Effects) -> pb::Effects {
    use walletops_domain::{Flow, GrantKind};
    let flow = |f: &Flow| pb::Flow {
        asset: f.asset.name(),
        counterparty: f.counterparty.to_string(),
        amount: f.amount.to_string(),
        token_id: f.token_id.map(|id| id.to_string()),
    };
    pb::Effects {
        outflows: e.outflows.iter().map(flow).collect(),
        inflows: e.inflows.iter().map(flow).collect(),
        grants: e
            .grants
            .iter()
            .map(|g| pb::Grant {
                kind: match g.kind {
                    GrantKind::Allowance => "allowance",
                    GrantKind::Token => "token",
                    GrantKind::All => "all",
                    GrantKind::Delegation => "delegation",
                    GrantKind::Authority => "authority",
                }
                .to_owned(),
                asset: g.asset.name(),
                spender: g.spender.to_string(),
                amount: g.amount.map(|a| a.to_string()),
            })
            .collect(),
    }
}

/// `payout` as the API gives it, its items where `standings` say (without them, its totals
/// only, unless `with_items`).
pub fn payout(payout: Payout, standings: Vec<ItemStanding>, with_items: bool) -> pb::Payout {
    let mut totals = std::collections::HashMap::new();
    for s in &standings {
        *totals.entry(s.state.clone()).or_insert(0u32) += 1;
    }
    let item_count = u32::try_from(payout.items.len()).unwrap_or(u32::MAX);
    let mut transactions: Vec<uuid::Uuid> =
        standings.iter().filter_map(|s| s.transaction_id).collect();
    transactions.sort_unstable();
    transactions.dedup();
    let items = if with_items {
        payout
            .items
            .into_iter()
            .zip(standings)
            .map(|(item, s)| pb::PayoutItem {
                index: item.index,
                to: item.transfer.to().to_string(),
                asset: item.transfer.asset_name().to_owned(),
                token: item.transfer.token().map(|t| t.to_string()),
                amount: item.transfer.amount().to_string(),
                reference: item.reference,
                state: s.state,
                transaction_id: s.transaction_id.map(|t| t.to_string()),
                hash: s.hash,
                error: s.error,
                approval_id: s.approval_id.map(|a| a.to_string()),
            })
            .collect()
    } else {
        Vec::new()
    };
    let state = match payout.state {
        PayoutState::Running => pb::PayoutState::Running,
        PayoutState::Completed => pb::PayoutState::Completed,
    };
    pb::Payout {
        id: if payout.id.is_nil() {
            String::new()
        } else {
            payout.id.to_string()
        },
        chain: payout.chain,
        from: payout.from.to_string(),
        state: state.into(),
        items,
        totals,
        created_at: Some(timestamp(payout.created_at)),
        completed_at: payout.completed_at.map(timestamp),
        item_count,
        transaction_count: u32::try_from(transactions.len()).unwrap_or(u32::MAX),
        rent: payout.rent.map(|r| r.to_string()),
    }
}
