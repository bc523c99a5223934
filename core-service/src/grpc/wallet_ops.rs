//! `walletops.v1.WalletOpsService`: proto <-> domain. Every read takes its admitted caller,
//! parses its request (`requests`) and asks the domain; every write goes through
//! `Core::write`.

use tonic::{Request, Response, Status};
use walletops_proto::v1::{self as pb, wallet_ops_service_server::WalletOpsService};

use super::convert;
use crate::{
    Core,
    requests::{
        BalancesRequest, ListWalletsRequest, QuoteRequest, TransactionRequest, WatchRequest,
    },
    writes::{
        Write,
        kinds::{ApproveWrite, CallWrite, SendWrite, SwapWrite},
    },
};

/// The stream of `WatchTransactions`.
type Watching = std::pin::Pin<
    Box<dyn futures::Stream<Item = Result<pb::WatchTransactionsResponse, Status>> + Send>,
>;

/// The gRPC face of `WalletOpsService`.
#[derive(Debug, Clone)]
pub struct WalletOpsApi {
    core: Core,
}

impl WalletOpsApi {
    /// The service over `core`.
    pub fn new(core: Core) -> Self {
        Self { core }
    }
}

#[tonic::async_trait]
impl WalletOpsService for WalletOpsApi {
    async fn list_wallets(
        &self,
        request: Request<pb::ListWalletsRequest>,
    ) -> Result<Response<pb::ListWalletsResponse>, Status> {
        let caller = super::admission::caller(&request)?;
        let req = ListWalletsRequest::parse(request.get_ref())?;
        let wallets = self.core.wallets.list(caller.user_id, req.filter).await?;
        Ok(Response::new(pb::ListWalletsResponse {
            wallets: wallets.into_iter().map(convert::wallet).collect(),
        }))
    }

    async fn get_balances(
        &self,
        request: Request<pb::GetBalancesRequest>,
    ) -> Result<Response<pb::GetBalancesResponse>, Status> {
        let caller = super::admission::caller(&request)?;
        let req = BalancesRequest::parse(&self.core.chains, request.get_ref())?;
        let wallet = self
            .core
            .wallets
            .resolve_owned(
                caller.user_id,
                req.chain.family(),
                req.address.as_ref(),
                "address",
                true,
            )
            .await?;
        let balances = self
            .core
            .balances
            .read(req.chain, &wallet, &req.tokens, req.include_zero, req.fresh)
            .await?;
        Ok(Response::new(pb::GetBalancesResponse {
            balances: convert::balances(balances),
        }))
    }

    async fn get_transaction(
        &self,
        request: Request<pb::GetTransactionRequest>,
    ) -> Result<Response<pb::GetTransactionResponse>, Status> {
        let caller = super::admission::caller(&request)?;
        let req = TransactionRequest::parse(request.get_ref())?;
        let tx = self.core.transactions.get(caller.user_id, req.id).await?;
        Ok(Response::new(pb::GetTransactionResponse {
            transaction: Some(convert::transaction(tx, &self.core.chains)),
        }))
    }

    type WatchTransactionsStream = Watching;

    async fn watch_transactions(
        &self,
        request: Request<pb::WatchTransactionsRequest>,
    ) -> Result<Response<Watching>, Status> {
        let caller = super::admission::caller(&request)?;
        let req = WatchRequest::parse(&self.core.chains, request.get_ref())?;
        let slot = self.core.streams.open(caller.user_id, caller.key_id())?;
        let (limits, recheck) = super::WatchTerms::of(&self.core).of_caller(&caller);
        let user_id = caller.user_id;
        let watch = crate::events::watch(self.core.store.clone(), user_id, req, limits, recheck);
        let chains = self.core.chains.clone();
        // The slot goes with the stream: dropped when the watcher leaves or the stream ends.
        let stream = futures::stream::unfold((watch, slot), move |(mut watch, slot)| {
            let chains = chains.clone();
            async move {
                let sent = match watch.events.recv().await {
                    Some((event, tx)) => Ok(pb::WatchTransactionsResponse {
                        event_id: event.seq,
                        r#type: event.status.event_type(),
                        transaction: Some(convert::transaction(tx, &chains)),
                    }),
                    None => Err(super::watch_ended(watch.end.try_recv().ok()?)),
                };
                Some((sent, (watch, slot)))
            }
        });
        Ok(Response::new(Box::pin(stream)))
    }

