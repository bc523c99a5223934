//! `x-request-id` on every response: a caller's well-formed id is kept, anything else is
//! replaced by a new UUID v7, and error bodies carry the same id.

use reqwest::Method;
use walletops_proto::v1::{self as pb, wallet_ops_service_client::WalletOpsServiceClient};
use walletops_tests::{Backend, Reply, Service, on_both_backends, with_key};

fn assert_fresh_uuid_v7(reply: &Reply) -> anyhow::Result<()> {
    let id = reply.request_id().expect("x-request-id");
    let uuid = uuid::Uuid::parse_str(id)?;
    anyhow::ensure!(uuid.get_version_num() == 7, "{id} is not a UUID v7");
    Ok(())
}

async fn every_kind_of_response_carries_a_request_id(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    let api = svc.rest(&svc.api_key);
    let anon = svc.anonymous();
    let ok = api.get("/wallets").await?;
    assert_eq!(ok.status, 200);
    assert_fresh_uuid_v7(&ok)?;
    let unauthorized = anon.get("/wallets").await?;
    unauthorized.assert_error(401, "UNAUTHORIZED")?;
    assert_fresh_uuid_v7(&unauthorized)?;
    let not_found = api.get("/no/such/route").await?;
    not_found.assert_error(404, "NOT_FOUND")?;
    assert_fresh_uuid_v7(&not_found)?;
    let wrong_method = api.request(Method::DELETE, "/wallets", &[], None).await?;
    wrong_method.assert_error(405, "NOT_FOUND")?;
    assert_fresh_uuid_v7(&wrong_method)?;
    let bad_json = api
        .request(Method::POST, "/send", &[], Some("{not json"))
        .await?;
    bad_json.assert_error(400, "INVALID_INPUT")?;
    assert_fresh_uuid_v7(&bad_json)?;
    // Two requests never share an id.
    assert_ne!(ok.request_id(), unauthorized.request_id());
    Ok(())
}

async fn well_formed_ids_are_kept_and_others_replaced(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    let api = svc.rest(&svc.api_key);
    let anon = svc.anonymous();
    for id in [
        "trace-123",
        "0192e3a4-1111-7000-8000-000000000000",
        "a:b.c_d",
    ] {
        let ok = api
            .request(Method::GET, "/wallets", &[("x-request-id", id)], None)
            .await?;
        assert_eq!(ok.request_id(), Some(id));
        let err = anon
            .request(Method::GET, "/wallets", &[("x-request-id", id)], None)
            .await?;
        err.assert_error(401, "UNAUTHORIZED")?;
        assert_eq!(err.request_id(), Some(id));
        let missing = api
            .request(Method::GET, "/nowhere", &[("x-request-id", id)], None)
            .await?;
        missing.assert_error(404, "NOT_FOUND")?;
        assert_eq!(missing.request_id(), Some(id));
    }
    let too_long = "x".repeat(129);
    for bad in ["has space", "quote\"d", "semi;colon", too_long.as_str()] {
        let reply = anon
            .request(Method::GET, "/wallets", &[("x-request-id", bad)], None)
            .await?;
        reply.assert_error(401, "UNAUTHORIZED")?;
        assert_ne!(reply.request_id(), Some(bad));
        assert_fresh_uuid_v7(&reply)?;
    }
    Ok(())
}

async fn grpc_responses_carry_the_request_id(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    let mut client = WalletOpsServiceClient::new(svc.channel().await?);
    let mut req = with_key(pb::ListWalletsRequest::default(), &svc.api_key)?;
    req.metadata_mut()
        .insert("x-request-id", "grpc-trace-1".parse()?);
    let resp = client.list_wallets(req).await?;
    assert_eq!(
        resp.metadata()
            .get("x-request-id")
            .and_then(|v| v.to_str().ok()),
        Some("grpc-trace-1")
    );
    let err = client
        .list_wallets(pb::ListWalletsRequest::default())
        .await
        .expect_err("no key");
    let id = err
        .metadata()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .expect("an id on errors too");
    assert_eq!(uuid::Uuid::parse_str(id)?.get_version_num(), 7);
    Ok(())
}

on_both_backends!(
    every_kind_of_response_carries_a_request_id,
    well_formed_ids_are_kept_and_others_replaced,
    grpc_responses_carry_the_request_id,
);
