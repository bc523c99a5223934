//! The web dashboard under `/dashboard`: server-rendered pages (askama templates embedded
//! in the binary, a few lines of optional JavaScript) over the core's `DashboardService`,
//! `ApiKeyService`, `ApprovalService`, `WebhookService` and nothing else.
//!
//! Like the API routes, a page only translates: form fields and cookies become a request
//! message and metadata (`x-session-token`, `x-csrf-token`, `x-client-address`), the core
//! decides, and its answer (or refusal) becomes HTML. The session cookie is `HttpOnly`,
//! `SameSite=Strict`, scoped to `/dashboard`, and `Secure` when the dashboard is served
//! over https.
//!
//! - `auth`: sign-in, the one-time sign-in link, sign-out.
//! - `keys`: the API Keys section.
//! - `limits`: a key's spend limits and approval thresholds.
//! - `policy`: a key's policy rules, shown on its limits page.
//! - `approvals`: writes held for approval, approved or rejected here.
//! - `deposits`: money that arrived at the user's wallets.
//! - `payouts`: many recipients paid at once, from a checked CSV upload.
//! - `views`: the wallets and transactions pages.
//! - `webhooks`: the Webhooks page, an endpoint's deliveries.
//! - `format`: amounts, times and labels as the pages show them.
//! - `flash`: a secret made by a form, carried sealed across its redirect, shown once.

mod approvals;
mod auth;
mod deposits;
mod flash;
mod format;
mod keys;
mod limits;
mod payouts;
mod policy;
mod views;
mod webhooks;

use std::net::SocketAddr;

use crate::CoreChannel;
use askama::Template;
use axum::{
    Router,
    extract::{FromRequestParts, Request},
    http::{HeaderValue, StatusCode, header, request::Parts},
    middleware::{self, Next},
    response::{Html, IntoResponse, Redirect, Response},
    routing::get,
};
use axum_extra::extract::CookieJar;
use tonic::metadata::{AsciiMetadataValue, MetadataKey};

use walletops_proto::{
    CLIENT_ADDRESS_HEADER, CSRF_TOKEN_HEADER, ErrorCode, SESSION_TOKEN_HEADER,
    request_id::REQUEST_ID_HEADER,
    v1::{
        self as pb, api_key_service_client::ApiKeyServiceClient,
        approval_service_client::ApprovalServiceClient,
        dashboard_service_client::DashboardServiceClient,
        deposit_service_client::DepositServiceClient, payout_service_client::PayoutServiceClient,
        webhook_service_client::WebhookServiceClient,
    },
};

use crate::error::read_status;

/// The session cookie.
const SESSION_COOKIE: &str = "walletops_session";
/// The cookie that doubles the sign-in forms' token (they have no session yet).
const FORM_COOKIE: &str = "walletops_form";
/// Where every dashboard cookie is sent.
const COOKIE_PATH: &str = "/dashboard";
/// The session cookie's lifetime: the session's absolute timeout (the core ends it sooner
/// when idle).
const SESSION_COOKIE_SECS: i64 = 12 * 60 * 60;

/// The client's address, which the edge's server puts in each request's extensions.
#[derive(Debug, Clone, Copy)]
pub struct PeerAddr(pub SocketAddr);

/// The dashboard's state: clients of the core, and how cookies are marked.
#[derive(Clone, Debug)]
pub(crate) struct Dashboard {
    sessions: DashboardServiceClient<CoreChannel>,
    keys: ApiKeyServiceClient<CoreChannel>,
    approvals: ApprovalServiceClient<CoreChannel>,
    deposits: DepositServiceClient<CoreChannel>,
    payouts: PayoutServiceClient<CoreChannel>,
    webhooks: WebhookServiceClient<CoreChannel>,
    secure_cookies: bool,
}

