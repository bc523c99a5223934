//! Idle keep-alive connections on the REST listener: each opened, used for one request,
//! then left open, as a fleet of idle clients leaves them.

use anyhow::{Context, ensure};
use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::TcpStream,
};

/// Opens `n` connections to `http` (`http://host:port`), sends one keep-alive
/// `GET /api/v1/wallets` with `key` on each and reads its answer's head; returns the
/// connections, still open.
pub(crate) async fn idle_connections(
    http: &str,
    key: &str,
    n: usize,
) -> anyhow::Result<Vec<TcpStream>> {
    let addr = http
        .strip_prefix("http://")
        .context("the REST listener is not plain http")?
        .trim_end_matches('/')
        .to_owned();
    let request = format!(
        "GET /api/v1/wallets HTTP/1.1\r\nHost: {addr}\r\nx-api-key: {key}\r\nConnection: keep-alive\r\n\r\n"
    );
    let mut open = Vec::with_capacity(n);
    for _ in 0..n {
        let mut stream = TcpStream::connect(&addr).await?;
        stream.write_all(request.as_bytes()).await?;
        // The answer is small; its head is enough to know it came.
        let mut buf = [0u8; 4096];
        let read = stream.read(&mut buf).await?;
        ensure!(
            buf[..read].starts_with(b"HTTP/1.1 200"),
            "unexpected answer: {}",
            String::from_utf8_lossy(&buf[..read])
        );
        open.push(stream);
    }
    Ok(open)
}
