//! The WalletOps REST edge: the `/api/v1` (and `/v1`) JSON contract mapped onto
//! `walletops.v1` gRPC calls to the core.
//!
//! **Invariant:** depends on `walletops-proto` only. No database handle, no chain client, no
//! business rule: each handler turns JSON into a request message, copies `x-api-key`,
//! `Idempotency-Key` and `x-request-id` into metadata, calls the core, and turns the answer
//! (or the `tonic::Status`) back into the contract's JSON.

mod client;
mod dashboard;
mod error;
mod extract;
mod mcp;
mod model;
mod openapi;
mod routes;

use std::{future::Future, time::Duration};

use axum::{
    Router,
    extract::Request,
    http::{HeaderName, Method, Uri},
    middleware::{self, Next},
    response::Response,
};
use tokio::net::TcpListener;
use tonic::transport::Endpoint;
use tower::ServiceBuilder;
use tower_http::{
    request_id::{PropagateRequestIdLayer, SetRequestIdLayer},
    timeout::RequestBodyDeadlineLayer,
    trace::{DefaultOnFailure, TraceLayer},
};
use walletops_proto::{
    ErrorCode,
    request_id::{self, MakeRequestUuidV7, REQUEST_ID_HEADER},
};

pub use client::ForwardedHeader;
pub use dashboard::PeerAddr;
pub use error::{ErrorBody, http_status};
pub use mcp::stdio::serve as serve_mcp_stdio;

use crate::error::{EdgeError, REQUEST_ID};

/// The edge's HTTP limits.
#[derive(Debug, Clone)]
pub struct EdgeConfig {
    /// Largest accepted request body, in bytes.
    pub max_body_bytes: usize,
    /// Longest time a request's whole body may take to arrive (the request timeout).
    pub body_timeout: Duration,
    /// Longest wait for a request's headers, on a new connection or a kept-alive idle one.
    pub header_read_timeout: Duration,
    /// Mark the dashboard's cookies `Secure`: the dashboard is reached over https.
    pub secure_cookies: bool,
    /// TLS on the listener; none: plain HTTP.
    pub tls: Option<std::sync::Arc<walletops_tls::ServerTls>>,
    /// MCP sessions one API key may hold open at once.
    pub mcp_sessions_per_key: usize,
    /// Peers (load balancers) whose forwarding header names the client.
    pub trusted_proxies: Vec<std::net::IpAddr>,
    /// The one header those proxies write the client's address in.
    pub forwarded_header: ForwardedHeader,
}

/// How the edge reaches a core at an `https` URL.
#[derive(Debug, Clone, Default)]
pub struct CoreTls {
    /// PEM: the CA that signed the core's certificate; none: the system's roots.
    pub ca_pem: Option<Vec<u8>>,
    /// PEM: the certificate chain and key the edge presents, for a core that asks for one.
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
}

pub use walletops_proto::channel::{CallFailed, CoreChannel};

/// A lazily connecting channel to the core at `url` (over TLS with `tls` when it is
/// `https`), with a per-call `timeout`. Lazy, so the edge starts (and answers 503 in the
/// contract's shape) while the core is still coming up.
pub fn core_channel(url: &str, timeout: Duration, tls: &CoreTls) -> anyhow::Result<CoreChannel> {
    use tonic::transport::{Certificate, ClientTlsConfig, Identity};
    let mut endpoint = Endpoint::from_shared(url.to_owned())?
        .timeout(timeout)
        .connect_timeout(Duration::from_secs(5))
        .tcp_nodelay(true);
    if endpoint.uri().scheme_str() == Some("https") {
        let mut config = match &tls.ca_pem {
            Some(pem) => ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pem)),
            None => ClientTlsConfig::new().with_native_roots(),
        };
        if let Some((cert, key)) = &tls.identity {
            config = config.identity(Identity::from_pem(cert, key));
        }
        endpoint = endpoint.tls_config(config)?;
    }
    Ok(CoreChannel::new(tower::ServiceExt::map_err(
        endpoint.connect_lazy(),
        |e| CallFailed(e.into()),
    )))
}