/// The dashboard's routes over `core`; `secure_cookies` when it is reached over https.
pub(crate) fn router(core: CoreChannel, secure_cookies: bool) -> Router {
    let state = Dashboard {
        sessions: DashboardServiceClient::new(core.clone()),
        keys: ApiKeyServiceClient::new(core.clone()),
        approvals: ApprovalServiceClient::new(core.clone()),
        deposits: DepositServiceClient::new(core.clone()),
        payouts: PayoutServiceClient::new(core.clone()),
        webhooks: WebhookServiceClient::new(core),
        secure_cookies,
    };
    Router::new()
        .route("/", get(|| async { Redirect::to("/dashboard/keys") }))
        .route("/sign-in", get(auth::sign_in_page).post(auth::sign_in))
        .route(
            "/sign-in-link",
            get(auth::sign_in_link_page).post(auth::redeem_sign_in_link),
        )
        .route("/sign-out", axum::routing::post(auth::sign_out))
        .route("/keys", get(keys::list).post(keys::create))
        .route(
            "/keys/{id}/revoke",
            get(keys::confirm_revoke).post(keys::revoke),
        )
        .route("/keys/{id}/limits", get(limits::show).post(limits::set))
        .route(
            "/keys/{id}/limits/remove",
            axum::routing::post(limits::remove),
        )
        .route("/keys/{id}/unfreeze", axum::routing::post(limits::unfreeze))
        .route("/keys/{id}/policy", axum::routing::post(policy::add))
        .route(
            "/keys/{id}/policy/remove",
            axum::routing::post(policy::remove),
        )
        .route("/wallets", get(views::wallets))
        .route("/transactions", get(views::transactions))
        .route("/deposits", get(deposits::list))
        .route("/payouts", get(payouts::list).post(payouts::upload))
        .route("/payouts/{id}", get(payouts::show))
        .route("/approvals", get(approvals::list))
        .route(
            "/approvals/{id}/approve",
            axum::routing::post(approvals::approve),
        )
        .route(
            "/approvals/{id}/reject",
            axum::routing::post(approvals::reject),
        )
        .route("/webhooks", get(webhooks::list))
        .route("/webhooks/{id}", get(webhooks::deliveries))
        .route(
            "/webhooks/{id}/delete",
            axum::routing::post(webhooks::delete),
        )
        .route(
            "/webhooks/{id}/rotate",
            axum::routing::post(webhooks::rotate),
        )
        .route(
            "/webhooks/{id}/enable",
            axum::routing::post(webhooks::enable),
        )
        .route(
            "/webhooks/{id}/replay",
            axum::routing::post(webhooks::replay),
        )
        .route("/favicon.ico", get(favicon))
        .route("/assets/favicon.svg", get(favicon))
        .route("/assets/dashboard.css", get(stylesheet))
        .route("/assets/dashboard.js", get(script))
        .with_state(state)
        .layer(middleware::from_fn(page_headers))
}

/// Headers every dashboard answer carries: nothing is cached, framed, sniffed or sent as a
/// referrer (a sign-in link's token is in its URL), and only this origin's assets run.
async fn page_headers(req: Request, next: Next) -> Response {
    let mut response = next.run(req).await;
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CACHE_CONTROL, "no-store"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
             connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

async fn stylesheet() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        include_str!("../../assets/dashboard.css"),
    )
}

/// The icon, for `/favicon.ico` (which browsers ask for on their own) and the pages'
/// `<link rel="icon">`: a small SVG, so one file serves every size.
pub(crate) async fn favicon() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "image/svg+xml"),
            (header::CACHE_CONTROL, "public, max-age=86400"),
        ],
        include_str!("../../assets/favicon.svg"),
    )
}

async fn script() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        include_str!("../../assets/dashboard.js"),
    )
}

/// What every request of a signed-in page brings: its session cookie, the request id, and
/// the client's address.
pub(crate) struct Visit {
    jar: CookieJar,
    request_id: Option<String>,
    client: Option<String>,
}

impl<S: Send + Sync> FromRequestParts<S> for Visit {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let jar = CookieJar::from_request_parts(parts, state).await?;
        Ok(Self {
            jar,
            request_id: parts
                .headers
                .get(REQUEST_ID_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
            // Stamped by the edge from the connection's peer (`stamp_client`).
            client: parts
                .headers
                .get(CLIENT_ADDRESS_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
        })
    }
}

impl Visit {
    fn cookie(&self, name: &str) -> Option<String> {
        self.jar.get(name).map(|c| c.value().to_owned())
    }

