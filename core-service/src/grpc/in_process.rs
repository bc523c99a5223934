//! The core's public services called by the edge in this process: the same layers and
//! handlers as behind a gRPC listener, without a connection between the two (no HTTP/2
//! framing, no pipe, no task per call). To the client-address rule the edge is a loopback
//! peer, as it was over a connection; a call that runs past the request timeout ends as a
//! channel's timeout ends it (`CANCELLED`, which the edge tells as an unknown outcome).

use std::net::{Ipv4Addr, SocketAddr};

use http::Request;
use tonic::{body::Body, service::Routes, transport::server::TcpConnectInfo};
use tower::{BoxError, ServiceBuilder, timeout::error::Elapsed};
use walletops_proto::channel::{CallFailed, CoreChannel};

use crate::Core;

/// The edge's way to `core`'s public services in this process.
pub fn in_process(core: &Core) -> CoreChannel {
    let mut routes = Routes::builder();
    super::add_public(core, &mut routes);
    let services = super::layered(
        routes.routes().prepare(),
        core.config.trusted_proxies.clone(),
        super::AdmissionLayer::new(core.clone(), super::Surface::Public),
    );
    CoreChannel::new(
        ServiceBuilder::new()
            .map_err(|e: BoxError| match e.downcast::<CallFailed>() {
                Ok(failed) => *failed,
                Err(e) if e.is::<Elapsed>() => CallFailed(Box::new(tonic::TimeoutExpired(()))),
                Err(e) => CallFailed(e),
            })
            .timeout(core.config.request_timeout())
            .map_request(|mut req: Request<Body>| {
                req.extensions_mut().insert(TcpConnectInfo {
                    local_addr: None,
                    remote_addr: Some(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))),
                });
                req
            })
            .service(services),
    )
}
