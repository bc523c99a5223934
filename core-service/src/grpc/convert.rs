//! Domain values to protobuf messages for the gRPC answers. The shapes a webhook body shares
//! with them (records, deposits, payouts) are made once, in `events/body.rs`.

use chrono::{DateTime, Utc};
use walletops_proto::{
    json::{self, Integers},
    v1 as pb,
};

pub(crate) use crate::events::body::{effects, timestamp, transaction};
use crate::{auth::KeyState, writes::Written};

use walletops_chains::Registry;
use walletops_domain::{
    ApiKey, Approval, ApprovalState, PolicyRule, RuleKind, Scope, Scopes, Submission, User, Wallet,
};

pub(crate) fn wallet(w: Wallet) -> pb::Wallet {
    pb::Wallet {
        address: w.address.to_string(),
        chain_type: w.family().as_str().to_owned(),
        is_default: w.is_default,
        automation_enabled: w.automation_enabled,
        provider_type: w.provider_type,
        client_type: w.client_type,
    }
}

pub(crate) fn api_key(k: ApiKey, now: DateTime<Utc>) -> pb::ApiKey {
    let state = match k.state(now) {
        KeyState::Active => pb::ApiKeyState::Active,
        KeyState::ExpiringSoon => pb::ApiKeyState::ExpiringSoon,
        KeyState::Expired => pb::ApiKeyState::Expired,
        KeyState::Revoked => pb::ApiKeyState::Revoked,
    };
    pb::ApiKey {
        id: k.id.to_string(),
        name: k.name,
        prefix: k.prefix,
        state: state.into(),
        created_at: Some(timestamp(k.created_at)),
        expires_at: k.expires_at.map(timestamp),
        revoked_at: k.revoked_at.map(timestamp),
        last_used_at: k.last_used_at.map(timestamp),
        created_by: k.created_by.map(|id| id.to_string()),
        scopes: scope_values(k.scopes),
        spend_limits: Vec::new(),
        policy_rules: Vec::new(),
        frozen_at: None,
        frozen_reason: None,
    }
}

/// `key` with its spend limits, each with its asset's `units` (decimals, symbol) when known.
pub(crate) fn with_limits(
    mut key: pb::ApiKey,
    limits: Vec<walletops_domain::SpendStanding>,
    units: impl Fn(&str, &str) -> Option<(u32, String)>,
) -> pb::ApiKey {
    key.spend_limits = limits
        .into_iter()
        .map(|s| {
            let (decimals, symbol) = units(&s.limit.chain, &s.limit.asset).unzip();
            pb::SpendLimit {
                left: s.left().map(|l| l.to_string()),
                spent_24h: s.spent_24h.to_string(),
                max_per_transaction: s.limit.max_per_transaction.map(|m| m.to_string()),
                daily_budget: s.limit.daily_budget.map(|d| d.to_string()),
                approval_above: s.limit.approval_above.map(|a| a.to_string()),
                chain: s.limit.chain,
                asset: s.limit.asset,
                decimals,
                symbol,
            }
        })
        .collect();
    key
}

/// `key` with its policy's rules.
pub(crate) fn with_rules(mut key: pb::ApiKey, rules: Vec<PolicyRule>) -> pb::ApiKey {
    key.policy_rules = rules.into_iter().map(policy_rule).collect();
    key
}

/// `rule` as the API shows it: addresses as the chain writes them, a contract's selector as
/// `0x` and 8 hex digits.
pub(crate) fn policy_rule(rule: PolicyRule) -> pb::PolicyRule {
    let kind = match rule.allowed.kind() {
        RuleKind::Chain => pb::PolicyRuleKind::Chain,
        RuleKind::Recipient => pb::PolicyRuleKind::Recipient,
        RuleKind::Contract => pb::PolicyRuleKind::Contract,
        RuleKind::Spender => pb::PolicyRuleKind::Spender,
        RuleKind::Token => pb::PolicyRuleKind::Token,
    };
    pb::PolicyRule {
        kind: kind.into(),
        chain: rule.chain,
        address: rule.allowed.address().map(|a| a.to_string()),
        selector: rule.allowed.selector().map(|s| s.to_string()),
    }
}

/// `scopes` as proto enum values.
pub(crate) fn scope_values(scopes: Scopes) -> Vec<i32> {
    scopes.iter().map(|s| i32::from(scope(s))).collect()
}

fn scope(s: Scope) -> pb::ApiKeyScope {
    match s {
        Scope::Read => pb::ApiKeyScope::Read,
        Scope::Trade => pb::ApiKeyScope::Trade,
        Scope::Write => pb::ApiKeyScope::Write,
    }
}

/// A quote; its raw answer keeps its numbers as numbers where a double holds them.
pub(crate) fn quote(q: crate::quotes::Quote) -> pb::Quote {
    let raw = match q.raw {
        serde_json::Value::Object(o) => Some(json::to_struct(o, Integers::AsNumbers)),
        _ => None,
    };
    pb::Quote {
        quote_id: (!q.id.is_nil()).then(|| q.id.to_string()),
        src_amount: q.src_amount,
        dst_amount: q.dst_amount,
        from_token: q.from_token,
        to_token: q.to_token,
        approval_needed: q.approval.map(|a| a.needed),
        spender: q.approval.map(|a| a.spender.to_checksum(None)),
        allowance_target: q.approval.map(|a| a.spender.to_checksum(None)),
        raw,
    }
}

