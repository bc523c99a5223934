//! A TCP proxy that can make connections go silent: once switched on, every connection
//! whose client has sent a marker (a PostgreSQL listener's `application_name`, say) is no
//! longer forwarded either way, and nothing is closed or reset, as a connection behind a
//! dropped route or a NAT that forgot it. Other connections pass untouched.

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

#[derive(Debug, Default)]
struct State {
    silent: AtomicBool,
    /// Connections whose client sent the marker.
    marked: AtomicUsize,
}

/// A running proxy; it stops when dropped.
#[derive(Debug)]
pub struct Silencer {
    addr: SocketAddr,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

impl Silencer {
    /// Forwards to `target`, watching each client's bytes for `marker`.
    pub async fn start(target: SocketAddr, marker: &'static [u8]) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State::default());
        let shared = state.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let state = shared.clone();
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(target).await {
                        relay(client, server, marker, &state).await;
                    }
                });
            }
        });
        Ok(Self { addr, state, task })
    }

    /// The address to connect to instead of the target.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// From now on, marked connections are silent.
    pub fn silence(&self) {
        self.state.silent.store(true, Ordering::SeqCst);
    }

    /// How many connections have sent the marker so far.
    pub fn marked(&self) -> usize {
        self.state.marked.load(Ordering::SeqCst)
    }
}

impl Drop for Silencer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn relay(client: TcpStream, server: TcpStream, marker: &'static [u8], state: &State) {
    let marked = AtomicBool::new(false);
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let silent = || marked.load(Ordering::SeqCst) && state.silent.load(Ordering::SeqCst);
    let upstream = async {
        let mut buf = vec![0u8; 16 * 1024];
        // The last bytes seen, so a marker split between two reads is still found.
        let mut tail: Vec<u8> = Vec::new();
        loop {
            let n = match client_read.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            if !marked.load(Ordering::SeqCst) {
                tail.extend_from_slice(&buf[..n]);
                if tail.windows(marker.len()).any(|w| w == marker) {
                    marked.store(true, Ordering::SeqCst);
                    state.marked.fetch_add(1, Ordering::SeqCst);
                }
                let keep = tail.len().saturating_sub(marker.len());
                tail.drain(..keep);
            }
            if !silent() && server_write.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    };
    let downstream = async {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = match server_read.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            if !silent() && client_write.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    };
    // A silent connection stays open: neither side hears it end.
    tokio::join!(upstream, downstream);
}
