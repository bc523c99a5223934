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

on_both_backends!(
    missing_malformed_and_unknown_keys_are_unauthorized,
    keys_are_read_only_from_the_x_api_key_header,
    expired_keys_are_unauthorized_but_stay_listed,
    grpc_calls_authenticate_from_metadata,
);