/// A write's answer; its `status` is always `SUBMITTED`.
pub(crate) fn submission(s: Submission) -> pb::Submission {
    pb::Submission {
        id: s.id.to_string(),
        status: pb::SubmissionStatus::Submitted.into(),
        hash: s.hash,
        explorer_url: s.explorer_url,
        chain_name: s.chain_name,
        approval: None,
    }
}

/// A write's answer: its submission, or the approval it is held for (whose id it carries).
pub(crate) fn written(w: Written, chains: &Registry) -> pb::Submission {
    match w {
        Written::Submitted(s) => submission(s),
        Written::Held(a) => {
            // The writer answers without reading token metadata: the native coin's units only.
            let units = chains
                .resolve(&a.chain)
                .ok()
                .filter(|_| a.asset == "native")
                .map(|c| (c.native_decimals(), c.native_symbol().to_owned()));
            pb::Submission {
                id: a.id.to_string(),
                status: pb::SubmissionStatus::PendingApproval.into(),
                hash: None,
                explorer_url: None,
                chain_name: chains.label(&a.chain, None).0,
                approval: Some(approval(*a, units)),
            }
        }
    }
}

pub(crate) fn approval_state(s: ApprovalState) -> pb::ApprovalState {
    match s {
        ApprovalState::Pending => pb::ApprovalState::Pending,
        ApprovalState::Approved => pb::ApprovalState::Approved,
        ApprovalState::Rejected => pb::ApprovalState::Rejected,
        ApprovalState::Expired => pb::ApprovalState::Expired,
        ApprovalState::Submitted => pb::ApprovalState::Submitted,
        ApprovalState::Failed => pb::ApprovalState::Failed,
    }
}

/// Approval `a`, with its asset's `units` (decimals, symbol) when known.
pub(crate) fn approval(a: Approval, units: Option<(u32, String)>) -> pb::Approval {
    let (decimals, symbol) = units.unzip();
    pb::Approval {
        id: a.id.to_string(),
        state: approval_state(a.state).into(),
        operation: a.path,
        chain: a.chain,
        asset: a.asset,
        amount: a.amount.to_string(),
        approval_above: a.threshold.to_string(),
        summary: a.summary,
        key_id: a.key_id.to_string(),
        created_at: Some(timestamp(a.created_at)),
        expires_at: Some(timestamp(a.expires_at)),
        decided_by: a.decided_by,
        decided_at: a.decided_at.map(timestamp),
        reason: a.reason,
        transaction_id: a.transaction_id.map(|t| t.to_string()),
        error: a.error,
        decimals,
        symbol,
    }
}

pub(crate) fn user(u: User) -> pb::User {
    pb::User {
        id: u.id.to_string(),
        name: u.name,
        created_at: Some(timestamp(u.created_at)),
        provider_user_id: u.provider_user_id,
    }
}

pub(crate) fn sync_report(r: walletops_domain::SyncReport) -> pb::SyncReport {
    let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    pb::SyncReport {
        added: count(r.added),
        updated: count(r.updated),
        removed: count(r.removed),
        conflicts: count(r.conflicts),
    }
}

/// A balance as the API shows it.
pub(crate) fn balance(b: crate::balances::Balance) -> pb::Balance {
    let address = b.address.to_string();
    balance_of(b, address)
}

/// A read's balances, the owner's address formatted once: an EVM address is a checksum to
/// compute (a Keccak hash), and every item of a read names the same owner.
pub(crate) fn balances(list: Vec<crate::balances::Balance>) -> Vec<pb::Balance> {
    let mut owner: Option<(walletops_domain::WalletAddress, String)> = None;
    list.into_iter()
        .map(|b| {
            let address = match &owner {
                Some((known, text)) if *known == b.address => text.clone(),
                _ => {
                    let text = b.address.to_string();
                    owner = Some((b.address, text.clone()));
                    text
                }
            };
            balance_of(b, address)
        })
        .collect()
}

/// `b` as the API shows it, its owner written `address`.
fn balance_of(b: crate::balances::Balance, address: String) -> pb::Balance {
    pb::Balance {
        chain_type: b.family.as_str().to_owned(),
        chain_id: b.chain_id,
        address,
        asset: b.asset.to_owned(),
        token: b.token,
        raw: b.raw.to_string(),
        decimals: b.decimals,
        symbol: b.symbol,
        updated_at: Some(timestamp(b.updated_at)),
    }
}

/// A dry run's answer.
pub(super) fn dry_run(run: crate::writes::DryRun) -> pb::SimulateWriteResponse {
    let effects = run.effects.known().map(effects);
    let verdict = &run.verdict;
    let mut reasons: Vec<String> = verdict.reasons().map(str::to_owned).collect();
    reasons.extend(verdict.hold_reasons());
    pb::SimulateWriteResponse {
        effects,
        verdict: Some(pb::Verdict {
            allowed: verdict.allowed(),
            needs_approval: verdict.needs_approval(),
            reasons,
            reservations: verdict
                .spends
                .iter()
                .map(|s| pb::Reservation {
                    chain: s.chain.clone(),
                    asset: s.asset.clone(),
                    amount: s.amount.to_string(),
                })
                .collect(),
        }),
        fee: Some(pb::FeeEstimate {
            max_fee: run.fee.max.to_string(),
            units: run.fee.units,
        }),
    }
}
