//! The wallets page (each wallet, its balance on the chains configured or in use, every
//! chain of its family behind `?all=1`) and the
//! transactions page (newest first, paged, filtered by chain and status).

use askama::Template;
use axum::{
    extract::{Query, State},
    http::StatusCode,
};
use serde::Deserialize;
use walletops_proto::v1 as pb;

use super::{Dashboard, Page, Signed, Visit, format};

/// One wallet as the page shows it.
struct WalletRow {
    address: String,
    chain_type: String,
    is_default: bool,
    delegated: bool,
    provider_type: String,
    client_type: String,
    chains: Vec<ChainRow>,
    /// The chains of its family not read (shown with `?all=1`).
    other_chains: Vec<String>,
}

/// One wallet's balance on one chain.
struct ChainRow {
    chain: String,
    chain_name: String,
    balance: format::Amount,
    error: Option<String>,
    explorer_url: Option<String>,
}

impl From<pb::Holding> for WalletRow {
    fn from(h: pb::Holding) -> Self {
        let wallet = h.wallet.unwrap_or_default();
        Self {
            address: wallet.address,
            chain_type: wallet.chain_type,
            is_default: wallet.is_default,
            delegated: wallet.automation_enabled,
            provider_type: wallet.provider_type,
            client_type: wallet.client_type,
            chains: h
                .chains
                .into_iter()
                .map(|c| ChainRow {
                    chain: c.chain,
                    chain_name: c.chain_name,
                    balance: c.native.map_or_else(
                        || format::amount("", None, None),
                        |b| format::amount(&b.raw, Some((b.decimals, b.symbol.as_str())), None),
                    ),
                    error: c.error,
                    explorer_url: c.explorer_url,
                })
                .collect(),
            other_chains: h.other_chains,
        }
    }
}

