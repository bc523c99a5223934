//! Authentication: the key is read only from `x-api-key`; every bad key is 401 UNAUTHORIZED.

use reqwest::Method;
use walletops_proto::v1::{self as pb, wallet_ops_service_client::WalletOpsServiceClient};
use walletops_tests::{Backend, Options, Rest, Service, on_both_backends, reason, with_key};

/// A key of the right shape that was never issued.
const NEVER_ISSUED: &str = "wops_zzzz_0123456789abcdefghijABCDEFGHIJ0123";

async fn missing_malformed_and_unknown_keys_are_unauthorized(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    svc.anonymous()
        .get("/wallets")
        .await?
        .assert_error(401, "UNAUTHORIZED")?;
    let real = svc.api_key.clone();
    let prefix_of_real = &real[..10]; // "wops_abcd_"
    for bad in [
        "",
        "nonsense",
        NEVER_ISSUED,
        &format!("{prefix_of_real}0123456789abcdefghijABCDEFGHIJ0123"), // right prefix, wrong secret
        &format!("{real}x"),
        &real[..real.len() - 1],
    ] {
        svc.rest(bad)
            .get("/wallets")
            .await?
            .assert_error(401, "UNAUTHORIZED")?;
    }
    // The real key works, so the refusals above are about the keys.
    assert_eq!(svc.rest(&real).get("/wallets").await?.status, 200);
    Ok(())
}

async fn keys_are_read_only_from_the_x_api_key_header(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    let key = svc.api_key.clone();
    let anon = svc.anonymous();
    for path in [
        format!("/wallets?x-api-key={key}"),
        format!("/wallets?api_key={key}"),
        format!("/wallets?apiKey={key}"),
    ] {
        anon.get(&path).await?.assert_error(401, "UNAUTHORIZED")?;
    }
    for header in [
        ("authorization", format!("Bearer {key}")),
        ("authorization", key.clone()),
        ("x-api_key", key.clone()),
    ] {
        anon.request(Method::GET, "/wallets", &[(header.0, &header.1)], None)
            .await?
            .assert_error(401, "UNAUTHORIZED")?;
    }
    Ok(())
}

async fn expired_keys_are_unauthorized_but_stay_listed(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    let out = svc
        .cli(&["keys", "create", "--name", "short-lived", "--expires", "7d"])
        .await?;
    let short = out.api_key().expect("key printed");
    assert_eq!(svc.rest(&short).get("/wallets").await?.status, 200);
    // Move the key's expiry into the past, as seven days would.
    let prefix = &short[5..9];
    svc.expire_key(prefix).await?;
    let api = svc.rest(&short);
    api.wait_refused("the expired key to be refused").await?;
    api.get("/wallets")
        .await?
        .assert_error(401, "UNAUTHORIZED")?;
    // The first key is unaffected, and the expired key is still listed for audit.
    let list = svc.cli(&["keys", "list"]).await?;
    assert!(list.stdout.contains(prefix), "{}", list.stdout);
    assert!(list.stdout.contains("expired"), "{}", list.stdout);
    assert_eq!(svc.rest(&svc.api_key).get("/wallets").await?.status, 200);
    Ok(())
}

async fn grpc_calls_authenticate_from_metadata(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    let mut client = WalletOpsServiceClient::new(svc.channel().await?);
    let err = client
        .list_wallets(pb::ListWalletsRequest::default())
        .await
        .expect_err("no key");
    assert_eq!(err.code(), tonic::Code::Unauthenticated);
    assert_eq!(reason(&err).as_deref(), Some("UNAUTHORIZED"));
    let err = client
        .list_wallets(with_key(pb::ListWalletsRequest::default(), NEVER_ISSUED)?)
        .await
        .expect_err("unknown key");
    assert_eq!(reason(&err).as_deref(), Some("UNAUTHORIZED"));
    let ok = client
        .list_wallets(with_key(pb::ListWalletsRequest::default(), &svc.api_key)?)
        .await?;
    assert_eq!(ok.into_inner().wallets.len(), 2);
    Ok(())
}

/// A well-formed key that was never issued, with a fresh random prefix.
fn guess() -> String {
    let random = uuid::Uuid::new_v4().simple().to_string();
    format!("wops_{}_{}", &random[..4], &random[..32])
}

async fn bursts_of_bad_keys_are_throttled_but_never_a_good_key(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    let here = svc.anonymous();
    // 20 failures a minute per client address by default, whatever the prefix.
    for _ in 0..20 {
        here.with_key(&guess())
            .get("/wallets")
            .await?
            .assert_error(401, "UNAUTHORIZED")?;
    }
    let refused = here.with_key(&guess()).get("/wallets").await?;
    refused.assert_error(429, "RATE_LIMITED")?;
    let wait: u64 = refused.headers["retry-after"].to_str()?.parse()?;
    assert!((1..=60).contains(&wait), "Retry-After {wait}");
    assert!(
        refused.body["error"]
            .as_str()
            .unwrap_or_default()
            .contains("failed authentications")
    );
    // A spoofed x-client-address changes nothing: the edge says which peer it is.
    let spoofed = here
        .with_key(&guess())
        .request(
            Method::GET,
            "/wallets",
            &[("x-client-address", "203.0.113.9")],
            None,
        )
        .await?;
    spoofed.assert_error(429, "RATE_LIMITED")?;
    // A stranger's guesses from the same address (behind one proxy, say) never lock out
    // the holder of a good key.
    assert_eq!(svc.rest(&svc.api_key).get("/wallets").await?.status, 200);
    Ok(())
}

