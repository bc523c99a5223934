//! The Payouts page: the user's payouts with their totals, one payout's items, and a CSV
//! upload that is checked by the core (every row, the wallet's funds) and shown as a
//! preview before anything is stored; only the preview's "Pay" stores it, under a key made
//! for that preview, so a second press or a reload pays nothing twice.

use askama::Template;
use axum::{
    extract::{Path, State},
    http::StatusCode,
};
use axum_extra::extract::Form;
use serde::Deserialize;
use tonic_types::StatusExt as _;
use walletops_proto::{payouts_csv, v1 as pb};

use super::{Dashboard, Page, Signed, Visit, form_refusal, format};

/// One payout as the list shows it.
struct PayoutRow {
    id: String,
    chain: String,
    from: String,
    state: &'static str,
    badge: &'static str,
    items: u32,
    transactions: u32,
    totals: String,
    created: String,
}

impl From<pb::Payout> for PayoutRow {
    fn from(p: pb::Payout) -> Self {
        let (state, badge) = match pb::PayoutState::try_from(p.state) {
            Ok(pb::PayoutState::Completed) => ("Completed", "ok"),
            _ => ("Running", "info"),
        };
        let mut totals: Vec<(String, u32)> = p.totals.into_iter().collect();
        totals.sort();
        Self {
            id: p.id,
            chain: p.chain,
            from: p.from,
            state,
            badge,
            items: p.item_count,
            transactions: p.transaction_count,
            totals: totals
                .iter()
                .map(|(s, n)| format!("{n} {}", s.to_ascii_lowercase().replace('_', " ")))
                .collect::<Vec<_>>()
                .join(", "),
            created: format::time(p.created_at),
        }
    }
}

/// One item as a payout's page or a preview shows it.
struct ItemRow {
    row: usize,
    to: String,
    asset: String,
    amount: String,
    reference: String,
    state: String,
    hash: String,
    error: String,
}

impl From<pb::PayoutItem> for ItemRow {
    fn from(i: pb::PayoutItem) -> Self {
        Self {
            row: payouts_csv::row_of(i.index as usize),
            to: i.to,
            asset: match i.token {
                Some(t) => format!("{} {t}", i.asset),
                None => i.asset,
            },
            amount: i.amount,
            reference: i.reference.unwrap_or_default(),
            state: i.state,
            hash: i.hash.unwrap_or_default(),
            error: i.error.unwrap_or_default(),
        }
    }
}

/// The upload form as typed.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct UploadForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    chain: String,
    #[serde(default)]
    from: String,
    #[serde(default)]
    csv: String,
    /// The preview's key: present when "Pay" was pressed on a preview.
    #[serde(default)]
    key: String,
}

#[derive(Template)]
#[template(path = "dashboard/payouts.html")]
struct PayoutsView {
    title: &'static str,
    signed: Option<Signed>,
    current: &'static str,
    payouts: Vec<PayoutRow>,
    form: UploadForm,
    /// What is wrong with the upload, each line naming its row.
    problems: Vec<String>,
    /// A checked upload: its items, and the key "Pay" stores it under.
    preview: Option<(Vec<ItemRow>, String)>,
    /// How many items the preview holds.
    preview_count: usize,
    /// The lamports of rent the previewed payout pays, when any.
    preview_rent: Option<String>,
}

#[derive(Template)]
#[template(path = "dashboard/payout.html")]
struct PayoutView {
    title: &'static str,
    signed: Option<Signed>,
    current: &'static str,
    payout: PayoutRow,
    items: Vec<ItemRow>,
    refresh: bool,
}

/// `GET /dashboard/payouts`.
pub(crate) async fn list(State(mut dashboard): State<Dashboard>, visit: Visit) -> Page {
    page(
        &mut dashboard,
        &visit,
        StatusCode::OK,
        UploadForm::default(),
        Vec::new(),
        None,
    )
    .await
}

/// The list with the upload form in `form`'s state.
async fn page(
    dashboard: &mut Dashboard,
    visit: &Visit,
    status: StatusCode,
    form: UploadForm,
    problems: Vec<String>,
    preview: Option<(Vec<ItemRow>, String, Option<String>)>,
) -> Page {
    let (preview, preview_rent) = match preview {
        Some((rows, key, rent)) => (Some((rows, key)), rent.filter(|r| r != "0")),
        None => (None, None),
    };
    let signed = match dashboard.signed(visit).await {
        Ok(s) => s,
        Err(page) => return page,
    };
    let req = pb::ListPayoutsRequest {
        page_size: 50,
        ..Default::default()
    };
    match dashboard.payouts.list_payouts(visit.call(req, None)).await {
        Ok(answer) => {
            let view = PayoutsView {
                title: "Payouts",
                signed: Some(signed),
                current: "payouts",
                payouts: answer
                    .into_inner()
                    .payouts
                    .into_iter()
                    .map(PayoutRow::from)
                    .collect(),
                form,
                problems,
                preview_count: preview.as_ref().map_or(0, |(rows, _)| rows.len()),
                preview,
                preview_rent,
            };
            Page::render(status, &view)
        }
        Err(status) => Page::from(status),
    }
}

