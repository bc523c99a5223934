//! Rate limits: 15 writes (quotes included) and 60 reads per user per minute, over all of the
//! user's keys; beyond that 429 RATE_LIMITED with an integer Retry-After, RetryInfo on gRPC.
//! With several keys each takes at most its share; the dashboard has budgets of its own.

use reqwest::Method;
use serde_json::json;
use walletops_proto::v1::{self as pb, wallet_ops_service_client::WalletOpsServiceClient};
use walletops_tests::{
    Backend, Options, Reply, Rest, Service, on_one_backend, poll_until, reason, redis_url, with_key,
};

fn assert_retry_after(reply: &Reply) -> anyhow::Result<u64> {
    reply.assert_error(429, "RATE_LIMITED")?;
    let value = reply
        .headers
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .expect("Retry-After on a 429");
    let secs: u64 = value.parse()?;
    anyhow::ensure!((1..=60).contains(&secs), "Retry-After {secs}");
    Ok(secs)
}

async fn quote(api: &Rest) -> anyhow::Result<Reply> {
    let body = json!({"chain": "base", "fromToken": "NATIVE",
        "toToken": "0x1111111111111111111111111111111111111111", "amount": "1"});
    api.request(Method::POST, "/trade/quote", &[], Some(&body.to_string()))
        .await
}

/// The first user's REST clients with his first key and with a second one, and a client of
/// another user, bob.
async fn two_keys_and_another_user(svc: &Service) -> anyhow::Result<(Rest, Rest, Rest)> {
    let second = svc.create_key("second").await?;
    let bob = svc.create_user("bob").await?;
    Ok((svc.rest(&svc.api_key), svc.rest(&second), svc.rest(&bob)))
}

async fn sixteenth_write_of_a_minute_is_refused_across_keys(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    let (a, b2, bob) = two_keys_and_another_user(&svc).await?;
    for i in 0..15 {
        let api = if i % 2 == 0 { &a } else { &b2 };
        let reply = if i % 3 == 0 {
            // Admitted, then refused for its input: it still counts.
            api.post(
                "/send",
                &json!({"chain": "base", "to": "0x11", "asset": "native", "amount": "1"}),
            )
            .await?
        } else {
            quote(api).await?
        };
        assert_ne!(
            reply.status,
            429,
            "write {} was refused: {}",
            i + 1,
            reply.text
        );
    }
    assert_retry_after(&quote(&b2).await?)?;
    assert_retry_after(&a.post("/send", &json!({"chain": "base"})).await?)?;
    // Reads draw from their own budget, and another user from his own.
    assert_eq!(a.get("/wallets").await?.status, 200);
    assert_eq!(quote(&bob).await?.status, 503);
    // gRPC callers share the same budget and learn when to retry.
    let mut client = WalletOpsServiceClient::new(svc.channel().await?);
    let err = client
        .get_quote(with_key(
            pb::GetQuoteRequest {
                chain: "base".to_owned(),
                ..Default::default()
            },
            &svc.api_key,
        )?)
        .await
        .expect_err("budget spent");
    assert_eq!(err.code(), tonic::Code::ResourceExhausted);
    assert_eq!(reason(&err).as_deref(), Some("RATE_LIMITED"));
    use tonic_types::StatusExt;
    let delay = err
        .get_error_details()
        .retry_info()
        .and_then(|r| r.retry_delay)
        .expect("RetryInfo");
    assert!(delay.as_secs() >= 1 && delay.as_secs() <= 60, "{delay:?}");
    Ok(())
}

async fn sixty_first_read_of_a_minute_is_refused_across_keys(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    let (a, b2, bob) = two_keys_and_another_user(&svc).await?;
    for i in 0..60 {
        let api = if i % 2 == 0 { &a } else { &b2 };
        let path = if i % 4 == 0 {
            "/wallets?chain=solana"
        } else {
            "/wallets"
        };
        let reply = api.get(path).await?;
        assert_eq!(
            reply.status,
            200,
            "read {} was refused: {}",
            i + 1,
            reply.text
        );
    }
    assert_retry_after(&a.get("/wallets").await?)?;
    assert_retry_after(&b2.get(&format!("/tx/{}", uuid::Uuid::new_v4())).await?)?;
    assert_eq!(bob.get("/wallets").await?.status, 200);
    // Writes are a separate budget.
    assert_eq!(quote(&a).await?.status, 503);
    Ok(())
}

