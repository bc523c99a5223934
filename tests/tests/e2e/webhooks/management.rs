//! Endpoints: registered, listed, rotated and deleted over REST, gRPC and the CLI, under the
//! key's scopes; private addresses refused unless allowed.

use reqwest::Method;
use serde_json::json;
use walletops_proto::v1::{
    CreateWebhookRequest, ListWebhooksRequest, webhook_service_client::WebhookServiceClient,
};
use walletops_tests::{
    Backend, Options, Service, on_both_backends,
    webhooks::{Answer, Receiver},
    with_key,
};

use super::{all_settled, funded, send};

async fn endpoints_are_managed_over_rest(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    let api = svc.rest(&svc.api_key);
    let bad = api
        .post(
            "/webhooks",
            &json!({"url": "ftp://example.com/hook", "eventTypes": ["transaction.mined"]}),
        )
        .await?;
    bad.assert_invalid("url")?;
    // Named as the body spells it, not as the gRPC request does.
    bad.assert_invalid("eventTypes")?;
    assert!(!bad.text.contains("event_types"), "{}", bad.text);
    let hook = Receiver::start().await?;
    let created = api
        .post(
            "/webhooks",
            &json!({"url": hook.url(), "eventTypes": ["transaction.confirmed"]}),
        )
        .await?;
    assert_eq!(created.status, 201, "{}", created.text);
    let id = created.body["id"].as_str().unwrap_or_default().to_owned();
    let secret = created.body["secret"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(secret.starts_with("whsec_"), "{}", created.text);
    assert_eq!(created.body["eventTypes"], json!(["transaction.confirmed"]));
    let listed = api.get("/webhooks").await?;
    assert_eq!(listed.status, 200, "{}", listed.text);
    assert_eq!(listed.body["webhooks"][0]["id"], id.as_str());
    assert!(
        !listed.text.contains(&secret),
        "a secret is shown only once"
    );
    let rotated = api
        .post(&format!("/webhooks/{id}/rotate-secret"), &json!({}))
        .await?;
    assert_eq!(rotated.status, 200, "{}", rotated.text);
    let new_secret = rotated.body["secret"].as_str().unwrap_or_default();
    assert!(new_secret.starts_with("whsec_") && new_secret != secret);
    let none = api.get(&format!("/webhooks/{id}/deliveries")).await?;
    assert_eq!(none.body, json!({"deliveries": []}), "{}", none.text);
    api.get(&format!("/webhooks/{id}/deliveries?state=lost"))
        .await?
        .assert_invalid("state")?;
    // `limit` is 1 to 500, as documented: 0 is no default, 501 no cap.
    for limit in ["0", "501"] {
        let refused = api
            .get(&format!("/webhooks/{id}/deliveries?limit={limit}"))
            .await?;
        refused.assert_invalid("limit")?;
        assert!(refused.text.contains("1 to 500"), "{}", refused.text);
    }
    for limit in ["1", "500"] {
        let listed = api
            .get(&format!("/webhooks/{id}/deliveries?limit={limit}"))
            .await?;
        assert_eq!(listed.status, 200, "{}", listed.text);
    }
    // A replay naming something that is no delivery id names `deliveryIds`.
    let replay = api
        .post(
            &format!("/webhooks/{id}/deliveries/replay"),
            &json!({"deliveryIds": ["nope"]}),
        )
        .await?;
    replay.assert_invalid("deliveryIds")?;
    assert!(!replay.text.contains("delivery_ids"), "{}", replay.text);
    // A key that may read lists, but does not change, the endpoints.
    let reader = svc
        .cli(&["keys", "create", "--name", "reader", "--scopes", "read"])
        .await?
        .api_key()
        .expect("a key");
    let read_only = svc.rest(&reader);
    assert_eq!(read_only.get("/webhooks").await?.status, 200);
    let refused = read_only
        .post("/webhooks", &json!({"url": hook.url()}))
        .await?;
    refused.assert_error(403, "FORBIDDEN")?;
    assert!(refused.text.contains("write"), "{}", refused.text);
    let path = format!("/webhooks/{id}");
    let deleted = api.request(Method::DELETE, &path, &[], None).await?;
    assert_eq!(deleted.status, 200, "{}", deleted.text);
    assert_eq!(deleted.body["id"], id.as_str());
    assert_eq!(api.get("/webhooks").await?.body, json!({"webhooks": []}));
    api.request(Method::DELETE, &path, &[], None)
        .await?
        .assert_error(404, "NOT_FOUND")?;
    Ok(())
}

/// With private targets not allowed (the default outside tests), a URL whose host is or
/// resolves to a loopback or private address is refused, over REST and gRPC, and nothing
/// is stored.
async fn private_targets_are_refused_unless_allowed(b: Backend) -> anyhow::Result<()> {
    let options = Options::default().with_env("WALLETOPS_WEBHOOKS__ALLOW_PRIVATE_TARGETS", "false");
    let svc = Service::start_with(b, options).await?;
    let api = svc.rest(&svc.api_key);
    for url in [
        "http://127.0.0.1:9/hook",
        "http://localhost:9/hook",
        "http://10.0.0.7/hook",
        "http://169.254.169.254/latest/meta-data",
    ] {
        let reply = api.post("/webhooks", &json!({"url": url})).await?;
        reply.assert_invalid("url")?;
        assert!(reply.text.contains("not public"), "{}", reply.text);
    }
    let mut client = WebhookServiceClient::new(svc.channel().await?);
    let status = client
        .create_webhook(with_key(
            CreateWebhookRequest {
                url: "http://127.0.0.1:9/hook".to_owned(),
                event_types: vec![],
            },
            &svc.api_key,
        )?)
        .await
        .expect_err("refused");
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
    assert_eq!(api.get("/webhooks").await?.body, json!({"webhooks": []}));
    Ok(())
}

/// The CLI registers, lists and deletes endpoints of a user; gRPC callers see the same.
async fn the_cli_and_grpc_manage_endpoints(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    let hook = Receiver::start().await?;
    let made = svc
        .cli(&[
            "webhooks",
            "create",
            "--url",
            &hook.url(),
            "--events",
            "transaction.confirmed,transaction.failed",
        ])
        .await?;
    assert!(made.success, "{}", made.stderr);
    assert!(
        made.stdout.contains("Signing secret: whsec_"),
        "{}",
        made.stdout
    );
    let id = made
        .stdout
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned();
    let mut client = WebhookServiceClient::new(svc.channel().await?);
    let listed = client
        .list_webhooks(with_key(ListWebhooksRequest {}, &svc.api_key)?)
        .await?
        .into_inner();
    assert_eq!(listed.webhooks.len(), 1);
    assert_eq!(listed.webhooks[0].id, id);
    assert_eq!(
        listed.webhooks[0].event_types,
        ["transaction.confirmed", "transaction.failed"]
    );
    let list = svc.cli(&["webhooks", "list"]).await?;
    assert!(list.stdout.contains(&hook.url()), "{}", list.stdout);
    assert!(!list.stdout.contains("whsec_"), "{}", list.stdout);
    let dead = svc
        .cli(&["webhooks", "deliveries", &id, "--state", "dead"])
        .await?;
    assert!(dead.success && dead.stdout.is_empty(), "{dead:?}");
    let deleted = svc.cli(&["webhooks", "delete", &id]).await?;
    assert!(deleted.success, "{}", deleted.stderr);
    let listed = client
        .list_webhooks(with_key(ListWebhooksRequest {}, &svc.api_key)?)
        .await?
        .into_inner();
    assert!(listed.webhooks.is_empty());
    Ok(())
}

/// After a rotation every delivery is signed with the new secret; a deleted endpoint gets
/// nothing more while another endpoint of the user gets the events.
async fn rotation_and_deletion_take_effect_at_once(b: Backend) -> anyhow::Result<()> {
    let (_anvil, svc) = funded(b, &[]).await?;
    let api = svc.rest(&svc.api_key);
    let (kept, gone) = (Receiver::start().await?, Receiver::start().await?);
    let kept_id = kept.register(&api, &[]).await?;
    let gone_id = gone.register(&api, &[]).await?;
    let first = [send(&api).await?];
    kept.wait_until("the first payment's events", |r| all_settled(r, &first))
        .await?;
    let rotated = api
        .post(&format!("/webhooks/{kept_id}/rotate-secret"), &json!({}))
        .await?;
    assert_eq!(rotated.status, 200, "{}", rotated.text);
    kept.trust_only(rotated.body["secret"].as_str().unwrap_or_default());
    let deleted = api
        .request(Method::DELETE, &format!("/webhooks/{gone_id}"), &[], None)
        .await?;
    assert_eq!(deleted.status, 200, "{}", deleted.text);
    kept.answer(Answer::Status(200));
    let second = [send(&api).await?];
    let received = kept
        .wait_until("the second payment's events", |r| all_settled(r, &second))
        .await?;
    assert!(
        received.iter().all(|d| d.verified),
        "signed with the new secret: {received:?}"
    );
    assert!(
        gone.received().iter().all(|d| d.transaction() != second[0]),
        "a deleted endpoint got a delivery"
    );
    Ok(())
}

on_both_backends!(
    endpoints_are_managed_over_rest,
    private_targets_are_refused_unless_allowed,
    the_cli_and_grpc_manage_endpoints,
    rotation_and_deletion_take_effect_at_once,
);
