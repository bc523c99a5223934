//! The gRPC server: `WalletOpsService`, `ApiKeyService`, `DashboardService`,
//! `WebhookService`, `ApprovalService` and (on the admin listener) `AdminService` beside
//! `grpc.health.v1` and server reflection (v1 and v1alpha: grpcurl 1.8 speaks only v1alpha),
//! wrapped in the request-id and tracing layers. One file per service, proto <-> domain only.

mod admin;
mod admission;
mod api_keys;
mod approvals;
mod client;
mod convert;
mod dashboard;
mod deposits;
mod in_process;
mod incoming;
mod metered;
mod payouts;
pub mod status;
mod wallet_ops;
mod webhooks;

use std::{any::Any, convert::Infallible, future::Future, net::IpAddr, sync::Arc};

use http::Request;
use tokio::net::TcpListener;
use tonic::{
    service::{Routes, RoutesBuilder},
    transport::Server,
};
use tonic_health::{
    ServingStatus,
    pb::{
        HealthCheckRequest, HealthCheckResponse, health_check_response,
        health_server::{Health, HealthServer},
    },
};
use tower::ServiceBuilder;
use tower_http::{
    catch_panic::CatchPanicLayer,
    request_id::{PropagateRequestIdLayer, SetRequestIdLayer},
    trace::{DefaultOnFailure, TraceLayer},
};
use walletops_proto::channel::{CallFailed, CoreChannel};
use walletops_proto::{
    request_id::{self, MakeRequestUuidV7, REQUEST_ID_HEADER},
    v1::{
        admin_service_server::AdminServiceServer, api_key_service_server::ApiKeyServiceServer,
        approval_service_server::ApprovalServiceServer,
        dashboard_service_server::DashboardServiceServer,
        deposit_service_server::DepositServiceServer, payout_service_server::PayoutServiceServer,
        wallet_ops_service_server::WalletOpsServiceServer,
        webhook_service_server::WebhookServiceServer,
    },
};
use walletops_tls::ServerTls;

pub use admin::AdminApi;
pub use api_keys::ApiKeyApi;
pub use approvals::ApprovalApi;
pub use dashboard::DashboardApi;
pub use deposits::DepositApi;
pub use in_process::in_process;
pub use payouts::PayoutApi;
pub use wallet_ops::WalletOpsApi;
pub use webhooks::WebhookApi;

use crate::Core;
use admission::AdmissionLayer;

/// The span of one gRPC call, carrying its request id (set by the layer before it).
fn call_span<B>(req: &Request<B>) -> tracing::Span {
    let id = req
        .headers()
        .get(REQUEST_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    tracing::info_span!(
        "grpc",
        request_id = %id,
        method = %req.uri().path(),
        key = tracing::field::Empty,
    )
}

/// `grpc.health.v1.Health`, whose watch streams end once they have told their watcher that
/// the core is draining: an open watch (a load balancer's) would otherwise hold the graceful
/// stop until its grace ran out.
struct DrainingHealth(tonic_health::server::HealthService);

#[tonic::async_trait]
impl Health for DrainingHealth {
    async fn check(
        &self,
        request: tonic::Request<HealthCheckRequest>,
    ) -> Result<tonic::Response<HealthCheckResponse>, tonic::Status> {
        self.0.check(request).await
    }

    type WatchStream = std::pin::Pin<
        Box<dyn futures::Stream<Item = Result<HealthCheckResponse, tonic::Status>> + Send>,
    >;

    async fn watch(
        &self,
        request: tonic::Request<HealthCheckRequest>,
    ) -> Result<tonic::Response<Self::WatchStream>, tonic::Status> {
        use futures::StreamExt as _;
        let statuses = self.0.watch(request).await?.into_inner();
        // NOT_SERVING is only ever set on stopping: it is the last thing a watcher hears.
        let until_draining = futures::stream::unfold(
            (statuses, false),
            |(mut statuses, told)| async move {
                if told {
                    return None;
                }
                let next = statuses.next().await?;
                let draining = matches!(&next, Ok(r) if r.status() == health_check_response::ServingStatus::NotServing);
                Some((next, (statuses, draining)))
            },
        );
        Ok(tonic::Response::new(Box::pin(until_draining)))
    }
}

/// Which services a listener serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Surface {
    /// What API keys and dashboard sessions call: `WalletOpsService`, `ApiKeyService`,
    /// `DashboardService`.
    Public,
    /// `AdminService` alone, on `admin_addr`.
    Admin,
}