async fn budgets_come_from_the_config_file_and_environment(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start_with(
        b,
        Options::with_config("[rate_limits]\nwrites_per_minute = 2\n")
            .with_env("WALLETOPS_RATE_LIMITS__READS_PER_MINUTE", "3"),
    )
    .await?;
    let api = svc.rest(&svc.api_key);
    for _ in 0..2 {
        assert_eq!(quote(&api).await?.status, 503);
    }
    assert_retry_after(&quote(&api).await?)?;
    for _ in 0..3 {
        assert_eq!(api.get("/wallets").await?.status, 200);
    }
    assert_retry_after(&api.get("/wallets").await?)?;
    Ok(())
}

async fn one_key_cannot_starve_the_others_or_the_dashboard(b: Backend) -> anyhow::Result<()> {
    use walletops_proto::v1::{
        api_key_service_client::ApiKeyServiceClient,
        dashboard_service_client::DashboardServiceClient,
    };
    let svc = Service::start(b).await?;
    let (a, b2, _) = two_keys_and_another_user(&svc).await?;
    // Two lines of keys: each may use half the user's 15 writes, rounded up.
    for i in 0..8 {
        let reply = quote(&a).await?;
        assert_ne!(reply.status, 429, "write {} refused: {}", i + 1, reply.text);
    }
    let share = quote(&a).await?;
    assert_retry_after(&share)?;
    assert!(share.text.contains("for this key"), "{}", share.text);
    // The other key still has the rest of the user's budget...
    for i in 0..7 {
        let reply = quote(&b2).await?;
        assert_ne!(
            reply.status,
            429,
            "write {} of the second key refused: {}",
            i + 1,
            reply.text
        );
    }
    let spent = quote(&b2).await?;
    assert_retry_after(&spent)?;
    assert!(spent.text.contains("per user"), "{}", spent.text);
    // ...and with all of it spent, the owner's dashboard and CLI still act: a new key to
    // replace a runaway one, say.
    let mut d = DashboardServiceClient::new(svc.channel().await?);
    let (token, csrf) = crate::dashboard::redeem(&svc, &mut d).await?;
    let mut keys = ApiKeyServiceClient::new(svc.channel().await?);
    keys.create_api_key(crate::dashboard::session_call(
        pb::CreateApiKeyRequest {
            name: "from the dashboard".to_owned(),
            ..Default::default()
        },
        &token,
        Some(&csrf),
    )?)
    .await?;
    svc.create_key("from the CLI").await?;
    Ok(())
}

on_one_backend!(
    one_key_cannot_starve_the_others_or_the_dashboard,
    budgets_are_shared_through_redis,
    a_redis_that_stops_answering_does_not_hold_requests,
    sixteenth_write_of_a_minute_is_refused_across_keys,
    sixty_first_read_of_a_minute_is_refused_across_keys,
    budgets_come_from_the_config_file_and_environment,
);

/// With `redis_url`, every core draws from one budget: writes spread over two services over
/// one database and one Redis are counted together.
async fn budgets_are_shared_through_redis(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start_with(
        b,
        Options::default().with_env("WALLETOPS_REDIS_URL", &redis_url()),
    )
    .await?;
    let other = svc.sibling().await?;
    let (a, b2) = (
        svc.rest(&svc.api_key),
        Rest::new(&other.http()?, &svc.api_key),
    );
    for i in 0..15 {
        let api = if i % 2 == 0 { &a } else { &b2 };
        let reply = quote(api).await?;
        assert_eq!(
            reply.status,
            503,
            "write {} was refused: {}",
            i + 1,
            reply.text
        );
    }
    assert_retry_after(&quote(&b2).await?)?;
    assert_retry_after(&quote(&a).await?)?;
    // Reads still pass on both.
    assert_eq!(b2.get("/wallets").await?.status, 200);
    Ok(())
}