#[derive(Template)]
#[template(path = "dashboard/wallets.html")]
struct WalletsView {
    title: &'static str,
    signed: Option<Signed>,
    current: &'static str,
    wallets: Vec<WalletRow>,
    /// Every chain of each wallet's family is shown.
    all: bool,
    /// Chains left out, across the wallets (for the toggle's words).
    others: usize,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WalletsQuery {
    fresh: Option<String>,
    all: Option<String>,
}

/// `GET /dashboard/wallets?all=1&fresh=1`: the chains configured or in use; with `all`,
/// every chain of each wallet's family (a plain link: no JavaScript needed).
pub(crate) async fn wallets(
    State(mut dashboard): State<Dashboard>,
    visit: Visit,
    Query(q): Query<WalletsQuery>,
) -> Page {
    let signed = match dashboard.signed(&visit).await {
        Ok(s) => s,
        Err(page) => return page,
    };
    let all = q.all.is_some();
    let req = pb::ListHoldingsRequest {
        fresh: q.fresh.is_some(),
        all_chains: all,
    };
    match dashboard
        .sessions
        .list_holdings(visit.call(req, None))
        .await
    {
        Ok(answer) => {
            let wallets: Vec<WalletRow> = answer
                .into_inner()
                .holdings
                .into_iter()
                .map(WalletRow::from)
                .collect();
            let others = wallets.iter().map(|w| w.other_chains.len()).sum();
            let view = WalletsView {
                title: "Wallets",
                signed: Some(signed),
                current: "wallets",
                wallets,
                all,
                others,
            };
            Page::render(StatusCode::OK, &view)
        }
        Err(status) => Page::from(status),
    }
}

/// One transaction as the page shows it.
struct TransactionRow {
    id: String,
    chain_name: String,
    kind: &'static str,
    status: &'static str,
    badge: &'static str,
    open: bool,
    from: String,
    to: String,
    amount: format::Amount,
    hash: String,
    explorer_url: Option<String>,
    error: Option<String>,
    created: String,
    history: Vec<(String, &'static str, String)>,
}

impl From<pb::Transaction> for TransactionRow {
    fn from(t: pb::Transaction) -> Self {
        let (status, badge, open) = format::status(t.status);
        let units = t.decimals.zip(t.symbol.as_deref());
        let amount = match (&t.src_amount, &t.to_token, &t.amount) {
            (Some(src), Some(to), _) => {
                let mut a = format::amount(src, units, t.from_token.as_deref());
                a.shown = format!("{} → {to}", a.shown);
                a
            }
            (_, _, Some(amount)) => format::amount(amount, units, t.token.as_deref()),
            _ => format::amount("", None, None),
        };
        Self {
            id: t.id,
            chain_name: t.chain_name,
            kind: format::kind(t.kind),
            status,
            badge,
            open,
            from: t.from,
            to: t.to,
            amount,
            hash: t.hash.unwrap_or_default(),
            explorer_url: t.explorer_url,
            error: t.error,
            created: format::time(t.created_at),
            history: t
                .status_history
                .into_iter()
                .map(|c| {
                    (
                        format::time(c.at),
                        format::status(c.status).0,
                        c.note.unwrap_or_default(),
                    )
                })
                .collect(),
        }
    }
}

#[derive(Template)]
#[template(path = "dashboard/transactions.html")]
struct TransactionsView {
    title: &'static str,
    signed: Option<Signed>,
    current: &'static str,
    transactions: Vec<TransactionRow>,
    chain: String,
    status: String,
    statuses: Vec<(&'static str, &'static str)>,
    next: Option<String>,
    refresh: bool,
}

#[derive(Debug, Deserialize)]
pub(crate) struct TransactionsQuery {
    #[serde(default)]
    chain: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    page: String,
}

/// The status filter's choices: its value and its label.
const STATUSES: [(&str, &str); 6] = [
    ("submitted", "Submitted"),
    ("confirmed", "Confirmed"),
    ("reverted", "Reverted"),
    ("failed", "Failed"),
    ("dropped", "Dropped"),
    ("fee_capped", "Fee capped"),
];

fn status_filter(value: &str) -> Option<i32> {
    let status = match value {
        "submitted" => pb::TransactionStatus::Submitted,
        "confirmed" => pb::TransactionStatus::Confirmed,
        "reverted" => pb::TransactionStatus::Reverted,
        "failed" => pb::TransactionStatus::Failed,
        "dropped" => pb::TransactionStatus::Dropped,
        "fee_capped" => pb::TransactionStatus::FeeCapped,
        _ => return None,
    };
    Some(status.into())
}

/// `GET /dashboard/transactions?chain=&status=&page=`. A page with an open record reloads
/// itself every few seconds (a meta refresh: no JavaScript needed).
pub(crate) async fn transactions(
    State(mut dashboard): State<Dashboard>,
    visit: Visit,
    Query(q): Query<TransactionsQuery>,
) -> Page {
    let signed = match dashboard.signed(&visit).await {
        Ok(s) => s,
        Err(page) => return page,
    };
    let req = pb::ListTransactionsRequest {
        chain: Some(q.chain.clone()).filter(|c| !c.is_empty()),
        status: status_filter(&q.status),
        page_size: 25,
        page_token: q.page.clone(),
    };
    match dashboard
        .sessions
        .list_transactions(visit.call(req, None))
        .await
    {
        Ok(answer) => {
            let answer = answer.into_inner();
            let transactions: Vec<TransactionRow> = answer
                .transactions
                .into_iter()
                .map(TransactionRow::from)
                .collect();
            let refresh = transactions.iter().any(|t| t.open);
            let view = TransactionsView {
                title: "Transactions",
                signed: Some(signed),
                current: "transactions",
                transactions,
                chain: q.chain,
                status: q.status,
                statuses: STATUSES.to_vec(),
                next: Some(answer.next_page_token).filter(|t| !t.is_empty()),
                refresh,
            };
            Page::render(StatusCode::OK, &view)
        }
        Err(status) => Page::from(status),
    }
}