/// A gRPC listener: its socket, and TLS on it when configured.
#[derive(Debug)]
pub struct Listener {
    /// The bound socket.
    pub tcp: TcpListener,
    /// TLS on the socket; none: plain HTTP/2.
    pub tls: Option<Arc<ServerTls>>,
}

/// The public services: what API keys and dashboard sessions call.
fn add_public(core: &Core, routes: &mut RoutesBuilder) {
    routes
        .add_service(WalletOpsServiceServer::new(WalletOpsApi::new(core.clone())))
        .add_service(ApiKeyServiceServer::new(ApiKeyApi::new(
            core.keys.clone(),
            core.limits.clone(),
            core.chains.clone(),
            core.units_known(),
        )))
        .add_service(DashboardServiceServer::new(DashboardApi::new(core)))
        .add_service(WebhookServiceServer::new(WebhookApi::new(
            core.webhooks.clone(),
            core.keys.clone(),
        )))
        .add_service(ApprovalServiceServer::new(ApprovalApi::new(
            core.approvals.clone(),
            core.units_known(),
        )))
        .add_service(DepositServiceServer::new(DepositApi::new(core)))
        .add_service(PayoutServiceServer::new(PayoutApi::new(core.clone())));
}

/// `routes` behind what every call passes through first, on a listener or from the edge in
/// this process: the client's address, the request id, the call's span, its metrics and
/// its admission.
fn layered(routes: Routes, trusted: Vec<IpAddr>, admission: AdmissionLayer) -> CoreChannel {
    CoreChannel::new(
        ServiceBuilder::new()
            .map_err(|never: Infallible| -> CallFailed { match never {} })
            .map_response(|answer: http::Response<_>| answer.map(tonic::body::Body::new))
            .map_request(move |req| client::resolve(req, &trusted))
            .map_request(request_id::drop_malformed)
            .layer(SetRequestIdLayer::x_request_id(MakeRequestUuidV7))
            .layer(PropagateRequestIdLayer::x_request_id())
            .layer(
                TraceLayer::new_for_grpc()
                    .make_span_with(call_span)
                    // A refused request is not a server failure; real internal errors are
                    // logged where they are mapped to a status.
                    .on_failure(DefaultOnFailure::new().level(tracing::Level::DEBUG)),
            )
            .layer(metered::MeteredLayer)
            // A handler that panics answers INTERNAL (the panic itself is logged by the
            // hook) rather than dropping the call: the edge in this process runs the handler
            // in its connection's task, which the panic would otherwise end.
            .layer(CatchPanicLayer::custom(|_: Box<dyn Any + Send>| {
                tonic::Status::internal("internal error").into_http::<tonic::body::Body>()
            }))
            .layer(admission)
            .service(routes),
    )
}

/// Why a watch (of transactions or deposits) ended, as its stream's last answer.
fn watch_ended(end: crate::events::WatchEnd) -> tonic::Status {
    use crate::events::WatchEnd;
    match end {
        WatchEnd::TooSlow { last_sent } => tonic::Status::resource_exhausted(format!(
            "the watcher left its events unread too long and was cut off; reconnect with after_event_id {last_sent}"
        )),
        WatchEnd::Failed(e) => tonic::Status::from(e),
        WatchEnd::Lifetime {
            last_sent,
            lifetime,
        } => tonic::Status::from(crate::error::WalletOpsError::ServiceUnavailable(format!(
            "this stream has been open {} s, the longest a stream lasts (streams.max_lifetime_secs); reconnect with after_event_id {last_sent} (Last-Event-ID over REST)",
            lifetime.as_secs()
        ))),
    }
}