/// Runs the rest of the stack inside the request id's task-local scope, so any error body,
/// wherever it is made, carries the id of the `x-request-id` header.
async fn scope_request_id(req: Request, next: Next) -> Response {
    let id = req
        .headers()
        .get(REQUEST_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    REQUEST_ID.scope(id, next.run(req)).await
}

fn request_span(req: &Request) -> tracing::Span {
    let id = req
        .headers()
        .get(REQUEST_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    tracing::info_span!("http", request_id = %id, method = %req.method(), path = %req.uri().path())
}

async fn no_route(uri: Uri) -> EdgeError {
    EdgeError::Local {
        code: ErrorCode::NotFound,
        message: format!("no route for {}", uri.path()),
        status: None,
    }
}

async fn wrong_method(method: Method, uri: Uri) -> EdgeError {
    EdgeError::Local {
        code: ErrorCode::NotFound,
        message: format!("{method} is not allowed on {}", uri.path()),
        status: Some(axum::http::StatusCode::METHOD_NOT_ALLOWED),
    }
}

/// The whole REST surface over `core`.
pub fn router(core: CoreChannel, config: &EdgeConfig) -> Router {
    let v1 = routes::v1(core.clone());
    let x_request_id = HeaderName::from_static(REQUEST_ID_HEADER);
    Router::new()
        .nest("/api/v1", v1.clone())
        .nest("/v1", v1)
        .nest(
            "/dashboard",
            dashboard::router(core.clone(), config.secure_cookies),
        )
        .nest_service("/mcp", mcp::service(core, config.mcp_sessions_per_key))
        .route("/favicon.ico", axum::routing::get(dashboard::favicon))
        .fallback(no_route)
        .method_not_allowed_fallback(wrong_method)
        .layer(axum::extract::DefaultBodyLimit::max(config.max_body_bytes))
        // A body trickled in holds a task and a connection; the core's time starts only
        // once it has been read. A deadline for the whole body, not a wait per frame.
        .layer(RequestBodyDeadlineLayer::new(config.body_timeout))
        .layer(
            ServiceBuilder::new()
                .map_request(request_id::drop_malformed::<axum::body::Body>)
                .layer(SetRequestIdLayer::new(
                    x_request_id.clone(),
                    MakeRequestUuidV7,
                ))
                .layer(PropagateRequestIdLayer::new(x_request_id))
                .layer(
                    TraceLayer::new_for_http()
                        .make_span_with(request_span)
                        .on_failure(DefaultOnFailure::new().level(tracing::Level::DEBUG)),
                )
                .layer(middleware::from_fn(scope_request_id))
                .layer(middleware::from_fn_with_state(
                    client::TrustedProxies {
                        proxies: config.trusted_proxies.clone().into(),
                        header: config.forwarded_header,
                    },
                    client::stamp_client,
                )),
        )
}

/// The OpenAPI 3.1 document of the REST contract, as served at `/api/v1/openapi.json`.
pub fn openapi() -> utoipa::openapi::OpenApi {
    routes::openapi()
}

/// Serves `router` on `listener` over HTTP/1.1 until `shutdown` completes, then lets the
/// requests under way finish. Served through hyper rather than `axum::serve`, which has no
/// timer: a client that opens connections and never finishes its headers (or never sends a
/// byte) would hold them forever. HTTP/1 only: hyper's version sniffing, which HTTP/2 would
/// need, waits for the first bytes without a timer (gRPC callers use the core).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    config: &EdgeConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use hyper_util::{
        rt::{TokioIo, TokioTimer},
        server::graceful::GracefulShutdown,
        service::TowerToHyperService,
    };
    use tower::ServiceExt as _;
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(config.header_read_timeout);
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let (tcp, peer) = match accepted {
            Ok(accepted) => accepted,
            // Out of file descriptors, say: accepting again at once would spin.
            Err(e) => {
                tracing::warn!(error = %e, "accepting a connection");
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(100)) => continue,
                    () = &mut shutdown => break,
                }
            }
        };
        // Without TCP_NODELAY, small answers on a kept-alive connection wait ~40 ms for
        // the client's delayed ACK (Nagle).
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::warn!(error = %e, "setting TCP_NODELAY");
        }
        let service = TowerToHyperService::new(router.clone().map_request(
            move |req: Request<hyper::body::Incoming>| {
                let mut req = req.map(axum::body::Body::new);
                req.extensions_mut().insert(PeerAddr(peer));
                req
            },
        ));
        match &config.tls {
            None => {
                let connection =
                    graceful.watch(builder.serve_connection(TokioIo::new(tcp), service));
                tokio::spawn(async move {
                    if let Err(e) = connection.await {
                        tracing::debug!(error = %e, "serving a connection");
                    }
                });
            }
            Some(tls) => {
                // The handshake runs in the connection's task, under the header timeout: a
                // client that stalls it holds no one else up.
                let (acceptor, builder) = (tls.acceptor(), builder.clone());
                let watcher = graceful.watcher();
                let handshake_timeout = config.header_read_timeout;
                tokio::spawn(async move {
                    let stream =
                        match tokio::time::timeout(handshake_timeout, acceptor.accept(tcp)).await {
                            Ok(Ok(stream)) => stream,
                            Ok(Err(e)) => return tracing::debug!(error = %e, "TLS handshake"),
                            Err(_) => return tracing::debug!("TLS handshake timed out"),
                        };
                    let connection =
                        watcher.watch(builder.serve_connection(TokioIo::new(stream), service));
                    if let Err(e) = connection.await {
                        tracing::debug!(error = %e, "serving a connection");
                    }
                });
            }
        }
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}
