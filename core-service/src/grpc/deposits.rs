//! `walletops.v1.DepositService`: the caller's deposits, listed, one by one, and watched.

use tonic::{Request, Response, Status};
use walletops_proto::v1::{self as pb, deposit_service_server::DepositService};

use crate::{Core, balances::Units, events::body::deposit, requests::deposits as parse};

/// The gRPC face of `DepositService`.
#[derive(Debug, Clone)]
pub struct DepositApi {
    core: Core,
    units: Units,
}

impl DepositApi {
    /// The service over `core`.
    pub fn new(core: Core) -> Self {
        let units = core.units_known();
        Self { core, units }
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
        let req = parse::list(&self.core.chains, request.get_ref())?;
        let (deposits, next) = self.core.deposits.list(caller.user_id, req).await?;
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
        let found = self.core.deposits.get(caller.user_id, id).await?;
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
        let which = parse::watch(&self.core.chains, request.get_ref())?;
        let slot = self.core.streams.open(caller.user_id, caller.key_id())?;
        let (limits, recheck) = super::watch_terms(&self.core, &caller);
        let watch = self
            .core
            .deposits
            .watch(caller.user_id, which, limits, recheck);
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