/// What a `Relay` does with the bytes it is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    /// Passes them on.
    Pass,
    /// Holds them: a Redis paused, or its host gone without resetting connections.
    Hold,
    /// Resets every connection, and leaves new ones unanswered: a Redis that died, its
    /// address not answering.
    Cut,
}

/// A TCP relay to the test Redis that can be told to stop passing bytes on.
struct Relay {
    addr: std::net::SocketAddr,
    flow: tokio::sync::watch::Sender<Flow>,
}

impl Relay {
    async fn to(upstream: &str) -> anyhow::Result<Relay> {
        let upstream = upstream
            .trim_start_matches("redis://")
            .trim_end_matches('/')
            .to_owned();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (flow, _) = tokio::sync::watch::channel(Flow::Pass);
        let gate = flow.clone();
        tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                if *gate.borrow() == Flow::Cut {
                    let mut flow = gate.subscribe();
                    tokio::spawn(async move {
                        let _ = flow.wait_for(|f| *f != Flow::Cut).await;
                        drop(inbound);
                    });
                    continue;
                }
                let Ok(outbound) = tokio::net::TcpStream::connect(&upstream).await else {
                    continue;
                };
                let (ri, wi) = inbound.into_split();
                let (ro, wo) = outbound.into_split();
                tokio::spawn(Self::pass(ri, wo, gate.subscribe()));
                tokio::spawn(Self::pass(ro, wi, gate.subscribe()));
            }
        });
        Ok(Relay { addr, flow })
    }

    /// Copies `from` to `to` as `flow` says; returns (closing both) once it says `Cut`.
    async fn pass(
        mut from: tokio::net::tcp::OwnedReadHalf,
        mut to: tokio::net::tcp::OwnedWriteHalf,
        mut flow: tokio::sync::watch::Receiver<Flow>,
    ) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = tokio::select! {
                read = from.read(&mut buf) => match read {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                },
                _ = flow.wait_for(|f| *f == Flow::Cut) => return,
            };
            match flow.wait_for(|f| *f != Flow::Hold).await.map(|f| *f) {
                Ok(Flow::Pass) if to.write_all(&buf[..n]).await.is_ok() => {}
                _ => return,
            }
        }
    }

    fn url(&self) -> String {
        format!("redis://{}", self.addr)
    }
}

/// Redis holding every answer must not hold the requests: reads are admitted unchecked (the
/// limiter's outage is not the service's), writes refused at once (no key writes past a
/// budget no one counts), and both counted again once it answers.
async fn a_redis_that_stops_answering_does_not_hold_requests(b: Backend) -> anyhow::Result<()> {
    let relay = Relay::to(&redis_url()).await?;
    let svc = Service::start_with(
        b,
        Options::with_config("request_timeout_secs = 10\n")
            .with_env("WALLETOPS_REDIS_URL", &relay.url()),
    )
    .await?;
    let api = svc.rest(&svc.api_key);
    assert_eq!(api.get("/wallets").await?.status, 200);
    // Without a deadline on Redis, these wait out the request timeout and answer 503: held,
    // then reset and refused (the limiter reconnecting behind them).
    for flow in [Flow::Hold, Flow::Cut] {
        relay.flow.send_replace(flow);
        for _ in 0..3 {
            let reply = api.get("/wallets").await?;
            assert_eq!(reply.status, 200, "{flow:?}: {}", reply.text);
        }
        let write = api.post("/send", &json!({"chain": "base"})).await?;
        write.assert_error(503, "SERVICE_UNAVAILABLE")?;
        assert!(write.text.contains("rate limiter"), "{}", write.text);
    }
    relay.flow.send_replace(Flow::Pass);
    assert_eq!(api.get("/wallets").await?.status, 200);
    // Answering again, the limiter admits writes (this one refused for its input).
    let write = poll_until("writes to be admitted again", || async {
        let reply = api.post("/send", &json!({"chain": "base"})).await?;
        Ok((reply.status != 503).then_some(reply))
    })
    .await?;
    write.assert_error(400, "INVALID_INPUT")?;
    Ok(())
}