/// `POST /dashboard/payouts`: without a key, checks the upload and shows its preview (or
/// what is wrong, row by row); with the preview's key, stores it and goes to its page.
pub(crate) async fn upload(
    State(mut dashboard): State<Dashboard>,
    visit: Visit,
    Form(form): Form<UploadForm>,
) -> Page {
    let items = match payouts_csv::parse(&form.csv) {
        Ok(items) => items,
        Err(errors) => {
            let problems = errors.iter().map(ToString::to_string).collect();
            let status = StatusCode::BAD_REQUEST;
            return page(&mut dashboard, &visit, status, form, problems, None).await;
        }
    };
    let paying = !form.key.trim().is_empty();
    let req = pb::CreatePayoutRequest {
        chain: form.chain.trim().to_owned(),
        from: Some(form.from.trim().to_owned()).filter(|f| !f.is_empty()),
        items,
        validate_only: !paying,
    };
    let mut call = visit.call(req, Some(&form.csrf));
    if paying {
        match form.key.trim().parse() {
            Ok(key) => {
                call.metadata_mut()
                    .insert(walletops_proto::IDEMPOTENCY_KEY_HEADER, key);
            }
            Err(_) => {
                let problems =
                    vec!["the preview's key is malformed: check the file again".to_owned()];
                let status = StatusCode::BAD_REQUEST;
                return page(&mut dashboard, &visit, status, form, problems, None).await;
            }
        }
    }
    match dashboard.payouts.create_payout(call).await {
        Ok(answer) => {
            let payout = answer.into_inner().payout.unwrap_or_default();
            if paying {
                return Page::SeeOther(format!("/dashboard/payouts/{}", payout.id));
            }
            let rows = payout.items.into_iter().map(ItemRow::from).collect();
            let key = uuid::Uuid::new_v4().to_string();
            page(
                &mut dashboard,
                &visit,
                StatusCode::OK,
                form,
                Vec::new(),
                Some((rows, key, payout.rent)),
            )
            .await
        }
        Err(status) => {
            let violations: Vec<String> = status
                .get_error_details()
                .bad_request()
                .map(|b| {
                    b.field_violations
                        .iter()
                        .map(|v| format!("{}: {}", row_named(&v.field), v.description))
                        .collect()
                })
                .unwrap_or_default();
            match form_refusal(status) {
                Ok((http, message)) => {
                    let problems = if violations.is_empty() {
                        vec![message]
                    } else {
                        violations
                    };
                    page(&mut dashboard, &visit, http, form, problems, None).await
                }
                Err(page) => page,
            }
        }
    }
}

/// `items[3].to` as the file's row says it (`row 5, to`); other fields as they are.
fn row_named(field: &str) -> String {
    match payouts_csv::row_of_field(field) {
        Some((row, name)) => format!("row {row}, {name}"),
        None => field.to_owned(),
    }
}

/// `GET /dashboard/payouts/{id}`: the payout and each item; it reloads itself while running.
pub(crate) async fn show(
    State(mut dashboard): State<Dashboard>,
    visit: Visit,
    Path(id): Path<String>,
) -> Page {
    let signed = match dashboard.signed(&visit).await {
        Ok(s) => s,
        Err(page) => return page,
    };
    match dashboard
        .payouts
        .get_payout(visit.call(pb::GetPayoutRequest { id }, None))
        .await
    {
        Ok(answer) => {
            let mut payout = answer.into_inner().payout.unwrap_or_default();
            let items = std::mem::take(&mut payout.items)
                .into_iter()
                .map(ItemRow::from)
                .collect();
            let payout = PayoutRow::from(payout);
            let view = PayoutView {
                title: "Payout",
                signed: Some(signed),
                current: "payouts",
                refresh: payout.state == "Running",
                payout,
                items,
            };
            Page::render(StatusCode::OK, &view)
        }
        Err(status) => Page::from(status),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn items_are_named_by_their_file_row() {
        assert_eq!(super::row_named("items[0].to"), "row 2, to");
        assert_eq!(super::row_named("items[10].amount"), "row 12, amount");
        assert_eq!(super::row_named("from"), "from");
    }
}
