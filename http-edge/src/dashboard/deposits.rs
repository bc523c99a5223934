//! The Deposits page: money that arrived at the user's wallets, newest first, paged and
//! filtered by chain and state, amounts in the asset's units.

use askama::Template;
use axum::{
    extract::{Query, State},
    http::StatusCode,
};
use serde::Deserialize;
use walletops_proto::v1 as pb;

use super::{Dashboard, Page, Signed, Visit, format};

/// One deposit as the page shows it.
struct DepositRow {
    id: String,
    chain_name: String,
    address: String,
    state: &'static str,
    badge: &'static str,
    amount: format::Amount,
    from: String,
    hash: String,
    explorer_url: Option<String>,
    ignored_reason: Option<String>,
    created: String,
}

impl From<pb::Deposit> for DepositRow {
    fn from(d: pb::Deposit) -> Self {
        let (state, badge) = match pb::DepositState::try_from(d.state) {
            Ok(pb::DepositState::Pending) => ("Pending", "info"),
            Ok(pb::DepositState::Confirmed) => ("Confirmed", "ok"),
            Ok(pb::DepositState::Reverted) => ("Reverted", "bad"),
            Ok(pb::DepositState::Ignored) => ("Ignored", "muted"),
            _ => ("Unknown", "muted"),
        };
        Self {
            amount: format::of_asset(&d.amount, &d.asset, d.decimals, d.symbol.as_deref()),
            id: d.id,
            chain_name: d.chain_name,
            address: d.address,
            state,
            badge,
            from: d.from.unwrap_or_default(),
            hash: d.hash,
            explorer_url: d.explorer_url,
            ignored_reason: d.ignored_reason,
            created: format::time(d.created_at),
        }
    }
}

#[derive(Template)]
#[template(path = "dashboard/deposits.html")]
struct DepositsView {
    title: &'static str,
    signed: Option<Signed>,
    current: &'static str,
    deposits: Vec<DepositRow>,
    chain: String,
    state: String,
    states: Vec<(&'static str, &'static str)>,
    next: Option<String>,
    refresh: bool,
}

#[derive(Debug, Deserialize)]
pub(crate) struct DepositsQuery {
    #[serde(default)]
    chain: String,
    #[serde(default)]
    state: String,
    #[serde(default)]
    page: String,
}

/// The state filter's choices: its value and its label.
const STATES: [(&str, &str); 4] = [
    ("pending", "Pending"),
    ("confirmed", "Confirmed"),
    ("reverted", "Reverted"),
    ("ignored", "Ignored"),
];

/// `GET /dashboard/deposits?chain=&state=&page=`. A page with a pending deposit reloads
/// itself every few seconds.
pub(crate) async fn list(
    State(mut dashboard): State<Dashboard>,
    visit: Visit,
    Query(q): Query<DepositsQuery>,
) -> Page {
    let signed = match dashboard.signed(&visit).await {
        Ok(s) => s,
        Err(page) => return page,
    };
    let state = crate::model::deposit_state(Some(&q.state)).unwrap_or_default();
    let req = pb::ListDepositsRequest {
        chain: Some(q.chain.clone()).filter(|c| !c.is_empty()),
        state: state.into(),
        page_size: 25,
        page_token: Some(q.page.clone()).filter(|p| !p.is_empty()),
        ..Default::default()
    };
    match dashboard
        .deposits
        .list_deposits(visit.call(req, None))
        .await
    {
        Ok(answer) => {
            let answer = answer.into_inner();
            let deposits: Vec<DepositRow> =
                answer.deposits.into_iter().map(DepositRow::from).collect();
            let refresh = deposits.iter().any(|d| d.state == "Pending");
            let view = DepositsView {
                title: "Deposits",
                signed: Some(signed),
                current: "deposits",
                deposits,
                chain: q.chain,
                state: q.state,
                states: STATES.to_vec(),
                next: answer.next_page_token,
                refresh,
            };
            Page::render(StatusCode::OK, &view)
        }
        Err(status) => Page::from(status),
    }
}
