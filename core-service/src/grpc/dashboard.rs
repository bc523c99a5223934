//! `walletops.v1.DashboardService`: sign-in, sessions and the dashboard's views.

use tonic::{Request, Response, Status};
use walletops_proto::v1::{self as pb, dashboard_service_server::DashboardService};

use std::sync::Arc;

use super::convert;
use crate::{
    Core,
    auth::sessions::{Opened, Sessions, csrf_token},
    holdings::Holdings,
    ratelimit::RateLimiter,
    requests::ListTransactionsRequest,
    transactions::Transactions,
};
use walletops_chains::Registry;
use walletops_domain::{DashboardSession, User};

/// The gRPC face of `DashboardService`.
#[derive(Debug, Clone)]
pub struct DashboardApi {
    sessions: Sessions,
    limiter: Arc<RateLimiter>,
    chains: Arc<Registry>,
    transactions: Transactions,
    holdings: Holdings,
}

impl DashboardApi {
    /// The service over the parts of `core` it uses.
    pub fn new(core: &Core) -> Self {
        Self {
            sessions: core.sessions.clone(),
            limiter: core.limiter.clone(),
            chains: core.chains.clone(),
            transactions: core.transactions.clone(),
            holdings: core.holdings(),
        }
    }
}

fn session(user: &User, session: &DashboardSession, token: &str) -> pb::Session {
    pb::Session {
        user_id: user.id.to_string(),
        user_name: user.name.clone(),
        csrf_token: csrf_token(token),
        expires_at: Some(convert::timestamp(session.expires_at)),
    }
}

fn opened(o: Opened) -> (Option<pb::Session>, String) {
    let token = o.token.expose().to_owned();
    (Some(session(&o.user, &o.session, &token)), token)
}

#[tonic::async_trait]
impl DashboardService for DashboardApi {
    async fn sign_in(
        &self,
        request: Request<pb::SignInRequest>,
    ) -> Result<Response<pb::SignInResponse>, Status> {
        let client = crate::app::client_address(request.metadata()).to_owned();
        let req = request.into_inner();
        let o = self
            .sessions
            .sign_in(
                &self.limiter,
                req.user_name.trim(),
                &req.password,
                &client,
                (&req.form_token, &req.form_cookie),
            )
            .await?;
        let (session, session_token) = opened(o);
        Ok(Response::new(pb::SignInResponse {
            session,
            session_token,
        }))
    }

    async fn redeem_sign_in_link(
        &self,
        request: Request<pb::RedeemSignInLinkRequest>,
    ) -> Result<Response<pb::RedeemSignInLinkResponse>, Status> {
        let client = crate::app::client_address(request.metadata()).to_owned();
        let req = request.into_inner();
        let o = self
            .sessions
            .redeem_link(
                &self.limiter,
                req.token.trim(),
                &req.password,
                &client,
                (&req.form_token, &req.form_cookie),
            )
            .await?;
        let (session, session_token) = opened(o);
        Ok(Response::new(pb::RedeemSignInLinkResponse {
            session,
            session_token,
        }))
    }

    async fn get_session(
        &self,
        request: Request<pb::GetSessionRequest>,
    ) -> Result<Response<pb::GetSessionResponse>, Status> {
        let (s, token) = super::admission::session(&request)?;
        let user = self.sessions.user_of(&s).await?;
        Ok(Response::new(pb::GetSessionResponse {
            session: Some(session(&user, &s, &token)),
        }))
    }

    async fn sign_out(
        &self,
        request: Request<pb::SignOutRequest>,
    ) -> Result<Response<pb::SignOutResponse>, Status> {
        let (s, _) = super::admission::session(&request)?;
        self.sessions.end(s.id).await?;
        Ok(Response::new(pb::SignOutResponse {}))
    }

    async fn list_holdings(
        &self,
        request: Request<pb::ListHoldingsRequest>,
    ) -> Result<Response<pb::ListHoldingsResponse>, Status> {
        let caller = super::admission::caller(&request)?;
        let req = request.get_ref();
        let holdings = self
            .holdings
            .holdings(caller.user_id, req.fresh, req.all_chains)
            .await?;
        let holdings = holdings
            .into_iter()
            .map(|h| pb::Holding {
                wallet: Some(convert::wallet(h.wallet)),
                chains: h
                    .chains
                    .into_iter()
                    .map(|c| {
                        let (native, error) = match c.native {
                            Ok(b) => (Some(convert::balance(b)), None),
                            Err(e) => (None, Some(e)),
                        };
                        pb::ChainHolding {
                            chain: c.chain,
                            chain_name: c.chain_name,
                            native,
                            error,
                            explorer_url: c.explorer_url,
                        }
                    })
                    .collect(),
                other_chains: h.other_chains,
            })
            .collect();
        Ok(Response::new(pb::ListHoldingsResponse { holdings }))
    }

    async fn list_transactions(
        &self,
        request: Request<pb::ListTransactionsRequest>,
    ) -> Result<Response<pb::ListTransactionsResponse>, Status> {
        let caller = super::admission::caller(&request)?;
        let req = ListTransactionsRequest::parse(&self.chains, request.get_ref())?;
        let (records, next) = self
            .transactions
            .list(
                caller.user_id,
                req.chain.as_deref(),
                req.status,
                req.before,
                req.page_size,
            )
            .await?;
        let transactions = records
            .into_iter()
            .map(|tx| convert::transaction(tx, &self.chains))
            .collect();
        Ok(Response::new(pb::ListTransactionsResponse {
            transactions,
            next_page_token: next.map(|id| id.to_string()).unwrap_or_default(),
        }))
    }
}
