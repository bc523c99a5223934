//! The Approvals page: writes of the user's keys held for approval, the pending ones with
//! Approve and Reject, the rest as a record of who decided what. The core records the
//! signed-in user as the one who decided.

use askama::Template;
use axum::{
    extract::{Path, Query, State},
    http::StatusCode,
};
use axum_extra::extract::Form;
use serde::Deserialize;
use walletops_proto::v1 as pb;

use super::{Dashboard, Page, Signed, Visit, format};

/// One approval as the page shows it.
struct ApprovalRow {
    id: String,
    state: String,
    badge: &'static str,
    summary: String,
    /// What its simulation showed it does, which the Approve button restates.
    effects: String,
    /// What it moves, in the asset's units when known.
    amount: format::Amount,
    /// The threshold it exceeded, likewise.
    above: format::Amount,
    /// The key that asked: its name and prefix.
    key: String,
    created: String,
    expires: String,
    decided: String,
    transaction_id: Option<String>,
    error: Option<String>,
}

impl From<pb::Approval> for ApprovalRow {
    fn from(a: pb::Approval) -> Self {
        let state = pb::ApprovalState::try_from(a.state).unwrap_or_default();
        let badge = match state {
            pb::ApprovalState::Pending => "warn",
            pb::ApprovalState::Approved => "info",
            pb::ApprovalState::Submitted => "ok",
            pb::ApprovalState::Rejected | pb::ApprovalState::Failed => "bad",
            _ => "muted",
        };
        let decided = match (&a.decided_by, a.decided_at) {
            (Some(by), at) => {
                let reason = a
                    .reason
                    .as_deref()
                    .map(|r| format!(" ({r})"))
                    .unwrap_or_default();
                format!("{by}, {}{reason}", format::time(at))
            }
            (None, _) => String::new(),
        };
        let symbol = a.symbol.as_deref();
        let amount = format::of_asset(&a.amount, &a.asset, a.decimals, symbol);
        let above = format::of_asset(&a.approval_above, &a.asset, a.decimals, symbol);
        Self {
            amount,
            above,
            id: a.id,
            state: state
                .as_str_name()
                .trim_start_matches("APPROVAL_STATE_")
                .to_ascii_lowercase(),
            badge,
            effects: a
                .summary
                .split_once("; simulated: ")
                .map_or_else(|| a.summary.clone(), |(_, effects)| effects.to_owned()),
            summary: a.summary,
            key: a.key_id,
            created: format::time(a.created_at),
            expires: format::time(a.expires_at),
            decided,
            transaction_id: a.transaction_id,
            error: a.error,
        }
    }
}

#[derive(Template)]
#[template(path = "dashboard/approvals.html")]
struct ApprovalsView {
    title: &'static str,
    signed: Option<Signed>,
    current: &'static str,
    pending: Vec<ApprovalRow>,
    decided: Vec<ApprovalRow>,
    notice: Option<String>,
    error: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ApprovalsQuery {
    approved: Option<String>,
    rejected: Option<String>,
}

/// `GET /dashboard/approvals`.
pub(crate) async fn list(
    State(mut dashboard): State<Dashboard>,
    visit: Visit,
    Query(q): Query<ApprovalsQuery>,
) -> Page {
    let notice = match (q.approved, q.rejected) {
        (Some(_), _) => Some("Approved: the write is being signed and sent.".to_owned()),
        (None, Some(_)) => Some("Rejected: the write will never be signed.".to_owned()),
        _ => None,
    };
    view(&mut dashboard, &visit, StatusCode::OK, (notice, None)).await
}

async fn view(
    dashboard: &mut Dashboard,
    visit: &Visit,
    status: StatusCode,
    (notice, error): (Option<String>, Option<String>),
) -> Page {
    let signed = match dashboard.signed(visit).await {
        Ok(s) => s,
        Err(page) => return page,
    };
    let approvals = match dashboard
        .approvals
        .list_approvals(visit.call(pb::ListApprovalsRequest::default(), None))
        .await
    {
        Ok(reply) => reply.into_inner().approvals,
        Err(status) => return Page::from(status),
    };
    // Keys by name and prefix, as the API Keys section shows them.
    let keys: std::collections::HashMap<String, String> =
        match super::keys::list_keys(dashboard, visit).await {
            Ok(keys) => keys
                .into_iter()
                .map(|k| (k.id, format!("{} ({})", k.name, k.prefix)))
                .collect(),
            Err(page) => return page,
        };
    let row = |mut a: pb::Approval| {
        if let Some(key) = keys.get(&a.key_id) {
            a.key_id.clone_from(key);
        }
        ApprovalRow::from(a)
    };
    let (pending, decided): (Vec<_>, Vec<_>) = approvals
        .into_iter()
        .partition(|a| a.state == i32::from(pb::ApprovalState::Pending));
    Page::render(
        status,
        &ApprovalsView {
            title: "Approvals",
            signed: Some(signed),
            current: "approvals",
            pending: pending.into_iter().map(row).collect(),
            decided: decided.into_iter().map(row).collect(),
            notice,
            error,
        },
    )
}

#[derive(Debug, Deserialize)]
pub(crate) struct DecideForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    reason: String,
}

/// `POST /dashboard/approvals/{id}/approve`.
pub(crate) async fn approve(
    State(mut dashboard): State<Dashboard>,
    visit: Visit,
    Path(id): Path<String>,
    Form(form): Form<DecideForm>,
) -> Page {
    decide(&mut dashboard, &visit, id, true, form).await
}

/// `POST /dashboard/approvals/{id}/reject`.
pub(crate) async fn reject(
    State(mut dashboard): State<Dashboard>,
    visit: Visit,
    Path(id): Path<String>,
    Form(form): Form<DecideForm>,
) -> Page {
    decide(&mut dashboard, &visit, id, false, form).await
}

/// The decision, then the list again saying what was done, or with the core's refusal.
async fn decide(
    dashboard: &mut Dashboard,
    visit: &Visit,
    id: String,
    approve: bool,
    form: DecideForm,
) -> Page {
    let reason = form.reason.trim();
    let req = pb::DecideApprovalRequest {
        id,
        approve,
        reason: (!approve && !reason.is_empty()).then(|| reason.to_owned()),
    };
    match dashboard
        .approvals
        .decide_approval(visit.call(req, Some(&form.csrf)))
        .await
    {
        Ok(_) => Page::SeeOther(format!(
            "/dashboard/approvals?{}=1",
            if approve { "approved" } else { "rejected" }
        )),
        Err(status) => match super::form_refusal(status) {
            Ok((http, message)) => view(dashboard, visit, http, (None, Some(message))).await,
            Err(page) => page,
        },
    }
}
