//! A key's spend limits: the page that lists them with what is spent and left (and above
//! what a write waits for approval), sets one and removes one, and shows the key's policy
//! (`policy` changes it). Only a session may change either (the core refuses every API key).

use askama::Template;
use axum::{
    extract::{Path, Query, State},
    http::StatusCode,
};
use axum_extra::extract::Form;
use serde::Deserialize;
use walletops_proto::v1 as pb;

use super::{
    Dashboard, Page, Signed, Visit,
    format::{self, Amount},
    keys::KeyRow,
};

/// One limit as the page shows it: amounts in the asset's units when the core knows them,
/// base units on hover.
struct LimitRow {
    chain: String,
    asset: String,
    max: Amount,
    budget: Amount,
    spent: Amount,
    left: Amount,
    approval_above: Amount,
}

impl From<pb::SpendLimit> for LimitRow {
    fn from(l: pb::SpendLimit) -> Self {
        let shown = |raw: Option<&str>, absent: &str| match raw {
            Some(raw) => format::of_asset(raw, &l.asset, l.decimals, l.symbol.as_deref()),
            None => Amount {
                shown: absent.to_owned(),
                raw: String::new(),
            },
        };
        Self {
            max: shown(l.max_per_transaction.as_deref(), "none"),
            budget: shown(l.daily_budget.as_deref(), "none"),
            spent: shown(Some(&l.spent_24h), "none"),
            left: shown(l.left.as_deref(), "-"),
            approval_above: shown(l.approval_above.as_deref(), "none"),
            chain: l.chain,
            asset: l.asset,
        }
    }
}

#[derive(Template)]
#[template(path = "dashboard/limits.html")]
struct LimitsView {
    title: &'static str,
    signed: Option<Signed>,
    current: &'static str,
    key: KeyRow,
    limits: Vec<LimitRow>,
    rules: Vec<super::policy::RuleRow>,
    notice: Option<String>,
    error: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct LimitsQuery {
    saved: Option<String>,
    removed: Option<String>,
    allowed: Option<String>,
    disallowed: Option<String>,
    unfrozen: Option<String>,
}

/// `GET /dashboard/keys/{id}/limits`.
pub(crate) async fn show(
    State(mut dashboard): State<Dashboard>,
    visit: Visit,
    Path(id): Path<String>,
    Query(q): Query<LimitsQuery>,
) -> Page {
    let notice = if let Some(what) = q.saved {
        Some(format!("The limit on {what} is set."))
    } else if let Some(what) = q.removed {
        Some(format!("The limit on {what} is removed."))
    } else if let Some(what) = q.allowed {
        Some(format!("The policy now allows {what}."))
    } else if let Some(what) = q.disallowed {
        Some(format!("The policy no longer allows {what}."))
    } else {
        q.unfrozen
            .map(|_| "The key's line is unfrozen: its keys write again.".to_owned())
    };
    view(&mut dashboard, &visit, &id, StatusCode::OK, (notice, None)).await
}

pub(super) async fn view(
    dashboard: &mut Dashboard,
    visit: &Visit,
    id: &str,
    status: StatusCode,
    (notice, error): (Option<String>, Option<String>),
) -> Page {
    let signed = match dashboard.signed(visit).await {
        Ok(s) => s,
        Err(page) => return page,
    };
    let keys = match super::keys::list_keys(dashboard, visit).await {
        Ok(keys) => keys,
        Err(page) => return page,
    };
    let Some(mut key) = keys.into_iter().find(|k| k.id == id) else {
        return super::error_page(
            walletops_proto::ErrorCode::NotFound,
            "no such API key".to_owned(),
        );
    };
    let limits = std::mem::take(&mut key.spend_limits)
        .into_iter()
        .map(LimitRow::from)
        .collect();
    let rules = std::mem::take(&mut key.policy_rules)
        .into_iter()
        .map(super::policy::RuleRow::from)
        .collect();
    let view = LimitsView {
        title: "Spend limits and policy",
        signed: Some(signed),
        current: "keys",
        key: key.into(),
        limits,
        rules,
        notice,
        error,
    };
    Page::render(status, &view)
}

#[derive(Debug, Deserialize)]
pub(crate) struct LimitForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    chain: String,
    #[serde(default)]
    asset: String,
    #[serde(default)]
    max_per_transaction: String,
    #[serde(default)]
    daily_budget: String,
    #[serde(default)]
    approval_above: String,
}

