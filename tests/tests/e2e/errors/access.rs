//! The order of the checks: authentication before anything else, then input, then the
//! wallet's ownership, link to the signing provider and delegation.

use reqwest::Method;
use sea_orm::ConnectionTrait as _;
use serde_json::json;
use walletops_proto::v1::{self as pb, admin_service_client::AdminServiceClient};
use walletops_tests::{Backend, Service, as_admin, on_both_backends, reason};

use super::{SOME_EVM, assert_node_failed, dead_base_node, send_body};

async fn authentication_comes_before_input_checks(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    let anon = svc.anonymous();
    anon.post("/send", &send_body("not-a-chain"))
        .await?
        .assert_error(401, "UNAUTHORIZED")?;
    anon.post("/send", &json!({"amount": "-1"}))
        .await?
        .assert_error(401, "UNAUTHORIZED")?;
    anon.get("/wallets/balances?chain=nope")
        .await?
        .assert_error(401, "UNAUTHORIZED")?;
    // Also what the REST edge cannot read: it asks the core to admit the caller first.
    let valid = send_body("base").to_string();
    for (headers, body) in [
        (&[][..], "{\"chain\": "),
        (&[][..], "[]"),
        (&[("content-type", "text/plain")][..], valid.as_str()),
    ] {
        anon.request(Method::POST, "/send", headers, Some(body))
            .await?
            .assert_error(401, "UNAUTHORIZED")?;
    }
    for path in [
        "/wallets?defaultOnly=maybe",
        "/wallets/balances?chain=a&chain=b",
    ] {
        anon.get(path).await?.assert_error(401, "UNAUTHORIZED")?;
    }
    // And it counts against the caller's budget like any other write: 15 a minute.
    let api = svc.rest(&svc.api_key);
    for _ in 0..15 {
        api.request(Method::POST, "/send", &[], Some("{\"chain\": "))
            .await?
            .assert_error(400, "INVALID_INPUT")?;
    }
    api.request(Method::POST, "/send", &[], Some("{\"chain\": "))
        .await?
        .assert_error(429, "RATE_LIMITED")?;
    Ok(())
}

async fn wallets_of_others_are_forbidden_and_unknown_ones_not_found(
    b: Backend,
) -> anyhow::Result<()> {
    let svc = Service::start_with(b, dead_base_node()).await?;
    let bob = svc.create_user("bob").await?;
    let bobs_wallet = svc.rest(&bob).default_wallet("ethereum").await?;
    let api = svc.rest(&svc.api_key);
    api.get(&format!("/wallets/{bobs_wallet}/balances?chain=base"))
        .await?
        .assert_error_on(403, "FORBIDDEN", "address")?;
    api.get(&format!(
        "/wallets/balances?chain=base&address={bobs_wallet}"
    ))
    .await?
    .assert_error_on(403, "FORBIDDEN", "address")?;
    let mut from_bob = send_body("base");
    from_bob["from"] = json!(bobs_wallet);
    api.post("/send", &from_bob)
        .await?
        .assert_error_on(403, "FORBIDDEN", "from")?;
    api.get(&format!("/wallets/{SOME_EVM}/balances?chain=base"))
        .await?
        .assert_error_on(404, "WALLET_NOT_FOUND", "address")?;
    let mut from_nobody = send_body("base");
    from_nobody["from"] = json!(SOME_EVM);
    api.post("/send", &from_nobody)
        .await?
        .assert_error_on(404, "WALLET_NOT_FOUND", "from")?;
    api.get(&format!("/tx/{}", uuid::Uuid::new_v4()))
        .await?
        .assert_error(404, "NOT_FOUND")?;
    // Case does not matter for EVM addresses: the lowercase form is the same wallet, so
    // the read gets past the ownership check to the (dead) node.
    let own = api.default_wallet("ethereum").await?;
    assert_node_failed(
        api.get(&format!(
            "/wallets/{}/balances?chain=base",
            own.to_lowercase()
        ))
        .await?,
    )?;
    Ok(())
}

async fn undelegated_wallets_cannot_write(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start_with(b, dead_base_node()).await?;
    let api = svc.rest(&svc.api_key);
    let own = api.default_wallet("ethereum").await?;
    // Delegated, the send reaches the (dead) node.
    assert_node_failed(api.post("/send", &send_body("base")).await?)?;
    // Not linked to the signing provider, it cannot write, and its key stays unclaimed.
    let link = async |linked: bool| -> anyhow::Result<()> {
        svc.database()
            .await?
            .execute_unprepared(&format!(
                "UPDATE wallets SET linked = {linked} WHERE address = '{own}'"
            ))
            .await?;
        Ok(())
    };
    link(false).await?;
    let key = uuid::Uuid::new_v4().to_string();
    let body = send_body("base").to_string();
    let unlinked = api.post_with_key("/send", &key, &body).await?;
    unlinked.assert_error(403, "USER_NOT_LINKED")?;
    link(true).await?;
    assert_node_failed(api.post_with_key("/send", &key, &body).await?)?;
    let mut admin = AdminServiceClient::new(svc.admin_channel().await?);
    let req = as_admin(pb::UpdateWalletRequest {
        address: own.clone(),
        make_default: None,
        automation_enabled: Some(false),
    })?;
    let updated = admin
        .update_wallet(req)
        .await?
        .into_inner()
        .wallet
        .expect("wallet");
    assert!(!updated.automation_enabled);
    let reply = api.post("/send", &send_body("base")).await?;
    reply.assert_error(403, "WALLET_NOT_DELEGATED")?;
    // Reads still work on an undelegated wallet.
    assert_eq!(
        api.get("/wallets?automationOnly=true&chain=ethereum")
            .await?
            .body["wallets"],
        json!([])
    );
    // The admin service refuses a wrong token.
    let mut req = tonic::Request::new(pb::ListUsersRequest {});
    req.metadata_mut().insert("x-admin-token", "wrong".parse()?);
    let err = admin.list_users(req).await.expect_err("wrong token");
    assert_eq!(reason(&err).as_deref(), Some("UNAUTHORIZED"));
    Ok(())
}

on_both_backends!(
    authentication_comes_before_input_checks,
    wallets_of_others_are_forbidden_and_unknown_ones_not_found,
    undelegated_wallets_cannot_write,
);