    async fn send(
        &self,
        request: Request<pb::SendRequest>,
    ) -> Result<Response<pb::SendResponse>, Status> {
        let caller = super::admission::caller(&request)?;
        let (metadata, _, message) = request.into_parts();
        let written = self
            .core
            .write(&caller, &metadata, Write::of::<SendWrite>(message))
            .await?;
        Ok(Response::new(pb::SendResponse {
            submission: Some(convert::written(written, &self.core.chains)),
        }))
    }

    async fn approve_token(
        &self,
        request: Request<pb::ApproveTokenRequest>,
    ) -> Result<Response<pb::ApproveTokenResponse>, Status> {
        let caller = super::admission::caller(&request)?;
        let (metadata, _, message) = request.into_parts();
        let written = self
            .core
            .write(&caller, &metadata, Write::of::<ApproveWrite>(message))
            .await?;
        Ok(Response::new(pb::ApproveTokenResponse {
            submission: Some(convert::written(written, &self.core.chains)),
        }))
    }

    async fn call_contract(
        &self,
        request: Request<pb::CallContractRequest>,
    ) -> Result<Response<pb::CallContractResponse>, Status> {
        let caller = super::admission::caller(&request)?;
        let (metadata, _, message) = request.into_parts();
        let written = self
            .core
            .write(&caller, &metadata, Write::of::<CallWrite>(message))
            .await?;
        Ok(Response::new(pb::CallContractResponse {
            submission: Some(convert::written(written, &self.core.chains)),
        }))
    }

    async fn get_quote(
        &self,
        request: Request<pb::GetQuoteRequest>,
    ) -> Result<Response<pb::GetQuoteResponse>, Status> {
        let caller = super::admission::caller(&request)?;
        let req = QuoteRequest::parse(&self.core.chains, request.get_ref())?;
        let quote = self.core.quotes.quote_for(&caller, &req).await?;
        Ok(Response::new(pb::GetQuoteResponse {
            quote: Some(convert::quote(quote)),
        }))
    }

    async fn swap(
        &self,
        request: Request<pb::SwapRequest>,
    ) -> Result<Response<pb::SwapResponse>, Status> {
        let caller = super::admission::caller(&request)?;
        let (metadata, _, message) = request.into_parts();
        let written = self
            .core
            .write(&caller, &metadata, Write::of::<SwapWrite>(message))
            .await?;
        Ok(Response::new(pb::SwapResponse {
            submission: Some(convert::written(written, &self.core.chains)),
        }))
    }

    async fn simulate_write(
        &self,
        request: Request<pb::SimulateWriteRequest>,
    ) -> Result<Response<pb::SimulateWriteResponse>, Status> {
        use pb::simulate_write_request::Write as Asked;
        let caller = super::admission::caller(&request)?;
        let write = match request.into_inner().write {
            Some(Asked::Send(m)) => Write::of::<SendWrite>(m),
            Some(Asked::ApproveToken(m)) => Write::of::<ApproveWrite>(m),
            Some(Asked::CallContract(m)) => Write::of::<CallWrite>(m),
            Some(Asked::Swap(m)) => Write::of::<SwapWrite>(m),
            None => {
                return Err(crate::error::WalletOpsError::invalid(
                    "write",
                    "is required: one of send, approve_token, call_contract, swap",
                )
                .into());
            }
        };
        let dry_run = self.core.simulate_write(&caller, write).await?;
        Ok(Response::new(convert::dry_run(dry_run)))
    }
}