/// A form field left empty: no such limit.
fn given(field: String) -> Option<String> {
    let field = field.trim().to_owned();
    (!field.is_empty()).then_some(field)
}

/// `POST /dashboard/keys/{id}/limits`: sets (or replaces) a limit.
pub(crate) async fn set(
    State(mut dashboard): State<Dashboard>,
    visit: Visit,
    Path(id): Path<String>,
    Form(form): Form<LimitForm>,
) -> Page {
    let what = format!("{} of {}", form.asset.trim(), form.chain.trim());
    let req = pb::SetSpendLimitRequest {
        key_id: id.clone(),
        chain: form.chain.trim().to_owned(),
        asset: form.asset.trim().to_owned(),
        max_per_transaction: given(form.max_per_transaction),
        daily_budget: given(form.daily_budget),
        approval_above: given(form.approval_above),
    };
    let answer = dashboard
        .keys
        .set_spend_limit(visit.call(req, Some(&form.csrf)))
        .await;
    after(
        &mut dashboard,
        &visit,
        &id,
        answer.map(|_| ()),
        ("saved", &what),
    )
    .await
}

/// `POST /dashboard/keys/{id}/limits/remove`: removes a limit.
pub(crate) async fn remove(
    State(mut dashboard): State<Dashboard>,
    visit: Visit,
    Path(id): Path<String>,
    Form(form): Form<LimitForm>,
) -> Page {
    let what = format!("{} of {}", form.asset, form.chain);
    let req = pb::RemoveSpendLimitRequest {
        key_id: id.clone(),
        chain: form.chain,
        asset: form.asset,
    };
    let answer = dashboard
        .keys
        .remove_spend_limit(visit.call(req, Some(&form.csrf)))
        .await;
    after(
        &mut dashboard,
        &visit,
        &id,
        answer.map(|_| ()),
        ("removed", &what),
    )
    .await
}

/// The form of a button that needs only the session's CSRF token.
#[derive(Debug, Deserialize)]
pub(crate) struct CsrfForm {
    csrf: String,
}

/// `POST /dashboard/keys/{id}/unfreeze`: lets a frozen line write again.
pub(crate) async fn unfreeze(
    State(mut dashboard): State<Dashboard>,
    visit: Visit,
    Path(id): Path<String>,
    Form(form): Form<CsrfForm>,
) -> Page {
    let req = pb::UnfreezeApiKeyRequest { key_id: id.clone() };
    let answer = dashboard
        .keys
        .unfreeze_api_key(visit.call(req, Some(&form.csrf)))
        .await;
    after(
        &mut dashboard,
        &visit,
        &id,
        answer.map(|_| ()),
        ("unfrozen", "line"),
    )
    .await
}

/// The page after a change: back to the limits, saying what was done, or the page again
/// with the core's refusal.
pub(super) async fn after(
    dashboard: &mut Dashboard,
    visit: &Visit,
    id: &str,
    answer: Result<(), tonic::Status>,
    (done, what): (&str, &str),
) -> Page {
    match answer {
        Ok(()) => {
            let what: String = url::form_urlencoded::byte_serialize(what.as_bytes()).collect();
            Page::SeeOther(format!("/dashboard/keys/{id}/limits?{done}={what}"))
        }
        Err(status) => match super::form_refusal(status) {
            Ok((http, message)) => view(dashboard, visit, id, http, (None, Some(message))).await,
            Err(page) => page,
        },
    }
}
