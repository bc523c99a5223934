//! Where deliveries go: straight to the endpoint, whatever proxy the environment names.

use walletops_tests::{Backend, webhooks::Receiver};

use super::{all_settled, funded, send, verified_and_in_order};

/// A service whose environment names an HTTP proxy for everything but its own chain node
/// sends its deliveries straight to the endpoint: the proxy (which would resolve the name
/// itself, past the target checks) never sees one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_ignore_proxies_from_the_environment() -> anyhow::Result<()> {
    let proxy = Receiver::start().await?;
    let proxy_url = proxy.url().trim_end_matches("/hook").to_owned();
    // The node, the fake upstreams and the edge live on 127.0.0.1 and go direct; the
    // receiver lives on 127.0.0.2, which the proxy would be asked for.
    let env = [
        ("HTTP_PROXY", proxy_url.as_str()),
        ("http_proxy", proxy_url.as_str()),
        ("HTTPS_PROXY", proxy_url.as_str()),
        ("https_proxy", proxy_url.as_str()),
        ("ALL_PROXY", proxy_url.as_str()),
        ("all_proxy", proxy_url.as_str()),
        ("NO_PROXY", "127.0.0.1,localhost"),
        ("no_proxy", "127.0.0.1,localhost"),
    ];
    let (_anvil, svc) = funded(Backend::Sqlite, &env).await?;
    let api = svc.rest(&svc.api_key);
    let hook = Receiver::start_on(std::net::Ipv4Addr::new(127, 0, 0, 2)).await?;
    hook.register(&api, &[]).await?;
    let ids = vec![send(&api).await?];
    let received = hook
        .wait_until("the payment's events, sent direct", |r| {
            all_settled(r, &ids)
        })
        .await?;
    verified_and_in_order(&received, &ids);
    assert!(
        proxy.received().is_empty(),
        "a delivery went through the proxy: {:?}",
        proxy.received()
    );
    Ok(())
}
