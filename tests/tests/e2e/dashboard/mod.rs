//! The dashboard: its sessions and sign-in over gRPC (`sessions`), key scopes over REST and
//! gRPC (`scopes`), its views of wallets and transactions (`views`), and the pages driven in
//! a real Chromium (`browser`).

mod browser;
mod forms;
mod limits;
mod scopes;
mod sessions;
mod views;

use alloy::primitives::{Address, U256};
use tonic::{metadata::MetadataValue, transport::Channel};
use walletops_proto::v1::{self as pb, dashboard_service_client::DashboardServiceClient};
use walletops_tests::{Backend, Service, anvil::Anvil};

pub(crate) type Dashboard = DashboardServiceClient<Channel>;

const ETH: u128 = 1_000_000_000_000_000_000;

/// A service with chain `anvil`, its owner's default EVM wallet holding 10 ETH.
async fn funded(b: Backend) -> anyhow::Result<(Anvil, Service, Address)> {
    let anvil = Anvil::start().await?;
    // The deposits page has something to show.
    let scanned = "[chains.anvil.deposits]\npoll_interval_ms = 200\n";
    let svc = Service::start_with(b, anvil.service_options(scanned, &[])).await?;
    let wallet = anvil
        .fund_default_wallet(&svc.rest(&svc.api_key), U256::from(10 * ETH))
        .await?;
    Ok((anvil, svc, wallet))
}

/// A password the tests set.
const PASSWORD: &str = "correct horse battery staple";

/// `message` under dashboard session `token`, with `csrf` when given, from `client`.
pub(crate) fn session_call<T>(
    message: T,
    token: &str,
    csrf: Option<&str>,
) -> anyhow::Result<tonic::Request<T>> {
    let mut req = tonic::Request::new(message);
    req.metadata_mut()
        .insert("x-session-token", MetadataValue::try_from(token)?);
    if let Some(csrf) = csrf {
        req.metadata_mut()
            .insert("x-csrf-token", MetadataValue::try_from(csrf)?);
    }
    Ok(req)
}

/// `message` as if from client address `client` (as the REST edge says it).
fn from_client<T>(message: T, client: &str) -> anyhow::Result<tonic::Request<T>> {
    let mut req = tonic::Request::new(message);
    req.metadata_mut()
        .insert("x-client-address", MetadataValue::try_from(client)?);
    Ok(req)
}

/// The token of the sign-in link the first start printed.
fn link_token(svc: &Service) -> anyhow::Result<String> {
    svc.sign_in_link
        .split_once("token=")
        .map(|(_, t)| t.to_owned())
        .ok_or_else(|| anyhow::anyhow!("no token in {}", svc.sign_in_link))
}

/// Sets the owner's password with the first start's link; its session token and CSRF token.
pub(crate) async fn redeem(
    svc: &Service,
    dashboard: &mut Dashboard,
) -> anyhow::Result<(String, String)> {
    let answer = dashboard
        .redeem_sign_in_link(pb::RedeemSignInLinkRequest {
            token: link_token(svc)?,
            password: PASSWORD.to_owned(),
            form_token: "f".repeat(32),
            form_cookie: "f".repeat(32),
        })
        .await?
        .into_inner();
    let csrf = answer.session.map(|s| s.csrf_token).unwrap_or_default();
    Ok((answer.session_token, csrf))
}

/// A sign-in of `user` with `password` from `client`.
fn sign_in(
    user: &str,
    password: &str,
    client: &str,
) -> anyhow::Result<tonic::Request<pb::SignInRequest>> {
    from_client(
        pb::SignInRequest {
            user_name: user.to_owned(),
            password: password.to_owned(),
            form_token: "t".repeat(32),
            form_cookie: "t".repeat(32),
        },
        client,
    )
}