async fn guesses_at_one_prefix_are_throttled_from_every_address(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    let mut ops = WalletOpsServiceClient::new(svc.channel().await?);
    let prefix = &svc.api_key[..10];
    for i in 0..20 {
        // From 20 clients (loopback peers may name the client, as the edge does).
        let mut req = with_key(
            pb::ListWalletsRequest::default(),
            &format!(
                "{prefix}{}",
                &uuid::Uuid::new_v4().simple().to_string()[..32]
            ),
        )?;
        req.metadata_mut()
            .insert("x-client-address", format!("198.51.100.{i}").parse()?);
        let err = ops.list_wallets(req).await.expect_err("a wrong secret");
        assert_eq!(reason(&err).as_deref(), Some("UNAUTHORIZED"));
    }
    let from_elsewhere = |key: &str| -> anyhow::Result<_> {
        let mut req = with_key(pb::ListWalletsRequest::default(), key)?;
        req.metadata_mut()
            .insert("x-client-address", "198.51.100.200".parse()?);
        Ok(req)
    };
    let wrong = format!(
        "{prefix}{}",
        &uuid::Uuid::new_v4().simple().to_string()[..32]
    );
    let err = ops
        .list_wallets(from_elsewhere(&wrong)?)
        .await
        .expect_err("the prefix is throttled");
    assert_eq!(reason(&err).as_deref(), Some("RATE_LIMITED"));
    // The key itself still works: guesses at its prefix cannot lock its holder out.
    ops.list_wallets(from_elsewhere(&svc.api_key)?).await?;
    // Wrong admin tokens are counted too.
    for _ in 0..20 {
        let mut admin = walletops_proto::v1::admin_service_client::AdminServiceClient::new(
            svc.admin_channel().await?,
        );
        let mut req = tonic::Request::new(pb::ListUsersRequest {});
        req.metadata_mut()
            .insert("x-admin-token", "not the token at all".parse()?);
        let err = admin
            .list_users(req)
            .await
            .expect_err("a wrong admin token");
        assert_eq!(reason(&err).as_deref(), Some("UNAUTHORIZED"));
    }
    let mut admin = walletops_proto::v1::admin_service_client::AdminServiceClient::new(
        svc.admin_channel().await?,
    );
    // An operator's token may be short: past the limit even the right one is refused before
    // it is compared, so guessing stops.
    let err = admin
        .list_users(walletops_tests::as_admin(pb::ListUsersRequest {})?)
        .await
        .expect_err("the client is throttled");
    assert_eq!(reason(&err).as_deref(), Some("RATE_LIMITED"));
    Ok(())
}

/// Fails 20 guesses (the default limit) from the client `header` names.
async fn guess_20_times_as(here: &Rest, header: (&str, &str)) -> anyhow::Result<()> {
    for _ in 0..20 {
        here.with_key(&guess())
            .request(Method::GET, "/wallets", &[header], None)
            .await?
            .assert_error(401, "UNAUTHORIZED")?;
    }
    Ok(())
}

/// What a guess from the client `header` names is answered.
async fn guessed_as(here: &Rest, header: (&str, &str)) -> anyhow::Result<String> {
    let reply = here
        .with_key(&guess())
        .request(Method::GET, "/wallets", &[header], None)
        .await?;
    Ok(reply.code().unwrap_or_default().to_owned())
}

async fn behind_a_trusted_proxy_clients_are_told_apart(b: Backend) -> anyhow::Result<()> {
    // The tests reach the edge from loopback: here that is the load balancer.
    let options = Options {
        config_toml: Some("trusted_proxies = [\"127.0.0.1\"]\n".to_owned()),
        ..Options::default()
    };
    let svc = Service::start_with(b, options).await?;
    let here = svc.anonymous();
    // The proxy appends the address it saw; what the client wrote before it is ignored.
    guess_20_times_as(&here, ("x-forwarded-for", "203.0.113.50, 198.51.100.1")).await?;
    assert_eq!(
        guessed_as(&here, ("x-forwarded-for", "198.51.100.1")).await?,
        "RATE_LIMITED"
    );
    // The proxy writes X-Forwarded-For (the default `forwarded_header`): a Forwarded header is
    // the client's own, never read, so it cannot name (or frame) another client.
    assert_eq!(
        guessed_as(&here, ("forwarded", "for=198.51.100.1;proto=https")).await?,
        "UNAUTHORIZED"
    );
    // Another client behind the same proxy is counted apart, whatever it claims to be.
    assert_eq!(
        guessed_as(&here, ("x-forwarded-for", "198.51.100.1, 198.51.100.2")).await?,
        "UNAUTHORIZED"
    );
    assert_eq!(
        guessed_as(&here, ("x-forwarded-for", "[2001:db8::7]:4711")).await?,
        "UNAUTHORIZED"
    );
    Ok(())
}

async fn forwarding_headers_from_an_untrusted_peer_are_ignored(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    let here = svc.anonymous();
    guess_20_times_as(&here, ("x-forwarded-for", "198.51.100.1")).await?;
    // Without trusted_proxies every claim is the same peer: naming another client escapes
    // nothing.
    assert_eq!(
        guessed_as(&here, ("x-forwarded-for", "198.51.100.2")).await?,
        "RATE_LIMITED"
    );
    assert_eq!(
        guessed_as(&here, ("forwarded", "for=198.51.100.3")).await?,
        "RATE_LIMITED"
    );
    Ok(())
}

on_both_backends!(
    behind_a_trusted_proxy_clients_are_told_apart,
    forwarding_headers_from_an_untrusted_peer_are_ignored,
    bursts_of_bad_keys_are_throttled_but_never_a_good_key,
    guesses_at_one_prefix_are_throttled_from_every_address,
    missing_malformed_and_unknown_keys_are_unauthorized,
    keys_are_read_only_from_the_x_api_key_header,
    expired_keys_are_unauthorized_but_stay_listed,
    grpc_calls_authenticate_from_metadata,
);
