//! The connections a gRPC listener serves: plain TCP, TLS over TCP (the handshake done in
//! the connection's own task, under a timeout, so a stalled client holds no one up, with the
//! certificate current when it arrives). Both report their peer the same way, so the
//! client-address rule (`client`) sees them alike.

use std::{
    io,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use futures::Stream;
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::{TcpListener, TcpStream},
    sync::mpsc,
};
use tonic::transport::server::{Connected, TcpConnectInfo};
use walletops_tls::{ServerTls, TlsStream};

/// Accepted connections waiting for the server.
const BACKLOG: usize = 64;

/// One accepted connection.
pub(crate) enum Conn {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

/// Every connection of `listener` (through `tls` when set), until the server stops taking
/// them.
pub(crate) fn incoming(
    listener: TcpListener,
    tls: Option<Arc<ServerTls>>,
    handshake_timeout: Duration,
) -> impl Stream<Item = io::Result<Conn>> {
    let (tx, rx) = mpsc::channel::<Conn>(BACKLOG);
    tokio::spawn(accept(listener, tls, handshake_timeout, tx));
    futures::stream::unfold(rx, |mut rx| async move {
        let conn = rx.recv().await?;
        Some((Ok(conn), rx))
    })
}

async fn accept(
    listener: TcpListener,
    tls: Option<Arc<ServerTls>>,
    handshake_timeout: Duration,
    tx: mpsc::Sender<Conn>,
) {
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            // The server stopped: stop listening too.
            () = tx.closed() => return,
        };
        let tcp = match accepted {
            Ok((tcp, _)) => tcp,
            // Out of file descriptors, say: accepting again at once would spin.
            Err(e) => {
                tracing::warn!(error = %e, "accepting a gRPC connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        // Without TCP_NODELAY, small answers on a kept-alive connection wait ~40 ms for the
        // peer's delayed ACK (Nagle).
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::warn!(error = %e, "setting TCP_NODELAY");
        }
        let Some(tls) = &tls else {
            if tx.send(Conn::Plain(tcp)).await.is_err() {
                return;
            }
            continue;
        };
        let (acceptor, tx) = (tls.acceptor(), tx.clone());
        tokio::spawn(async move {
            match tokio::time::timeout(handshake_timeout, acceptor.accept(tcp)).await {
                Ok(Ok(stream)) => {
                    let _ = tx.send(Conn::Tls(Box::new(stream))).await;
                }
                Ok(Err(e)) => tracing::debug!(error = %e, "gRPC TLS handshake"),
                Err(_) => tracing::debug!("gRPC TLS handshake timed out"),
            }
        });
    }
}

impl Connected for Conn {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        match self {
            Self::Plain(tcp) => tcp.connect_info(),
            Self::Tls(tls) => tls.get_ref().0.connect_info(),
        }
    }
}

/// Runs `$body` with `$io` bound to the connection's stream, pinned.
macro_rules! each {
    ($self:ident, $io:ident => $body:expr) => {
        match $self.get_mut() {
            Conn::Plain(s) => {
                let $io = Pin::new(s);
                $body
            }
            Conn::Tls(s) => {
                let $io = Pin::new(s.as_mut());
                $body
            }
        }
    };
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        each!(self, io => io.poll_read(cx, buf))
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        each!(self, io => io.poll_write(cx, buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        each!(self, io => io.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Self::Plain(s) => s.is_write_vectored(),
            Self::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        each!(self, io => io.poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        each!(self, io => io.poll_shutdown(cx))
    }
}
