//! Slow clients: a connection that sends nothing, never finishes its headers, or trickles
//! its body is cut off within the configured times.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use walletops_tests::{Backend, Options, Service, WAIT_TIMEOUT, on_one_backend, within};

async fn slow_clients_are_cut_off(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start_with(
        b,
        Options::default()
            .with_env("WALLETOPS_HEADER_READ_TIMEOUT_SECS", "1")
            .with_env("WALLETOPS_REQUEST_TIMEOUT_SECS", "2"),
    )
    .await?;
    let addr = svc.http.trim_start_matches("http://").to_owned();
    // Everything the server sends until it closes the connection, within `wait`.
    let answer = async |written: &[u8], wait| -> anyhow::Result<String> {
        let mut tcp = tokio::net::TcpStream::connect(&addr).await?;
        tcp.write_all(written).await?;
        let mut read = Vec::new();
        tokio::time::timeout(wait, tcp.read_to_end(&mut read)).await??;
        Ok(String::from_utf8_lossy(&read).into_owned())
    };
    // Nothing sent, or headers never finished: the connection is closed, nothing answered;
    // well before hyper's own default of 30 s, so the configured time is the one that counts.
    for written in [
        &b""[..],
        b"GET /api/v1/wallets HTTP/1.1\r\nhost: walletops\r\n",
    ] {
        let cut = answer(written, Duration::from_secs(20)).await?;
        assert!(cut.is_empty(), "{cut}");
    }
    // A body that stops short of its length: an answer naming the body, and nothing sent.
    let head = format!(
        "POST /api/v1/send HTTP/1.1\r\nhost: walletops\r\nconnection: close\r\nx-api-key: {}\r\nidempotency-key: {}\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{{\"chain\":",
        svc.api_key,
        uuid::Uuid::new_v4()
    );
    let short = answer(head.as_bytes(), WAIT_TIMEOUT).await?;
    assert!(
        short.starts_with("HTTP/1.1 400")
            && short.contains("INVALID_INPUT")
            && short.contains("body"),
        "{short}"
    );
    // A body trickled a byte at a time, each byte well within the timeout: the whole body's
    // deadline cuts it off long before its last byte.
    let mut tcp = tokio::net::TcpStream::connect(&addr).await?;
    tcp.write_all(head.as_bytes()).await?;
    let (mut read, mut write) = tcp.into_split();
    // The head carries 9 of the body's 100 bytes.
    let (body_left, sent) = (91, Arc::new(AtomicUsize::new(0)));
    let counted = sent.clone();
    tokio::spawn(async move {
        for _ in 0..body_left {
            tokio::time::sleep(Duration::from_millis(500)).await;
            if write.write_all(b" ").await.is_err() {
                return;
            }
            counted.fetch_add(1, Ordering::SeqCst);
        }
    });
    let mut answer = Vec::new();
    within(
        "the answer to the trickled body",
        read.read_to_end(&mut answer),
    )
    .await??;
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    let sent = sent.load(Ordering::SeqCst);
    assert!(
        sent < body_left / 2,
        "answered after {sent} of {body_left} bytes"
    );
    assert!(svc.stored_statuses("send").await?.is_empty());
    Ok(())
}

on_one_backend!(slow_clients_are_cut_off,);
