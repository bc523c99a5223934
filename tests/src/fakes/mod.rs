//! Local stand-ins for the internet services WalletOps calls, each a real HTTP server that
//! speaks the service's documented wire format over a local node, so the service's own
//! clients talk to them unchanged. (The 1inch-compatible one lives in the
//! `walletops-devnet-aggregator` crate, which the dev playground runs too.)

pub mod jupiter;
pub mod privy;

use std::net::SocketAddr;

use tokio::task::JoinHandle;

/// Serves `app` on a free loopback port until the task is dropped or aborted: its address
/// and its task.
pub(crate) async fn serve_on_loopback(
    app: axum::Router,
) -> anyhow::Result<(SocketAddr, JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok((addr, server))
}
