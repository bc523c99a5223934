//! Authentication: the key is read only from `x-api-key`; every bad key is 401 UNAUTHORIZED.

use reqwest::Method;
use walletops_proto::v1::{self as pb, wallet_ops_service_client::WalletOpsServiceClient};
use walletops_tests::{Backend, Service, on_both_backends, reason, with_key};

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
    use sea_orm::ConnectionTrait;
    let svc = Service::start(b).await?;
    let out = svc
        .cli(&["keys", "create", "--name", "short-lived", "--expires", "7d"])
        .await?;
    let short = out.api_key().expect("key printed");
    assert_eq!(svc.rest(&short).get("/wallets").await?.status, 200);
    // Move the key's expiry into the past, as seven days would.
    let prefix = &short[5..9];
    svc.database()
        .await?
        .execute_unprepared(&format!(
            "UPDATE api_keys SET expires_at = '2020-01-01T00:00:00Z' WHERE prefix = '{prefix}'"
        ))
        .await?;
    svc.rest(&short)
        .get("/wallets")
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

async fn bursts_of_bad_keys_are_refused_before_the_database(b: Backend) -> anyhow::Result<()> {
    use sea_orm::{ConnectOptions, ConnectionTrait, Database};
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
    // Past the limit nothing is read: with the keys table locked, refusals still come at
    // once (a lookup would wait for the lock). PostgreSQL's table lock blocks readers;
    // SQLite's WAL readers never wait, so the lock is taken there only.
    let lock = if b == Backend::Postgres {
        let url = svc.database_url().expect("a PostgreSQL URL");
        let mut options = ConnectOptions::new(url);
        options.max_connections(1);
        let db = Database::connect(options).await?;
        db.execute_unprepared("BEGIN; LOCK TABLE api_keys IN ACCESS EXCLUSIVE MODE")
            .await?;
        Some(db)
    } else {
        None
    };
    for _ in 0..10 {
        let fast = tokio::time::timeout(
            std::time::Duration::from_secs(2),
            here.with_key(&guess()).get("/wallets"),
        )
        .await
        .map_err(|_| anyhow::anyhow!("a throttled request read the database"))??;
        fast.assert_error(429, "RATE_LIMITED")?;
    }
    if let Some(db) = lock {
        db.execute_unprepared("ROLLBACK").await?;
    }
    // The good key from this address waits too; from another address it works.
    svc.rest(&svc.api_key)
        .get("/wallets")
        .await?
        .assert_error(429, "RATE_LIMITED")?;
    let elsewhere = svc
        .rest(&svc.api_key)
        .from_address(std::net::IpAddr::from([127, 0, 0, 2]))?;
    assert_eq!(elsewhere.get("/wallets").await?.status, 200);
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
    let mut req = with_key(pb::ListWalletsRequest::default(), &svc.api_key)?;
    req.metadata_mut()
        .insert("x-client-address", "198.51.100.200".parse()?);
    let err = ops
        .list_wallets(req)
        .await
        .expect_err("the prefix is throttled");
    assert_eq!(reason(&err).as_deref(), Some("RATE_LIMITED"));
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
    let err = admin
        .list_users(walletops_tests::as_admin(pb::ListUsersRequest {})?)
        .await
        .expect_err("the client is throttled");
    assert_eq!(reason(&err).as_deref(), Some("RATE_LIMITED"));
    Ok(())
}

on_both_backends!(
    bursts_of_bad_keys_are_refused_before_the_database,
    guesses_at_one_prefix_are_throttled_from_every_address,
    missing_malformed_and_unknown_keys_are_unauthorized,
    keys_are_read_only_from_the_x_api_key_header,
    expired_keys_are_unauthorized_but_stay_listed,
    grpc_calls_authenticate_from_metadata,
);
