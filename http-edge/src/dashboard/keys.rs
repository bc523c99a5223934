//! The API Keys section: the list, "Generate API Key", the value shown once, and revoking
//! with a confirmation.

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
    auth::CsrfForm,
    flash::{self, Flash},
    format,
};
use crate::error::read_status;

/// One row of the keys table.
pub(crate) struct KeyRow {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) prefix: String,
    pub(crate) scopes: String,
    pub(crate) created: String,
    pub(crate) last_used: String,
    pub(crate) expires: String,
    pub(crate) label: &'static str,
    pub(crate) badge: &'static str,
    pub(crate) revocable: bool,
    /// Its spend limits, one line each.
    pub(crate) limits: Vec<String>,
    /// Since when and why its line is frozen, if it is.
    pub(crate) frozen: Option<(String, String)>,
}

impl From<pb::ApiKey> for KeyRow {
    fn from(k: pb::ApiKey) -> Self {
        // Label, badge style, and whether it still works (so may be revoked).
        let frozen = k
            .frozen_at
            .map(|at| (format::time(Some(at)), k.frozen_reason.unwrap_or_default()));
        let (label, badge, revocable) = match pb::ApiKeyState::try_from(k.state) {
            Ok(pb::ApiKeyState::Active | pb::ApiKeyState::ExpiringSoon) if frozen.is_some() => {
                ("Frozen", "bad", true)
            }
            Ok(pb::ApiKeyState::Active) => ("Active", "ok", true),
            Ok(pb::ApiKeyState::ExpiringSoon) => ("Expiring soon", "warn", true),
            Ok(pb::ApiKeyState::Expired) => ("Expired", "muted", false),
            Ok(pb::ApiKeyState::Revoked) => ("Revoked", "bad", false),
            _ => ("Unknown", "muted", false),
        };
        let scopes: Vec<&str> = k.scopes.iter().map(|s| format::scope(*s)).collect();
        let limits = k.spend_limits.iter().map(format::limit).collect();
        Self {
            id: k.id,
            name: k.name,
            prefix: k.prefix,
            scopes: scopes.join(", "),
            created: format::time(k.created_at),
            last_used: k
                .last_used_at
                .map_or_else(|| "never".to_owned(), |t| format::time(Some(t))),
            expires: k
                .expires_at
                .map_or_else(|| "never".to_owned(), |t| format::time(Some(t))),
            label,
            badge,
            revocable,
            limits,
            frozen,
        }
    }
}

#[derive(Template)]
#[template(path = "dashboard/keys.html")]
struct KeysView {
    title: &'static str,
    signed: Option<Signed>,
    current: &'static str,
    keys: Vec<KeyRow>,
    more: Extras,
}

/// What the keys page shows besides the list.
#[derive(Default)]
struct Extras {
    /// A key just made.
    created: Option<Created>,
    /// What was just done.
    notice: Option<String>,
    /// Why the form was refused.
    error: Option<String>,
    /// The refused form's name, to fill it again.
    name: String,
}

/// A key just made: its value, shown this once.
struct Created {
    name: String,
    secret: String,
}

#[derive(Debug, Deserialize)]
pub(crate) struct KeysQuery {
    revoked: Option<String>,
}

/// `GET /dashboard/keys`: with the key just made, when the form's redirect brought one
/// (shown this once: the answer removes it).
pub(crate) async fn list(
    State(mut dashboard): State<Dashboard>,
    visit: Visit,
    Query(q): Query<KeysQuery>,
) -> Page {
    let signed = match dashboard.signed(&visit).await {
        Ok(s) => s,
        Err(page) => return page,
    };
    let notice = q
        .revoked
        .map(|prefix| format!("Key {prefix} is revoked: it no longer works anywhere."));
    let (flash, jar) = flash::take(&visit, dashboard.secure_cookies);
    let created = match flash {
        Some(Flash::NewKey { name, secret }) => Some(Created { name, secret }),
        _ => None,
    };
    let more = Extras {
        notice,
        created,
        ..Extras::default()
    };
    let shown = page(&mut dashboard, &visit, signed, StatusCode::OK, more).await;
    flash::with_jar(jar, shown)
}

async fn page(
    dashboard: &mut Dashboard,
    visit: &Visit,
    signed: Signed,
    status: StatusCode,
    more: Extras,
) -> Page {
    let keys = match list_keys(dashboard, visit).await {
        Ok(keys) => keys,
        Err(page) => return page,
    };
    let view = KeysView {
        title: "API Keys",
        signed: Some(signed),
        current: "keys",
        keys: keys.into_iter().map(KeyRow::from).collect(),
        more,
    };
    Page::render(status, &view)
}

