//! `walletops.v1.DepositService`: the caller's deposits, listed, one by one, and watched.

use tonic::{Request, Response, Status};
use walletops_proto::v1::{self as pb, deposit_service_server::DepositService};

use std::sync::Arc;

use super::WatchTerms;
use crate::{
    Core, balances::Units, deposits::Deposits, events::body::deposit, requests::deposits as parse,
    streams::Streams,
};
use walletops_chains::Registry;

/// The gRPC face of `DepositService`.
#[derive(Debug, Clone)]
pub struct DepositApi {
    chains: Arc<Registry>,
    deposits: Deposits,
    streams: Arc<Streams>,
    watches: WatchTerms,
    units: Units,
}

impl DepositApi {
    /// The service over the parts of `core` it uses.
    pub fn new(core: &Core) -> Self {
        Self {
            chains: core.chains.clone(),
            deposits: core.deposits.clone(),
            streams: core.streams.clone(),
            watches: WatchTerms::of(core),
            units: core.units_known(),
        }
    }
}

/// The stream `WatchDeposits` answers with.
pub(super) type WatchingDeposits = std::pin::Pin<
    Box<dyn futures::Stream<Item = Result<pb::WatchDepositsResponse, Status>> + Send + 'static>,
>;

#[tonic::async_trait]
impl DepositService for DepositApi {
    async fn list_deposits(
        &self,
        request: Request<pb::ListDepositsRequest>,
    ) -> Result<Response<pb::ListDepositsResponse>, Status> {
        let caller = super::admission::caller(&request)?;
        let req = parse::list(&self.chains, request.get_ref())?;
        let (deposits, next) = self.deposits.list(caller.user_id, req).await?;
        Ok(Response::new(pb::ListDepositsResponse {
            deposits: deposits
                .into_iter()
                .map(|d| deposit(d, &self.units))
                .collect(),
            next_page_token: next.map(|t| t.to_string()),
        }))
    }

    async fn get_deposit(
        &self,
        request: Request<pb::GetDepositRequest>,
    ) -> Result<Response<pb::GetDepositResponse>, Status> {
        let caller = super::admission::caller(&request)?;
        let id = parse::deposit_id(request.get_ref())?;
        let found = self.deposits.get(caller.user_id, id).await?;
        Ok(Response::new(pb::GetDepositResponse {
            deposit: Some(deposit(found, &self.units)),
        }))
    }

    type WatchDepositsStream = WatchingDeposits;

    async fn watch_deposits(
        &self,
        request: Request<pb::WatchDepositsRequest>,
    ) -> Result<Response<WatchingDeposits>, Status> {
        let caller = super::admission::caller(&request)?;
        let which = parse::watch(&self.chains, request.get_ref())?;
        let slot = self.streams.open(caller.user_id, caller.key_id())?;
        let (limits, recheck) = self.watches.of_caller(&caller);
        let watch = self.deposits.watch(caller.user_id, which, limits, recheck);
        let units = self.units.clone();
        // The slot goes with the stream: dropped when the watcher leaves or the stream ends.
        let stream = futures::stream::unfold((watch, slot), move |(mut watch, slot)| {
            let units = units.clone();
            async move {
                let sent = match watch.events.recv().await {
                    Some((event, found)) => Ok(pb::WatchDepositsResponse {
                        event_id: event.seq,
                        r#type: event.state.event_type(),
                        deposit: Some(deposit(found, &units)),
                    }),
                    None => Err(super::watch_ended(watch.end.try_recv().ok()?)),
                };
                Some((sent, (watch, slot)))
            }
        });
        Ok(Response::new(Box::pin(stream)))
    }
}