/// How the watches a service serves are bounded: the stream lifetime configured, and the
/// check that the watcher's key or session still stands.
#[derive(Debug, Clone)]
struct WatchTerms {
    keys: crate::auth::ApiKeys,
    lifetime: std::time::Duration,
}

impl WatchTerms {
    /// The terms `core` is configured with.
    fn of(core: &Core) -> Self {
        Self {
            keys: core.keys.clone(),
            lifetime: core.config.streams.lifetime(),
        }
    }

    /// The limits and the recheck of a watch of `caller`.
    fn of_caller(
        &self,
        caller: &crate::auth::Caller,
    ) -> (crate::events::WatchLimits, crate::events::Recheck) {
        let (keys, watcher) = (self.keys.clone(), caller.clone());
        let recheck: crate::events::Recheck = Box::new(move || {
            let (keys, caller) = (keys.clone(), watcher.clone());
            Box::pin(async move { keys.still_stands(&caller).await })
        });
        let limits = crate::events::WatchLimits {
            lifetime: self.lifetime,
            ..Default::default()
        };
        (limits, recheck)
    }
}

/// Serves the core's public services on `listener` until `shutdown` completes.
pub async fn serve(
    core: Core,
    listener: Listener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    serve_on(core, listener, shutdown, Surface::Public).await
}

/// Serves `AdminService` alone on `listener` (the `admin_addr` listener) until `shutdown`
/// completes: the operators' API never shares the public listener.
pub async fn serve_admin(
    core: Core,
    listener: Listener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    serve_on(core, listener, shutdown, Surface::Admin).await
}

async fn serve_on(
    core: Core,
    listener: Listener,
    shutdown: impl Future<Output = ()> + Send + 'static,
    surface: Surface,
) -> anyhow::Result<()> {
    use tonic::server::NamedService;
    let public = surface == Surface::Public;
    let served: Vec<&'static str> = if public {
        vec![
            WalletOpsServiceServer::<WalletOpsApi>::NAME,
            ApiKeyServiceServer::<ApiKeyApi>::NAME,
            DashboardServiceServer::<DashboardApi>::NAME,
            WebhookServiceServer::<WebhookApi>::NAME,
            ApprovalServiceServer::<ApprovalApi>::NAME,
            DepositServiceServer::<DepositApi>::NAME,
            PayoutServiceServer::<PayoutApi>::NAME,
        ]
    } else {
        vec![AdminServiceServer::<AdminApi>::NAME]
    };
    let (health, _) = tonic_health::server::health_reporter();
    let health_service = HealthServer::new(DrainingHealth(
        tonic_health::server::HealthService::from_health_reporter(health.clone()),
    ));
    for name in &served {
        health
            .set_service_status(*name, ServingStatus::Serving)
            .await;
    }
    let reflection = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(walletops_proto::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_types::pb::FILE_DESCRIPTOR_SET)
    };
    let timeout = core.config.request_timeout();
    let handshake_timeout = std::time::Duration::from_secs(core.config.header_read_timeout_secs);
    let trusted = core.config.trusted_proxies.clone();
    let admission = AdmissionLayer::new(core.clone(), surface);
    let mut routes = Routes::builder();
    routes
        .add_service(health_service)
        .add_service(reflection().build_v1()?)
        .add_service(reflection().build_v1alpha()?);
    if public {
        add_public(&core, &mut routes);
    } else {
        routes.add_service(AdminServiceServer::new(AdminApi::new(&core)));
    }
    Server::builder()
        .timeout(timeout)
        .layer(tower::layer::layer_fn(move |routes| {
            layered(routes, trusted.clone(), admission.clone())
        }))
        .add_routes(routes.routes())
        .serve_with_incoming_shutdown(
            incoming::incoming(listener.tcp, listener.tls, handshake_timeout),
            async move {
                shutdown.await;
                // Load balancers and health watchers learn of the drain before the
                // connections close.
                for name in served {
                    health
                        .set_service_status(name, ServingStatus::NotServing)
                        .await;
                }
                health
                    .set_service_status("", ServingStatus::NotServing)
                    .await;
            },
        )
        .await?;
    Ok(())
}