/// Every key of the visit's user, newest first.
pub(super) async fn list_keys(
    dashboard: &mut Dashboard,
    visit: &Visit,
) -> Result<Vec<pb::ApiKey>, Page> {
    dashboard
        .keys
        .list_api_keys(visit.call(pb::ListApiKeysRequest {}, None))
        .await
        .map(|answer| answer.into_inner().api_keys)
        .map_err(Page::from)
}

#[derive(Debug, Deserialize)]
pub(crate) struct CreateForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    expiration: String,
    #[serde(default)]
    scopes: Vec<String>,
}

fn expiration(choice: &str) -> pb::KeyExpiration {
    match choice {
        "7d" => pb::KeyExpiration::SevenDays,
        "30d" => pb::KeyExpiration::ThirtyDays,
        "90d" => pb::KeyExpiration::NinetyDays,
        "180d" => pb::KeyExpiration::OneHundredEightyDays,
        "1y" => pb::KeyExpiration::OneYear,
        _ => pb::KeyExpiration::Never,
    }
}

/// `POST /dashboard/keys`: "Generate API Key". Made, it answers 303 to the keys page with
/// the value in the one-time flash, so a reload cannot make a second key and the value is
/// shown once; refused, the form again with why.
pub(crate) async fn create(
    State(mut dashboard): State<Dashboard>,
    visit: Visit,
    Form(form): Form<CreateForm>,
) -> Page {
    let signed = match dashboard.signed(&visit).await {
        Ok(s) => s,
        Err(page) => return page,
    };
    let scopes = form.scopes.iter().map(|s| format::scope_value(s)).collect();
    let req = pb::CreateApiKeyRequest {
        name: form.name.clone(),
        expiration: expiration(&form.expiration).into(),
        scopes,
    };
    match dashboard
        .keys
        .create_api_key(visit.call(req, Some(&form.csrf)))
        .await
    {
        Ok(answer) => {
            let answer = answer.into_inner();
            let created = Flash::NewKey {
                name: answer.api_key.map(|k| k.name).unwrap_or_default(),
                secret: answer.secret,
            };
            let to = "/dashboard/keys".to_owned();
            flash::redirect_with(&visit, dashboard.secure_cookies, to, &created)
        }
        Err(status) => {
            let (code, message, _) = read_status(&status);
            if code == walletops_proto::ErrorCode::Unauthorized {
                return Page::from(status);
            }
            let http = crate::error::http_status(code);
            let more = Extras {
                error: Some(message),
                name: form.name,
                ..Extras::default()
            };
            page(&mut dashboard, &visit, signed, http, more).await
        }
    }
}

#[derive(Template)]
#[template(path = "dashboard/revoke.html")]
struct RevokeView {
    title: &'static str,
    signed: Option<Signed>,
    current: &'static str,
    key: KeyRow,
}

/// `GET /dashboard/keys/{id}/revoke`: asks to confirm.
pub(crate) async fn confirm_revoke(
    State(mut dashboard): State<Dashboard>,
    visit: Visit,
    Path(id): Path<String>,
) -> Page {
    let signed = match dashboard.signed(&visit).await {
        Ok(s) => s,
        Err(page) => return page,
    };
    let keys = match list_keys(&mut dashboard, &visit).await {
        Ok(keys) => keys,
        Err(page) => return page,
    };
    let Some(key) = keys.into_iter().find(|k| k.id == id) else {
        return super::error_page(
            walletops_proto::ErrorCode::NotFound,
            "no such API key".to_owned(),
        );
    };
    let view = RevokeView {
        title: "Revoke API key",
        signed: Some(signed),
        current: "keys",
        key: key.into(),
    };
    Page::render(StatusCode::OK, &view)
}

/// `POST /dashboard/keys/{id}/revoke`: revokes at once, for good, on every core.
pub(crate) async fn revoke(
    State(mut dashboard): State<Dashboard>,
    visit: Visit,
    Path(id): Path<String>,
    Form(form): Form<CsrfForm>,
) -> Page {
    let req = pb::RevokeApiKeyRequest { id };
    match dashboard
        .keys
        .revoke_api_key(visit.call(req, Some(&form.csrf)))
        .await
    {
        Ok(answer) => {
            let prefix = answer
                .into_inner()
                .api_key
                .map(|k| k.prefix)
                .unwrap_or_default();
            Page::SeeOther(format!("/dashboard/keys?revoked={prefix}"))
        }
        Err(status) => Page::from(status),
    }
}