    /// `message` as a call of the core with this visit's metadata, and `csrf` (a form's
    /// hidden field) when the call changes something.
    fn call<T>(&self, message: T, csrf: Option<&str>) -> tonic::Request<T> {
        let mut req = tonic::Request::new(message);
        let session = self.cookie(SESSION_COOKIE);
        for (name, value) in [
            (SESSION_TOKEN_HEADER, session.as_deref()),
            (CSRF_TOKEN_HEADER, csrf),
            (REQUEST_ID_HEADER, self.request_id.as_deref()),
            (CLIENT_ADDRESS_HEADER, self.client.as_deref()),
        ] {
            if let Some(value) = value.and_then(|v| v.parse::<AsciiMetadataValue>().ok()) {
                req.metadata_mut()
                    .insert(MetadataKey::from_static(name), value);
            }
        }
        req
    }
}

/// The signed-in user, as a page's header shows it.
pub(crate) struct Signed {
    /// The user's name.
    pub(crate) user_name: String,
    /// The session's CSRF token, for the page's forms.
    pub(crate) csrf: String,
}

impl Dashboard {
    /// The session of `visit`, or the answer that sends it to sign in.
    async fn signed(&mut self, visit: &Visit) -> Result<Signed, Page> {
        let session = self
            .sessions
            .get_session(visit.call(pb::GetSessionRequest {}, None))
            .await
            .map_err(Page::from)?
            .into_inner()
            .session
            .unwrap_or_default();
        Ok(Signed {
            user_name: session.user_name,
            csrf: session.csrf_token,
        })
    }
}

/// A page, or an answer that is not one (a redirect, a refusal).
pub(crate) enum Page {
    /// Rendered HTML.
    Html(StatusCode, String),
    /// Go elsewhere (303: a form's answer is fetched with GET).
    SeeOther(String),
    /// A cookie change and what goes with it.
    WithCookies(CookieJar, Box<Page>),
}

impl Page {
    fn render(status: StatusCode, template: &impl Template) -> Self {
        match template.render() {
            Ok(html) => Self::Html(status, html),
            Err(e) => {
                tracing::error!(error = %e, "rendering a dashboard page");
                Self::Html(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal error".to_owned(),
                )
            }
        }
    }
}

impl IntoResponse for Page {
    fn into_response(self) -> Response {
        match self {
            Self::Html(status, html) => (status, Html(html)).into_response(),
            Self::SeeOther(to) => Redirect::to(&to).into_response(),
            Self::WithCookies(jar, page) => (jar, *page).into_response(),
        }
    }
}

/// A refusal of the core as a page: not signed in goes to the sign-in page, anything else
/// is an error page with the contract's status and the core's message.
impl From<tonic::Status> for Page {
    fn from(status: tonic::Status) -> Self {
        let (code, message, _) = read_status(&status);
        if code == ErrorCode::Unauthorized {
            return Self::SeeOther("/dashboard/sign-in?ended=1".to_owned());
        }
        error_page(code, message)
    }
}

/// A refusal of a form's change: a refused session or CSRF token is the error page (or
/// sign-in); anything else is the form's page again, with this status and message.
fn form_refusal(status: tonic::Status) -> Result<(StatusCode, String), Page> {
    let (code, message, _) = read_status(&status);
    if matches!(code, ErrorCode::Unauthorized | ErrorCode::Forbidden) {
        return Err(Page::from(status));
    }
    Ok((crate::error::http_status(code), message))
}

#[derive(Template)]
#[template(path = "dashboard/error.html")]
struct ErrorView {
    title: &'static str,
    signed: Option<Signed>,
    current: &'static str,
    code: &'static str,
    message: String,
}

fn error_page(code: ErrorCode, message: String) -> Page {
    let title = match code {
        ErrorCode::Forbidden => "Not allowed",
        ErrorCode::RateLimited => "Too many requests",
        ErrorCode::NotFound => "Not found",
        ErrorCode::InvalidInput => "Check the form",
        _ => "Something went wrong",
    };
    Page::render(
        crate::error::http_status(code),
        &ErrorView {
            title,
            signed: None,
            current: "",
            code: code.as_str(),
            message,
        },
    )
}

/// A dashboard cookie named `name` holding `value`, for `max_age` seconds.
fn dashboard_cookie(
    name: &'static str,
    value: String,
    max_age: i64,
    secure: bool,
) -> axum_extra::extract::cookie::Cookie<'static> {
    axum_extra::extract::cookie::Cookie::build((name, value))
        .path(COOKIE_PATH)
        .http_only(true)
        .same_site(axum_extra::extract::cookie::SameSite::Strict)
        .secure(secure)
        .max_age(cookie::time::Duration::seconds(max_age))
        .build()
}

/// The session cookie for `token`.
fn session_cookie(token: String, secure: bool) -> axum_extra::extract::cookie::Cookie<'static> {
    dashboard_cookie(SESSION_COOKIE, token, SESSION_COOKIE_SECS, secure)
}

/// The cookie that removes the session cookie.
fn removed_session_cookie(secure: bool) -> axum_extra::extract::cookie::Cookie<'static> {
    dashboard_cookie(SESSION_COOKIE, String::new(), 0, secure)
}
