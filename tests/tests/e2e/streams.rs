//! Event streams end with their credential and are bounded: a stream whose key is revoked
//! ends within seconds (gRPC and Server-Sent Events alike), a key holds at most so many
//! open, and a stream lasts at most its lifetime, ending with where to resume.

use tonic::Streaming;
use walletops_proto::v1::{
    WatchTransactionsRequest, WatchTransactionsResponse,
    wallet_ops_service_client::WalletOpsServiceClient,
};
use walletops_tests::{
    Backend, Options, Service, on_both_backends, poll_until, reason, with_key, within,
};

async fn watch(
    svc: &Service,
    key: &str,
) -> Result<Streaming<WatchTransactionsResponse>, tonic::Status> {
    let mut ops = WalletOpsServiceClient::new(
        svc.channel()
            .await
            .map_err(|e| tonic::Status::internal(e.to_string()))?,
    );
    let req = with_key(WatchTransactionsRequest::default(), key)
        .map_err(|e| tonic::Status::internal(e.to_string()))?;
    Ok(ops.watch_transactions(req).await?.into_inner())
}

/// The status a stream ends with, waited for.
async fn ended(mut stream: Streaming<WatchTransactionsResponse>) -> anyhow::Result<tonic::Status> {
    within("the stream to end", async {
        loop {
            match stream.message().await {
                Ok(Some(_)) => continue,
                Ok(None) => anyhow::bail!("the stream ended without an error"),
                Err(status) => return Ok(status),
            }
        }
    })
    .await?
}

/// The `error` event an SSE stream ends with, waited for: its JSON body.
async fn sse_error(mut reply: reqwest::Response) -> anyhow::Result<serde_json::Value> {
    let mut text = String::new();
    within("the server-sent error event", async {
        while !text.contains("event: error\n") || !text.ends_with("\n\n") {
            let chunk = reply.chunk().await?.expect("the stream goes on");
            text.push_str(&String::from_utf8_lossy(&chunk));
        }
        anyhow::Ok(())
    })
    .await??;
    let block = text.split("event: error\n").nth(1).unwrap_or_default();
    let data = block
        .lines()
        .find_map(|l| l.strip_prefix("data:"))
        .unwrap_or_default();
    Ok(serde_json::from_str(data.trim())?)
}

fn sse(svc: &Service, key: &str) -> reqwest::RequestBuilder {
    walletops_tests::http::client()
        .get(format!("{}/api/v1/tx/events", svc.http))
        .header("x-api-key", key)
}

async fn a_stream_ends_when_its_key_is_revoked(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    let key = svc.create_key("watcher").await?;
    let prefix = key.split('_').nth(1).unwrap_or_default().to_owned();
    let grpc = watch(&svc, &key).await?;
    let rest = sse(&svc, &key).send().await?;
    assert_eq!(rest.status(), 200);
    let out = svc.cli(&["keys", "revoke", &prefix]).await?;
    anyhow::ensure!(out.success, "{}", out.stderr);
    let status = ended(grpc).await?;
    assert_eq!(
        reason(&status).as_deref(),
        Some("UNAUTHORIZED"),
        "{status:?}"
    );
    let body = sse_error(rest).await?;
    assert_eq!(body["code"], "UNAUTHORIZED", "{body}");
    Ok(())
}

async fn streams_are_capped_per_key_and_end_after_their_lifetime(b: Backend) -> anyhow::Result<()> {
    let options = Options::default()
        .with_env("WALLETOPS_STREAMS__PER_KEY", "2")
        .with_env("WALLETOPS_STREAMS__MAX_LIFETIME_SECS", "4");
    let svc = Service::start_with(b, options).await?;
    let key = svc.create_key("watcher").await?;
    let first = watch(&svc, &key).await?;
    let _second = watch(&svc, &key).await?;
    let refused = watch(&svc, &key).await.expect_err("a third");
    assert_eq!(
        reason(&refused).as_deref(),
        Some("RATE_LIMITED"),
        "{refused:?}"
    );
    assert!(refused.message().contains("per_key"), "{refused:?}");
    let over = sse(&svc, &key).send().await?;
    assert_eq!(over.status(), 429);
    assert!(over.headers().get("retry-after").is_some());
    // Another key has streams of its own.
    let _other = watch(&svc, &svc.api_key).await?;
    // A stream ends after its lifetime, saying where to resume; its place is given back.
    let status = ended(first).await?;
    assert_eq!(
        reason(&status).as_deref(),
        Some("SERVICE_UNAVAILABLE"),
        "{status:?}"
    );
    assert!(status.message().contains("after_event_id"), "{status:?}");
    poll_until("a place given back", || async {
        Ok(watch(&svc, &key).await.ok().map(drop))
    })
    .await?;
    Ok(())
}

on_both_backends!(
    a_stream_ends_when_its_key_is_revoked,
    streams_are_capped_per_key_and_end_after_their_lifetime,
);
