//! Signing in (password, or a one-time link that sets one) and out.
//!
//! The sign-in forms come before any session, so their CSRF token is doubled: a random
//! value in a `SameSite=Strict` cookie and in the form. The core checks that both came and
//! are equal; a cross-site page can send the form but cannot read or set the cookie.

use askama::Template;
use axum::{
    Form,
    extract::{Query, State},
    http::StatusCode,
};
use serde::Deserialize;
use walletops_proto::v1 as pb;

use super::{
    Dashboard, FORM_COOKIE, Page, Signed, Visit, dashboard_cookie, removed_session_cookie,
    session_cookie,
};
use crate::error::{http_status, read_status};

/// How long a sign-in form's token lives.
const FORM_COOKIE_SECS: i64 = 60 * 60;

#[derive(Template)]
#[template(path = "dashboard/sign_in.html")]
struct SignInView {
    title: &'static str,
    signed: Option<Signed>,
    current: &'static str,
    form_token: String,
    user_name: String,
    notice: Option<String>,
    error: Option<String>,
}

#[derive(Template)]
#[template(path = "dashboard/sign_in_link.html")]
struct SignInLinkView {
    title: &'static str,
    signed: Option<Signed>,
    current: &'static str,
    form_token: String,
    token: String,
    error: Option<String>,
}

/// The sign-in form's token: the visit's cookie, or a new one (set with the page).
fn form_token(
    visit: &Visit,
    dashboard: &Dashboard,
) -> (String, Option<axum_extra::extract::CookieJar>) {
    match visit.cookie(FORM_COOKIE).filter(|t| t.len() == 32) {
        Some(token) => (token, None),
        None => {
            let token = uuid::Uuid::new_v4().simple().to_string();
            let jar = visit.jar.clone().add(dashboard_cookie(
                FORM_COOKIE,
                token.clone(),
                FORM_COOKIE_SECS,
                dashboard.secure_cookies,
            ));
            (token, Some(jar))
        }
    }
}

fn with_form_cookie(jar: Option<axum_extra::extract::CookieJar>, page: Page) -> Page {
    match jar {
        Some(jar) => Page::WithCookies(jar, Box::new(page)),
        None => page,
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct SignInQuery {
    ended: Option<String>,
    signed_out: Option<String>,
}

/// `GET /dashboard/sign-in`.
pub(crate) async fn sign_in_page(
    State(dashboard): State<Dashboard>,
    visit: Visit,
    Query(q): Query<SignInQuery>,
) -> Page {
    let (form_token, jar) = form_token(&visit, &dashboard);
    let notice = if q.signed_out.is_some() {
        Some("You are signed out.".to_owned())
    } else {
        q.ended.map(|_| {
            "Sign in to continue: you are not signed in, or your session ended.".to_owned()
        })
    };
    let view = SignInView {
        title: "Sign in",
        signed: None,
        current: "",
        form_token,
        user_name: String::new(),
        notice,
        error: None,
    };
    with_form_cookie(jar, Page::render(StatusCode::OK, &view))
}

#[derive(Debug, Deserialize)]
pub(crate) struct SignInForm {
    #[serde(default)]
    user_name: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    form_token: String,
}

/// `POST /dashboard/sign-in`: a session cookie and the API Keys page, or the form again
/// with the core's refusal.
pub(crate) async fn sign_in(
    State(mut dashboard): State<Dashboard>,
    visit: Visit,
    Form(form): Form<SignInForm>,
) -> Page {
    let req = pb::SignInRequest {
        user_name: form.user_name.clone(),
        password: form.password,
        form_token: form.form_token,
        form_cookie: visit.cookie(FORM_COOKIE).unwrap_or_default(),
    };
    match dashboard.sessions.sign_in(visit.call(req, None)).await {
        Ok(answer) => signed_in(&dashboard, &visit, answer.into_inner().session_token),
        Err(status) => {
            let (code, message, _) = read_status(&status);
            let (form_token, jar) = form_token(&visit, &dashboard);
            let view = SignInView {
                title: "Sign in",
                signed: None,
                current: "",
                form_token,
                user_name: form.user_name,
                notice: None,
                error: Some(message),
            };
            with_form_cookie(jar, Page::render(http_status(code), &view))
        }
    }
}

fn signed_in(dashboard: &Dashboard, visit: &Visit, token: String) -> Page {
    let jar = visit
        .jar
        .clone()
        .add(session_cookie(token, dashboard.secure_cookies));
    Page::WithCookies(jar, Box::new(Page::SeeOther("/dashboard/keys".to_owned())))
}

#[derive(Debug, Deserialize)]
pub(crate) struct LinkQuery {
    #[serde(default)]
    token: String,
}

/// `GET /dashboard/sign-in-link?token=…`: the form that sets a password with the link.
pub(crate) async fn sign_in_link_page(
    State(dashboard): State<Dashboard>,
    visit: Visit,
    Query(q): Query<LinkQuery>,
) -> Page {
    let (form_token, jar) = form_token(&visit, &dashboard);
    let view = SignInLinkView {
        title: "Set your password",
        signed: None,
        current: "",
        form_token,
        token: q.token,
        error: None,
    };
    with_form_cookie(jar, Page::render(StatusCode::OK, &view))
}

#[derive(Debug, Deserialize)]
pub(crate) struct LinkForm {
    #[serde(default)]
    token: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    confirm: String,
    #[serde(default)]
    form_token: String,
}

/// `POST /dashboard/sign-in-link`: sets the password, signs in.
pub(crate) async fn redeem_sign_in_link(
    State(mut dashboard): State<Dashboard>,
    visit: Visit,
    Form(form): Form<LinkForm>,
) -> Page {
    let again = |dashboard: &Dashboard, status: StatusCode, error: String, token: String| {
        let (form_token, jar) = form_token(&visit, dashboard);
        let view = SignInLinkView {
            title: "Set your password",
            signed: None,
            current: "",
            form_token,
            token,
            error: Some(error),
        };
        with_form_cookie(jar, Page::render(status, &view))
    };
    // The one check of the form itself: the same password typed twice.
    if form.password != form.confirm {
        return again(
            &dashboard,
            StatusCode::BAD_REQUEST,
            "The two passwords differ: type the same password twice.".to_owned(),
            form.token,
        );
    }
    let req = pb::RedeemSignInLinkRequest {
        token: form.token.clone(),
        password: form.password,
        form_token: form.form_token,
        form_cookie: visit.cookie(FORM_COOKIE).unwrap_or_default(),
    };
    match dashboard
        .sessions
        .redeem_sign_in_link(visit.call(req, None))
        .await
    {
        Ok(answer) => signed_in(&dashboard, &visit, answer.into_inner().session_token),
        Err(status) => {
            let (code, message, _) = read_status(&status);
            again(&dashboard, http_status(code), message, form.token)
        }
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct CsrfForm {
    #[serde(default)]
    pub(crate) csrf: String,
}

/// `POST /dashboard/sign-out`: ends the session on every core and drops its cookie.
pub(crate) async fn sign_out(
    State(mut dashboard): State<Dashboard>,
    visit: Visit,
    Form(form): Form<CsrfForm>,
) -> Page {
    let ended = dashboard
        .sessions
        .sign_out(visit.call(pb::SignOutRequest {}, Some(&form.csrf)))
        .await;
    if let Err(status) = ended {
        return Page::from(status);
    }
    let jar = visit
        .jar
        .clone()
        .add(removed_session_cookie(dashboard.secure_cookies));
    Page::WithCookies(
        jar,
        Box::new(Page::SeeOther("/dashboard/sign-in?signed_out=1".to_owned())),
    )
}
